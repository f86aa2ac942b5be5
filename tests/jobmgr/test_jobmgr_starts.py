"""Starting stopped instances of a live service again (a service with every instance
stopped is STOPPED, not ended); a killed job has ended and does not start again, nor does
a batch job or a daemon; replay gives the same book."""

from __future__ import annotations

import json

from jobmgr_driver import Jobmgr, changes, replayed_and_restored
from test_jobmgr_hosts import daemon, host
from test_jobmgr_services import running

from peloton.jobmgr.domain.book import JobBook
from peloton.jobmgr.domain.snapshot import book_from_data, book_to_data


def stop(j: Jobmgr, job_id: str, *instances: int) -> None:
    j.send("JobKillRequested", {"job_id": job_id, "at": j.now, "instances": list(instances),
                                "reason": "stop", "requested_by": "me"})


def stopped_service(j: Jobmgr) -> None:
    """web/0 on h0 and web/1 on h1, both stopped and ended."""
    running(j, "web", 2)
    stop(j, "web", 0, 1)
    j.status("h0", "web", 0, "KILLED")
    j.status("h1", "web", 1, "KILLED")


def start(j: Jobmgr, job_id: str, *instances: int) -> list:  # type: ignore[type-arg]
    return j.send("JobStartRequested", {"job_id": job_id, "at": j.now,
                                        "instances": list(instances), "requested_by": "me"})


def test_every_stopped_instance_of_a_service_starts_again() -> None:
    j = Jobmgr()
    stopped_service(j)
    assert j.job_state("web") == "STOPPED"  # alive, nothing runs: not ended
    assert "web" not in j.book.ended
    out = start(j, "web")
    assert [c for c in changes(out) if c[4] == "PENDING"] == [
        ("web", 0, 2, "INITIALIZED", "PENDING"), ("web", 1, 2, "INITIALIZED", "PENDING")]
    assert all(c["reason"].startswith("STARTED: started again by me")
               for e in out if e.type == "TaskStateChanged" for c in e.body["changes"])
    j.to_running("web", 0, "h0", run=2)
    assert j.job_state("web") == "RUNNING"
    # the started instances restart on exit again, and stop again when asked
    out = j.status("h0", "web", 0, "FAILED", run=2, exit_code=1)
    assert ("web", 0, 3, "INITIALIZED", "PENDING") in changes(out)
    assert start(j, "web") == []  # nothing stopped: nothing to start


def test_stopped_instances_start_again_while_the_others_run() -> None:
    j = Jobmgr()
    running(j, "web", 3)
    stop(j, "web", 1)
    j.status("h1", "web", 1, "KILLED")
    assert j.job_state("web") == "RUNNING" and j.task("web", 1).kill_requested
    out = start(j, "web", 1)
    assert [c[:3] for c in changes(out)] == [("web", 1, 2)]
    assert not j.task("web", 1).kill_requested


def test_a_service_stops_only_when_its_last_instance_has_ended() -> None:
    j = Jobmgr()
    running(j, "web", 2)
    stop(j, "web", 0, 1)
    j.status("h0", "web", 0, "KILLED")
    assert j.job_state("web") == "KILLING"  # instance 1 still on its way out
    j.status("h1", "web", 1, "KILLED")
    assert j.job_state("web") == "STOPPED"
    j.book.reconcile(j.now + 10 * 3_600_000)  # never forgotten while stopped
    assert "web" in j.book.jobs


def test_a_killed_job_has_ended_and_does_not_start_again() -> None:
    j = Jobmgr()
    running(j, "web", 2)
    stop(j, "web")
    j.status("h0", "web", 0, "KILLED")
    j.status("h1", "web", 1, "KILLED")
    assert j.job_state("web") == "KILLED"
    assert changes(start(j, "web")) == []
    assert j.job_state("web") == "KILLED" and "web" in j.book.ended
    assert changes(j.book.reconcile(j.now + 5)) == []


def test_a_daemon_start_changes_nothing() -> None:
    j = Jobmgr()
    host(j, "h1")
    daemon(j)
    j.to_running("dns", 0, "h1")
    assert start(j, "dns") == []


def test_a_batch_job_does_not_start_again() -> None:
    j = Jobmgr()
    j.submit("etl", 1)
    stop(j, "etl")
    assert start(j, "etl") == []
    assert j.job_state("etl") == "KILLED"


def test_stops_and_starts_replay_to_the_same_book() -> None:
    j = Jobmgr()
    stopped_service(j)
    start(j, "web")
    j.to_running("web", 0, "h0", run=2)
    stop(j, "web", 0)  # a kill after the start wins again
    j.status("h0", "web", 0, "KILLED", run=2)
    live = book_to_data(j.book)
    # kills and starts (one topic) may be read before or after the job's own facts
    public = [r for r in j.log if r[0] in ("JobKillRequested", "JobStartRequested")]
    others = [r for r in j.log if r not in public]
    for order in (j.log, public + others, others + public):
        replayed = JobBook()
        for etype, body in order:
            replayed.apply(etype, body)
        assert book_to_data(replayed)["jobs"] == live["jobs"], order[:3]
    restored = book_from_data(json.loads(json.dumps(live)), j.book.retention_ms)
    assert book_to_data(restored) == live
    assert j.task("web", 0).kill_requested and not j.task("web", 1).kill_requested


def test_an_update_gives_stopped_instances_the_new_version_without_running_them() -> None:
    from test_jobmgr_updates import send_update, settle, state

    j = Jobmgr()
    running(j, "web", 3)
    stop(j, "web", 1)
    j.status("h1", "web", 1, "KILLED")
    send_update(j, n=3, batch_size=1)
    settle(j)  # used to wait for ever for instance 1 to run version 2
    assert state(j) == "SUCCEEDED"
    assert [(t.config_version, t.state.value) for t in j.book.jobs["web"].tasks] == [
        (2, "RUNNING"), (2, "KILLED"), (2, "RUNNING")]
    out = start(j, "web", 1)
    assert [c[:3] for c in changes(out) if c[4] == "PENDING"] == [("web", 1, 2)]
    assert j.task("web", 1).config_version == 2  # it runs the new version when started
    k = Jobmgr()
    stopped_service(k)
    send_update(k, n=2, batch_size=1)
    for _ in range(3):
        k.tick(2_000)
    assert state(k) == "SUCCEEDED" and k.job_state("web") == "STOPPED"
    replayed_and_restored(k)
