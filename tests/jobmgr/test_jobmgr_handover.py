"""Drains replace service runs first: the old run serves until its replacement runs
healthily elsewhere (jobmgr/domain/handover.py), and everything else about the instance
(kills, host loss, its own end, replay, snapshots) keeps working meanwhile."""

from __future__ import annotations

from event_bodies import host_lost
from hypothesis import given, settings
from hypothesis import strategies as st
from jobmgr_driver import Jobmgr, changes, replayed_and_restored
from test_jobmgr_hosts import host
from test_jobmgr_services import CHECK, service

from peloton.jobmgr.domain.availability import unavailable
from peloton.jobmgr.domain.records import Batch
from peloton.model.event import Event


def kills(events: list[Event]) -> list[tuple[str, str, int, int]]:
    return [(e.body["host"], k["job_id"], k["instance"], k["run"])
            for e in events if e.type == "TaskKillRequested" for k in e.body["kills"]]


def draining_web(j: Jobmgr, n: int = 2, extra: str = "") -> list[Event]:
    """web/0 on h0, the others on h1; h0 starts draining."""
    for h in ("h0", "h1", "h2"):
        host(j, h)
    j.send("JobSubmitted", service("web", n, extra=extra))  # maximumUnavailableInstances 1
    for i in range(n):
        j.to_running("web", i, "h0" if i == 0 else "h1")
    return host(j, "h0", state="DRAINING")


def test_the_replacement_starts_before_the_old_run_is_killed() -> None:
    j = Jobmgr()
    out = draining_web(j)
    assert changes(out) == [("web", 0, 2, "INITIALIZED", "PENDING")]
    assert kills(out) == []
    assert [c["reason"] for e in out if e.type == "TaskStateChanged"
            for c in e.body["changes"]][0].startswith("REPLACEMENT: run 1 keeps serving")
    web = j.book.jobs["web"]
    assert unavailable(web, Batch()) == 0  # the old run still serves
    assert j.job_state("web") == "RUNNING"
    assert j.book.outgoing == {"h0": {("web", 0): None}}
    assert changes(j.tick(2_000)) == []  # nothing more until the replacement runs
    assert "replacement is starting" in j.book.drain_reasons["h0"]
    out = j.to_running("web", 0, "h2", run=2)
    out += j.tick(1_000)
    assert ("web", 0, 1, "RUNNING", "KILLING") in changes(out)
    assert kills(out) == [("h0", "web", 0, 1)]
    assert j.task("web", 0).run == 2 and j.task("web", 0).host == "h2"
    out = j.status("h0", "web", 0, "KILLED", run=1)
    assert changes(out) == [("web", 0, 1, "KILLING", "KILLED")]  # no restart: run 2 serves
    assert j.task("web", 0).outgoing is None and j.book.outgoing == {"h0": {}}
    assert j.task("web", 0).state.value == "RUNNING" and not j.task("web", 0).kill_requested


def test_a_health_checked_replacement_must_pass_its_check_first() -> None:
    j = Jobmgr()
    draining_web(j, extra=CHECK)
    j.to_running("web", 0, "h2", run=2)
    assert kills(j.tick(1_000)) == []  # running, health not passed yet
    j.status("h2", "web", 0, "RUNNING", run=2, health="HEALTHY")
    assert kills(j.tick(1_000)) == [("h0", "web", 0, 1)]


def test_one_replacement_per_job_at_a_time_and_stopped_runs_cost_nothing() -> None:
    j = Jobmgr()
    for h in ("h0", "h1"):
        host(j, h)
    j.send("JobSubmitted", service("web", 3))
    for i in range(3):
        j.to_running("web", i, "h0")
    out = host(j, "h0", state="DRAINING")
    assert changes(out) == [("web", 0, 2, "INITIALIZED", "PENDING")]
    assert "1 replacement(s) of job web starting already" in j.book.drain_reasons["h0"]
    j.to_running("web", 0, "h1", run=2)
    out = j.tick(1_000)
    assert ("web", 0, 1, "RUNNING", "KILLING") in changes(out)
    assert ("web", 1, 2, "INITIALIZED", "PENDING") in changes(out)  # the next one


