"""Long-running jobs in the job manager: restarts with backoff, health, job state, pins."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings
from jobmgr_driver import Jobmgr, changes, job_states, replayed_and_restored

from peloton.jobmgr.domain.book import JobBook
from peloton.jobmgr.domain.timeouts import Timeouts
from peloton.model.backoff import restart_delay_ms
from peloton.model.jobfile import parse_job_file

SERVICE = """\
name: web
type: {kind}
instanceCount: {n}
sla: {{maximumUnavailableInstances: 1}}
defaultConfig:
  resource: {{cpuLimit: 0.5, memLimitMb: 32}}
  command: {{value: ./serve}}
{extra}"""
CHECK = """\
  healthCheck: {type: COMMAND, commandCheck: {command: 'true'}, intervalSecs: 1}
"""
VOLUME = """\
  volume: {containerPath: /data, sizeMB: 10}
"""


def service(job_id: str, n: int = 2, kind: str = "SERVICE", extra: str = "") -> dict[str, Any]:
    return parse_job_file(SERVICE.format(kind=kind, n=n, extra=extra), job_id, 0)


def running(j: Jobmgr, job_id: str, n: int, **kw: Any) -> None:
    j.send("JobSubmitted", service(job_id, n, **kw))
    for i in range(n):
        j.to_running(job_id, i, f"h{i}")


def test_a_service_is_running_while_its_instances_run_and_never_succeeds() -> None:
    j = Jobmgr()
    running(j, "web", 2)
    assert j.job_state("web") == "RUNNING"
    out = j.status("h0", "web", 0, "SUCCEEDED", exit_code=0)
    assert ("web", 0, 2, "INITIALIZED", "PENDING") in changes(out)  # restarted
    assert j.job_state("web") == "RUNNING"
    assert j.task("web", 0).run == 2


def test_restarts_back_off_after_each_exit_and_the_streak_resets_after_healthy_time() -> None:
    j = Jobmgr()
    running(j, "web", 1)
    delays = []
    for run in range(1, 5):
        out = j.status("h0", "web", 0, "FAILED", run=run, exit_code=1)
        restart = [c for e in out if e.type == "TaskStateChanged" for c in e.body["changes"]
                   if c["state"] == "PENDING"][0]
        delays.append(restart["not_before_ms"] - j.now)
        j.to_running("web", 0, "h0", run=run + 1)
    assert delays == [restart_delay_ms(n) for n in (1, 2, 3, 4)] == [30_000, 60_000,
                                                                    120_000, 240_000]
    j.now += 10 * 60_000  # run 5 has been healthy (running, no check) for 10 min
    out = j.status("h0", "web", 0, "FAILED", run=5, exit_code=1)
    restart = [c for e in out if e.type == "TaskStateChanged" for c in e.body["changes"]
               if c["state"] == "PENDING"][0]
    assert restart["not_before_ms"] - j.now == 30_000
    assert "backoff" in restart["reason"]


def test_a_lost_or_preempted_instance_restarts_at_once() -> None:
    j = Jobmgr()
    running(j, "web", 2)
    out = j.send("HostLost", {"host": "h0", "incarnation": "i", "at": j.now, "reason": "gone",
                              "runs": ["web-0-1"]})
    restart = [c for e in out if e.type == "TaskStateChanged" for c in e.body["changes"]
               if c["state"] == "PENDING"]
    assert restart and restart[0]["not_before_ms"] is None


def test_the_backoff_base_is_configurable() -> None:
    j = Jobmgr(JobBook(timeouts=Timeouts(restart_base_ms=1_000)))
    running(j, "web", 1)
    out = j.status("h0", "web", 0, "FAILED", exit_code=1)
    restart = [c for e in out if e.type == "TaskStateChanged" for c in e.body["changes"]
               if c["state"] == "PENDING"][0]
    assert restart["not_before_ms"] - j.now == 1_000


def test_a_stopped_service_ends_killed_and_is_not_restarted() -> None:
    j = Jobmgr()
    running(j, "web", 2)
    out = j.send("JobKillRequested", {"job_id": "web", "at": j.now, "instances": [],
                                      "reason": "stop", "requested_by": "me"})
    assert ("RUNNING", "KILLING") in job_states(out)
    j.status("h0", "web", 0, "KILLED")
    out = j.status("h1", "web", 1, "KILLED")
    assert ("KILLING", "KILLED") in job_states(out)
    assert all(t.run == 1 for t in j.book.jobs["web"].tasks)


def test_health_reports_become_task_health_changes_once() -> None:
    j = Jobmgr()
    running(j, "web", 1, extra=CHECK)
    out = j.status("h0", "web", 0, "RUNNING", health="PENDING")
    assert [(e.type, e.body["changes"][0]["health"]) for e in out] == [
        ("TaskHealthChanged", "PENDING")]
    assert j.status("h0", "web", 0, "RUNNING", health="PENDING") == []  # no change
    out = j.status("h0", "web", 0, "RUNNING", health="HEALTHY")
    assert j.task("web", 0).health == "HEALTHY"
    assert j.task("web", 0).backoff.healthy_since_ms == j.now
    # a report about an older run is stale
    j.status("h0", "web", 0, "FAILED", exit_code=1)
    assert j.status("h0", "web", 0, "RUNNING", run=1, health="HEALTHY") == []
    assert j.task("web", 0).health == ""


def test_a_stateful_instance_is_pinned_to_its_volume_host() -> None:
    j = Jobmgr()
    running(j, "db", 2, kind="STATEFUL", extra=VOLUME)
    assert j.book.jobs["db"].spec.type == "STATEFUL"
    out = j.status("h1", "db", 1, "FAILED", exit_code=3)
    restart = [c for e in out if e.type == "TaskStateChanged" for c in e.body["changes"]
               if c["state"] == "PENDING"][0]
    assert restart["pinned_host"] == "h1"
    assert "on h1" in restart["reason"]
    # even when its host is lost: it waits for the host that keeps its data
    j.to_running("db", 1, "h1", run=2)
    out = j.send("HostLost", {"host": "h1", "incarnation": "i", "at": j.now, "reason": "gone",
                              "runs": ["db-1-2"]})
    restart = [c for e in out if e.type == "TaskStateChanged" for c in e.body["changes"]
               if c["state"] == "PENDING"][0]
    assert restart["pinned_host"] == "h1"


def test_a_service_that_is_not_stateful_is_not_pinned() -> None:
    j = Jobmgr()
    running(j, "web", 1)
    out = j.status("h0", "web", 0, "FAILED", exit_code=1)
    assert all(c.get("pinned_host") is None for e in out if e.type == "TaskStateChanged"
               for c in e.body["changes"])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["exit", "fail", "healthy", "lost", "wait"]), max_size=12))
def test_replay_and_snapshot_rebuild_the_same_services(steps: list[str]) -> None:
    j = Jobmgr()
    running(j, "db", 1, kind="STATEFUL", extra=VOLUME + CHECK)
    for step in steps:
        task = j.task("db", 0)
        if step == "wait":
            j.tick(60_000)
            continue
        if task.state.value != "RUNNING":
            j.to_running("db", 0, "h0", run=task.run)
        if step == "healthy":
            j.status("h0", "db", 0, "RUNNING", run=task.run, health="HEALTHY")
        elif step == "lost":
            j.send("HostLost", {"host": "h0", "incarnation": "i", "at": j.now,
                                "reason": "gone", "runs": [f"db-0-{task.run}"]})
        else:
            j.status("h0", "db", 0, "SUCCEEDED" if step == "exit" else "FAILED",
                     run=task.run, exit_code=0 if step == "exit" else 1)
    replayed_and_restored(j)


def test_a_preempted_batch_task_can_be_preempted_again_and_retried_after_a_failure() -> None:
    # regression: the end of a preemption (KILLED) used to mark the task as killed by a
    # user for good, so its next run could be neither preempted nor retried
    j = Jobmgr()
    j.submit("etl", 1, max_failures=1)
    j.to_running("etl", 0, "h0")
    victim = {"job_id": "etl", "instance": 0, "run": 1, "reason": "POOL_OVER_ENTITLEMENT",
              "detail": "over"}
    j.send("TasksPreempted", {"at": j.now, "pool": "/default", "tasks": [victim]})
    j.status("h0", "etl", 0, "KILLED")
    assert j.task("etl", 0).run == 2 and not j.task("etl", 0).kill_requested
    j.to_running("etl", 0, "h0", run=2)
    out = j.send("TasksPreempted", {"at": j.now, "pool": "/default",
                                    "tasks": [{**victim, "run": 2}]})
    assert ("etl", 0, 2, "RUNNING", "PREEMPTING") in changes(out)
    j.status("h0", "etl", 0, "KILLED", run=2)
    j.to_running("etl", 0, "h0", run=3)
    out = j.status("h0", "etl", 0, "FAILED", run=3, exit_code=1)
    assert ("etl", 0, 4, "INITIALIZED", "PENDING") in changes(out)  # retried


def test_preemption_honours_the_maximum_unavailable_instances() -> None:
    j = Jobmgr()
    running(j, "web", 3)  # maximumUnavailableInstances: 1
    victims = [{"job_id": "web", "instance": i, "run": 1, "reason": "POOL_OVER_ENTITLEMENT",
                "detail": "over"} for i in range(3)]
    out = j.send("TasksPreempted", {"at": j.now, "pool": "/default", "tasks": victims})
    assert [c[:2] for c in changes(out) if c[4] == "PREEMPTING"] == [("web", 0)]
    # while instance 0 is down, no other instance may be taken
    out = j.send("TasksPreempted", {"at": j.now, "pool": "/default", "tasks": victims[1:]})
    assert changes(out) == []
