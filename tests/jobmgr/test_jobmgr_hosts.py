"""Daemons and drains in the job manager, driven by the host manager's host facts."""

from __future__ import annotations

from typing import Any

from jobmgr_driver import Jobmgr, changes, replayed_and_restored
from test_jobmgr_services import VOLUME, running, service

from peloton.model.event import Event

DAEMON = """\
name: node-exporter
type: DAEMON
defaultConfig:
  resource: {cpuLimit: 0.1, memLimitMb: 16}
  command: {value: ./export}
"""
ZONE_A = """\
  constraint: {hostLabel: {key: zone, equals: a}}
"""


def host(j: Jobmgr, name: str, state: str = "UP", present: bool = True,
         deadline_ms: int | None = None, **labels: str) -> list[Event]:
    return j.send("HostStateChanged", {
        "host": name, "at": j.now, "state": state, "previous_state": "UP",
        "present": present, "labels": labels, "reason": "", "deadline_ms": deadline_ms,
        "request": ""})


def daemon(j: Jobmgr, job_id: str = "dns", extra: str = "") -> list[Event]:
    from peloton.model.jobfile import parse_job_file
    return j.send("JobSubmitted", parse_job_file(DAEMON + extra, job_id, 0))


def pins(events: list[Event]) -> dict[int, str]:
    return {c["instance"]: c["pinned_host"] for e in events if e.type == "TaskStateChanged"
            for c in e.body["changes"] if c["state"] == "PENDING" and c["pinned_host"]}


def test_a_daemon_gets_one_instance_per_host_now_and_when_hosts_join() -> None:
    j = Jobmgr()
    host(j, "h1")
    host(j, "h2")
    assert pins(daemon(j)) == {0: "h1", 1: "h2"}
    assert pins(host(j, "h3")) == {2: "h3"}
    assert host(j, "h3") == []  # the same view again: nothing to decide
    assert len(j.book.jobs["dns"].tasks) == 3


def test_a_daemon_honours_its_host_constraint() -> None:
    j = Jobmgr()
    host(j, "h1", zone="a")
    host(j, "h2", zone="b")
    assert pins(daemon(j, extra=ZONE_A)) == {0: "h1"}
    assert pins(host(j, "h3", zone="a")) == {1: "h3"}


def test_a_daemon_instance_goes_with_its_host_and_a_new_one_comes_back_with_it() -> None:
    j = Jobmgr()
    host(j, "h1")
    daemon(j)
    j.to_running("dns", 0, "h1")
    out = host(j, "h1", present=False)
    assert ("dns", 0, 1, "RUNNING", "KILLING") in changes(out)
    j.status("h1", "dns", 0, "KILLED")
    assert j.task("dns", 0).run == 1  # killed for good: not restarted
    assert pins(host(j, "h1")) == {1: "h1"}  # a new instance id for the returning host


def test_a_drain_kills_batch_first_and_the_daemon_last() -> None:
    j = Jobmgr()
    host(j, "h1")
    daemon(j)
    j.to_running("dns", 0, "h1")
    j.submit("etl", 2)
    j.to_running("etl", 0, "h1")
    j.to_running("etl", 1, "h1")
    out = host(j, "h1", state="DRAINING")
    moved = {(c[0], c[1]) for c in changes(out) if c[4] == "PREEMPTING"}
    assert moved == {("etl", 0), ("etl", 1)}
    assert "a daemon stops last" in j.book.drain_reasons["h1"]
    assert [e for e in out if e.type == "TaskKillRequested"]
    j.status("h1", "etl", 0, "KILLED")
    out = j.status("h1", "etl", 1, "KILLED")
    retried = [c for c in changes(out) if c[3] == "INITIALIZED"]
    assert [(c[0], c[1], c[2]) for c in retried] == [("etl", 1, 2)]
    out = j.tick(2_000)
    assert ("dns", 0, 1, "RUNNING", "PREEMPTING") in changes(out)


def test_a_drain_keeps_a_stateful_job_within_its_maximum_unavailable() -> None:
    j = Jobmgr()
    for h in ("h0", "h1", "h2"):
        host(j, h)
    j.send("JobSubmitted", service("db", 3, kind="STATEFUL", extra=VOLUME))
    j.to_running("db", 0, "h0")
    j.to_running("db", 1, "h0")
    j.to_running("db", 2, "h1")
    out = host(j, "h0", state="DRAINING")
    assert [c[:2] for c in changes(out) if c[4] == "PREEMPTING"] == [("db", 0)]
    assert "SLA allows 1" in j.book.drain_reasons["h0"]
    assert changes(j.tick(2_000)) == []  # instance 0 is still down: 1 unavailable
    out = j.status("h0", "db", 0, "KILLED")
    assert pins(out) == {0: "h0"}  # it waits for its volume's host
    assert changes(j.tick(2_000)) == []  # and stays unavailable meanwhile


def test_a_passed_deadline_kills_whatever_is_left() -> None:
    j = Jobmgr()
    host(j, "h0")
    j.send("JobSubmitted", service("web", 2))
    j.to_running("web", 0, "h0")
    j.to_running("web", 1, "h0")
    host(j, "h0", state="DRAINING", deadline_ms=j.now + 5_000)  # web/0: a replacement
    out = j.tick(10_000)
    # web/0's old run goes although its replacement has not started; web/1 has none
    assert [c for c in changes(out) if c[4] in ("KILLING", "PREEMPTING")] == [
        ("web", 0, 1, "RUNNING", "KILLING"), ("web", 1, 1, "RUNNING", "PREEMPTING")]
    assert all("deadline" in c["reason"] for e in out if e.type == "TaskStateChanged"
               for c in e.body["changes"] if c["state"] in ("KILLING", "PREEMPTING"))