def test_killing_the_job_kills_the_old_run_too() -> None:
    j = Jobmgr()
    draining_web(j)
    out = j.send("JobKillRequested", {"job_id": "web", "at": j.now, "instances": [],
                                      "reason": "done", "requested_by": "me"})
    assert ("h0", "web", 0, 1) in kills(out)
    assert ("web", 0, 1, "RUNNING", "KILLING") in changes(out)
    assert ("web", 0, 2, "PENDING", "KILLED") in changes(out)
    j.status("h0", "web", 0, "KILLED", run=1)
    j.status("h1", "web", 1, "KILLED")
    assert j.job_state("web") == "KILLED"


def test_the_old_run_lost_with_its_host_or_ending_alone_is_recorded_once() -> None:
    j = Jobmgr()
    draining_web(j)
    out = j.status("h0", "web", 0, "FAILED", run=1, exit_code=3)
    assert changes(out) == [("web", 0, 1, "RUNNING", "FAILED")]  # no new run: 2 exists
    assert changes(j.status("h0", "web", 0, "FAILED", run=1, exit_code=3)) == []
    j2 = Jobmgr()
    draining_web(j2)
    out = j2.send("HostLost", host_lost("h0", runs=["web-0-1"], at=j2.now))
    assert changes(out) == [("web", 0, 1, "RUNNING", "LOST")]
    assert j2.task("web", 0).run == 2 and j2.task("web", 0).outgoing is None


def test_a_handover_survives_replay_and_snapshot_and_decides_the_same() -> None:
    j = Jobmgr()
    draining_web(j)
    j.to_running("web", 0, "h2", run=2)
    restored = replayed_and_restored(j)
    assert restored.outgoing == j.book.outgoing == {"h0": {("web", 0): None}}
    a = j.book.tick(j.now + 1_000)
    b = restored.tick(j.now + 1_000)
    assert [(e.type, e.body) for e in a] == [(e.type, e.body) for e in b]
    assert kills(a) == [("h0", "web", 0, 1)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["replacement_runs", "healthy", "old_ends", "tick",
                                 "replacement_fails", "kill_job"]), max_size=8))
def test_an_instance_never_has_two_runs_unaccounted(steps: list[str]) -> None:
    """Whatever happens during a handover, the instance has at most its current run and
    one outgoing run; the old run is killed only after the current one ran (or the job
    was killed), and every old run's end is published once."""
    j = Jobmgr()
    draining_web(j, extra=CHECK)
    ran = False
    ends = 0
    for step in steps:
        task = j.task("web", 0)
        if step == "replacement_runs" and task.state.value in ("PENDING", "INITIALIZED"):
            j.to_running("web", 0, "h2", run=task.run)
            ran = True
        elif step == "healthy" and task.state.value == "RUNNING":
            j.status("h2", "web", 0, "RUNNING", run=task.run, health="HEALTHY")
        elif step == "old_ends":
            ends += sum(1 for c in changes(j.status("h0", "web", 0, "KILLED", run=1))
                        if c[2] == 1)
        elif step == "replacement_fails" and task.state.value == "RUNNING":
            j.status("h2", "web", 0, "FAILED", run=task.run, exit_code=1)
        elif step == "kill_job":
            j.send("JobKillRequested", {"job_id": "web", "at": j.now, "instances": [],
                                        "reason": "done", "requested_by": "me"})
        out = j.tick(1_000)
        for _, _, instance, run in kills(out):
            if run == 1 and instance == 0:
                assert ran or j.book.jobs["web"].kill_requested
        assert ends <= 1
        task = j.task("web", 0)
        assert task.outgoing is None or (task.outgoing.run == 1 and task.run > 1)
