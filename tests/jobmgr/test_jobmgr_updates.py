"""Rolling updates in the job manager: requests, the roll, failures, commands, replay."""

from __future__ import annotations

import json
from typing import Any

from jobmgr_driver import Jobmgr, changes
from test_jobmgr_services import running, service

from peloton.jobmgr.domain.book import JobBook
from peloton.jobmgr.domain.snapshot import book_from_data, book_to_data
from peloton.model.event import Event
from peloton.model.taskstate import TaskState


def update_request(j: Jobmgr, job_id: str, *, n: int = 3, command: str = "./serve --v2",
                   update_id: str = "u1", **settings: Any) -> dict[str, Any]:
    config = service(job_id, n)
    config["default_config"]["command"] = command
    return {"job_id": job_id, "update_id": update_id, "at": j.now + 1, "requested_by": "me",
            "config": config, "settings": settings}


def send_update(j: Jobmgr, job_id: str = "web", **kw: Any) -> list[Event]:
    return j.send("JobUpdateRequested", update_request(j, job_id, **kw))


def state(j: Jobmgr, job_id: str = "web") -> str:
    return str(j.book.updates[job_id].update.status.state.value)


def unavailable(j: Jobmgr, job_id: str = "web") -> int:
    return sum(1 for t in j.book.jobs[job_id].tasks if t.state != TaskState.RUNNING)


def settle(j: Jobmgr, job_id: str = "web", fail_version: int | None = None,
           max_unavailable: int | None = None, steps: int = 40) -> None:
    """Play the cluster: replaced runs end KILLED, new runs start RUNNING (or exit 1 when
    their version is `fail_version`), ticking between; check unavailability all along."""
    for _ in range(steps):
        for t in list(j.book.jobs[job_id].tasks):
            if t.state in (TaskState.PREEMPTING, TaskState.KILLING):
                j.status(t.host or "h0", job_id, t.instance, "KILLED", run=t.run)
            elif t.state == TaskState.PENDING and not t.kill_requested:
                j.to_running(job_id, t.instance, f"h{t.instance}", run=t.run)
                if t.config_version == fail_version:
                    j.status(f"h{t.instance}", job_id, t.instance, "FAILED", run=t.run,
                             exit_code=1)
            if max_unavailable is not None:
                assert unavailable(j, job_id) <= max_unavailable, j.book.jobs[job_id].tasks
        j.tick(2_000)
        if not j.book.updates[job_id].live:
            return


def test_a_rolling_update_replaces_instances_one_batch_at_a_time() -> None:
    j = Jobmgr()
    running(j, "web", 3)
    out = send_update(j, batch_size=1)
    assert [e.type for e in out][:2] == ["JobSpecChanged", "UpdateStateChanged"]
    assert out[0].body["version"] == 2
    assert [c[:2] for c in changes(out) if c[4] == "PREEMPTING"] == [("web", 0)]
    assert state(j) == "ROLLING_FORWARD"
    settle(j, max_unavailable=1)
    assert state(j) == "SUCCEEDED"
    tasks = j.book.jobs["web"].tasks
    assert [t.config_version for t in tasks] == [2, 2, 2]
    assert all(t.state == TaskState.RUNNING for t in tasks)
    assert j.book.jobs["web"].spec.default_task.command == "./serve --v2"
    assert "SUCCEEDED" in j.book.updates["web"].reason


def test_max_unavailable_is_honoured_with_a_big_batch() -> None:
    j = Jobmgr()
    running(j, "web", 4)
    out = send_update(j, n=4, batch_size=4, max_unavailable=2)
    assert len([c for c in changes(out) if c[4] == "PREEMPTING"]) == 2
    assert "max-unavailable 2 reached" in j.book.updates["web"].reason
    settle(j, max_unavailable=2)
    assert state(j) == "SUCCEEDED"


def test_a_failing_version_rolls_back_when_asked() -> None:
    j = Jobmgr()
    running(j, "web", 3)
    send_update(j, batch_size=1, max_instance_retries=1, max_tolerable_instance_failures=1,
                rollback_on_failure=True)
    settle(j, fail_version=2, max_unavailable=1)
    assert state(j) == "ROLLED_BACK"
    assert [t.config_version for t in j.book.jobs["web"].tasks] == [1, 1, 1]


def test_without_rollback_a_failing_version_fails_the_update() -> None:
    j = Jobmgr()
    running(j, "web", 2)
    send_update(j, n=2, batch_size=1, max_instance_retries=1,
                max_tolerable_instance_failures=1)
    settle(j, fail_version=2)
    assert state(j) == "FAILED"