def test_a_drained_stateful_instance_waits_for_its_host() -> None:
    j = Jobmgr()
    host(j, "h0")
    running(j, "db", 1, kind="STATEFUL", extra=VOLUME)
    host(j, "h0", state="DRAINING")
    out = j.status("h0", "db", 0, "KILLED")
    assert pins(out) == {0: "h0"}


def test_hosts_daemons_and_host_index_survive_replay_and_snapshot() -> None:
    j = Jobmgr()
    host(j, "h1", zone="a")
    host(j, "h2", zone="a")
    daemon(j, extra=ZONE_A)
    j.to_running("dns", 0, "h1")
    j.send("JobSubmitted", service("web", 1))
    j.to_running("web", 0, "h1")
    host(j, "h2", present=False)
    restored = replayed_and_restored(j)
    assert restored.on_host == j.book.on_host == {"h1": {("dns", 0): None, ("web", 0): None}}
    assert restored.daemon_jobs == {"dns"}
    # the restored book decides the same as the live one
    a: Any = host(j, "h1", state="DRAINING")
    j.book = restored
    j.now -= 10
    b: Any = host(j, "h1", state="DRAINING")
    assert [(e.type, e.body) for e in a] == [(e.type, e.body) for e in b]


def test_two_hosts_draining_at_once_share_the_job_budget() -> None:
    j = Jobmgr()
    for h in ("h0", "h1", "h2"):
        host(j, h)
    j.send("JobSubmitted", service("db", 3, kind="STATEFUL", extra=VOLUME))  # max 1 down
    j.to_running("db", 0, "h0")
    j.to_running("db", 1, "h1")
    j.to_running("db", 2, "h2")
    j.book.hosts.apply({"host": "h0", "at": j.now, "state": "DRAINING", "present": True,
                        "labels": {}, "deadline_ms": None})
    j.book.hosts.apply({"host": "h1", "at": j.now, "state": "DRAINING", "present": True,
                        "labels": {}, "deadline_ms": None})
    out = j.tick(2_000)
    assert [c[:2] for c in changes(out) if c[4] == "PREEMPTING"] == [("db", 0)]
    assert "SLA allows 1" in j.book.drain_reasons["h1"]


def _pinned_wait(j: Jobmgr, job_id: str, instance: int, host_name: str) -> None:
    """The daemon run is admitted and the placement engine says it waits for its host."""
    j.send("TasksAdmitted", {"at": j.now, "pool": "/default", "tasks": [
        {"job_id": job_id, "instance": instance, "run": 1, "pinned_host": host_name,
         "config_version": 1}]})
    j.send("PlacementFailed", {"at": j.now, "round": 7, "tasks": [
        {"job_id": job_id, "instance": instance, "run": 1, "reason":
         f"waiting for host {host_name} (the run is pinned to it): no room"}]})


def test_a_daemon_that_cannot_fit_preempts_batch_work_on_its_host() -> None:
    j = Jobmgr()
    host(j, "h1")
    j.submit("low", 2, cpu=1.0, priority=1)
    j.submit("high", 1, cpu=1.0, priority=5)
    j.submit("keep", 1, cpu=1.0, preemptible=False)
    j.send("JobSubmitted", service("web", 1))
    for job_id, i in (("low", 0), ("low", 1), ("high", 0), ("keep", 0), ("web", 0)):
        j.to_running(job_id, i, "h1")
    daemon(j)  # 0.1 cpu
    _pinned_wait(j, "dns", 0, "h1")
    out = j.tick(2_000)
    taken = [c[:2] for c in changes(out) if c[4] == "PREEMPTING"]
    assert taken == [("low", 1)]  # lowest priority, newest first; 1 cpu covers 0.1
    reason = j.task("low", 1).reason
    assert reason.startswith("PREEMPTED (DAEMON: daemon dns/0 needs room on host h1")
    assert changes(j.tick(2_000)) == []  # room on its way: no more victims
    j.status("h1", "low", 1, "KILLED")
    assert j.task("low", 1).run == 2  # retried elsewhere, not failed


def test_a_daemon_never_takes_long_running_or_non_preemptible_work() -> None:
    j = Jobmgr()
    host(j, "h1")
    j.submit("keep", 1, cpu=1.0, preemptible=False)
    j.send("JobSubmitted", service("web", 1))
    j.to_running("keep", 0, "h1")
    j.to_running("web", 0, "h1")
    daemon(j)
    _pinned_wait(j, "dns", 0, "h1")
    assert [c for c in changes(j.tick(2_000)) if c[4] == "PREEMPTING"] == []


def test_a_host_that_is_no_longer_draining_has_no_drain_reason() -> None:
    j = Jobmgr()
    host(j, "h1")
    j.submit("etl", 1)
    j.to_running("etl", 0, "h1")
    host(j, "h1", state="DRAINING")
    assert "h1" in j.book.drain_reasons
    host(j, "h1", state="DRAINED")  # read live (handle), not only on replay (apply)
    assert "h1" not in j.book.drain_reasons