def test_instance_count_changes_are_updates() -> None:
    j = Jobmgr()
    running(j, "web", 2)
    send_update(j, n=4)
    settle(j)
    assert state(j) == "SUCCEEDED"
    assert [t.config_version for t in j.book.jobs["web"].tasks] == [2, 2, 2, 2]
    send_update(j, n=1, command="./serve --v3", update_id="u2")
    settle(j)
    assert state(j) == "SUCCEEDED"
    tasks = j.book.jobs["web"].tasks
    assert tasks[0].config_version == 3 and tasks[0].state == TaskState.RUNNING
    assert all(t.state == TaskState.KILLED and t.kill_requested for t in tasks[1:])
    assert j.job_state("web") == "RUNNING"


def test_pause_resume_abort_and_canary() -> None:
    j = Jobmgr()
    running(j, "web", 4)
    send_update(j, n=4, canary=1, batch_size=1)
    settle(j)
    assert j.book.updates["web"].update.status.resume_to is not None  # paused
    assert "canary" in j.book.updates["web"].reason
    assert [t.config_version for t in j.book.jobs["web"].tasks] == [2, 1, 1, 1]
    out = j.send("UpdateCommandRequested", {"job_id": "web", "update_id": "", "at": j.now + 1,
                                             "command": "resume", "requested_by": "me"})
    assert state(j) == "ROLLING_FORWARD" and out
    j.send("UpdateCommandRequested", {"job_id": "web", "update_id": "u1", "at": j.now + 1,
                                      "command": "abort", "requested_by": "me"})
    assert state(j) == "ABORTED"
    out = j.send("UpdateCommandRequested", {"job_id": "web", "update_id": "u1",
                                             "at": j.now + 1, "command": "resume",
                                             "requested_by": "me"})
    assert [e.type for e in out] == ["JobUpdateRejected"]
    assert "ABORTED" in out[0].body["reasons"][0]


def test_bad_requests_are_rejected_with_every_reason_and_change_nothing() -> None:
    j = Jobmgr()
    running(j, "web", 2)
    j.submit("etl", 1)
    out = send_update(j, "nope")
    assert out[0].body["reasons"] == ["job_id: no running job nope"]
    out = send_update(j, "etl", n=1)
    assert out[0].type == "JobUpdateRejected"
    assert out[0].body["reasons"][0].startswith("type: only SERVICE and STATEFUL")
    bad = update_request(j, "web", batch_size=-1)
    bad["config"]["default_config"]["cpu_limit"] = 0.0
    bad["config"]["respool"] = "/other"
    out = j.send("JobUpdateRequested", bad)
    assert [e.type for e in out] == ["JobUpdateRejected"]
    assert out[0].body["reasons"] == [
        "config.defaultConfig.resource.cpuLimit: must be > 0 (got 0.0)",
        "settings.batchSize: must be >= 0"]
    assert j.book.jobs["web"].versions.keys() == {1}
    send_update(j, n=2, start_paused=True)
    assert j.book.updates["web"].update.status.resume_to is not None
    out = send_update(j, n=2, update_id="u2")
    assert out[0].body["reasons"] == [
        "update: job web already has update u1 (PAUSED (resumes ROLLING_FORWARD)); pause, "
        "abort or wait for it"]


def test_an_update_survives_replay_and_snapshot_midway() -> None:
    j = Jobmgr()
    running(j, "web", 3)
    send_update(j, batch_size=1)
    settle(j, steps=2)
    assert j.book.updates["web"].live
    replayed = JobBook()
    for etype, body in j.log:
        replayed.apply(etype, body)
    live = book_to_data(j.book)
    assert book_to_data(replayed) == live
    j.book = book_from_data(json.loads(json.dumps(live)), j.book.retention_ms)
    settle(j, max_unavailable=1)
    assert state(j) == "SUCCEEDED"


def test_a_request_read_but_not_decided_is_decided_by_reconcile() -> None:
    j = Jobmgr()
    running(j, "web", 2)
    body = update_request(j, "web", n=2)
    j.book.apply("JobUpdateRequested", body)  # folded on replay; the crash lost the answer
    out = j.book.reconcile(j.now + 5)
    assert [e.type for e in out][:2] == ["JobSpecChanged", "UpdateStateChanged"]
    assert j.book.reconcile(j.now + 6) == []


def test_a_restart_of_some_instances_rolls_only_those() -> None:
    j = Jobmgr()
    running(j, "web", 3)
    body = update_request(j, "web", command="./serve", batch_size=1)  # the same config
    body["instances"] = [0, 2]
    j.send("JobUpdateRequested", body)
    settle(j, max_unavailable=1)
    assert state(j) == "SUCCEEDED"
    assert [t.run for t in j.book.jobs["web"].tasks] == [2, 1, 2]
    bad = update_request(j, "web", command="./serve", update_id="u2")
    bad["instances"] = [7]
    out = j.send("JobUpdateRequested", bad)
    assert out[0].body["reasons"] == ["instances: no instance 7 in job web"]
