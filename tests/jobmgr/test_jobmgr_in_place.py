"""In-place updates: a service instance an update replaces restarts pinned (softly) to
the host it ran on; if that host has no room for it within the wait, it runs anywhere.
Other restarts are never pinned; a replay and a snapshot keep the soft pin."""

from __future__ import annotations

from jobmgr_driver import Jobmgr, changes, replayed_and_restored
from test_jobmgr_services import VOLUME, running
from test_jobmgr_updates import send_update

from peloton.model.event import Event


def pending(events: list[Event]) -> list[tuple[int, int, str | None, str]]:
    return [(c["instance"], c["run"], c["pinned_host"], c["reason"])
            for e in events if e.type == "TaskStateChanged" for c in e.body["changes"]
            if c["state"] == "PENDING" and c["previous_state"] == "INITIALIZED"]


def test_an_updated_instance_restarts_in_place_on_its_host() -> None:
    j = Jobmgr()
    running(j, "web", 2)  # web/0 on h0, web/1 on h1
    send_update(j, n=2, batch_size=1)
    out = j.status("h0", "web", 0, "KILLED")
    ((instance, run, pin, reason),) = pending(out)
    assert (instance, run, pin) == (0, 2, "h0")
    assert reason.startswith("restart in place on h0")
    assert j.task("web", 0).in_place
    j.to_running("web", 0, "h0", run=2)
    assert j.task("web", 0).config_version == 2


def test_a_run_that_finds_no_room_in_place_runs_anywhere_after_the_wait() -> None:
    j = Jobmgr()
    running(j, "web", 2)
    send_update(j, n=2, batch_size=1)
    j.status("h0", "web", 0, "KILLED")
    j.send("TasksAdmitted", {"at": j.now, "tasks": [
        {"job_id": "web", "instance": 0, "run": 2, "pool": "/", "pinned_host": "h0",
         "config_version": 2}]})
    assert j.task("web", 0).state.value == "READY"
    assert changes(j.tick(5_000)) == []  # still waiting for h0
    out = j.tick(5_000)
    assert ("web", 0, 2, "READY", "KILLED") in changes(out)
    ((instance, run, pin, reason),) = pending(out)
    assert (instance, run, pin) == (0, 3, None)
    assert "IN_PLACE: host h0 had no room" in reason
    assert not j.task("web", 0).kill_requested and not j.task("web", 0).in_place


def test_other_restarts_are_not_pinned_and_stateful_ones_keep_their_volume_host() -> None:
    j = Jobmgr()
    running(j, "web", 1)
    out = j.status("h0", "web", 0, "FAILED", exit_code=1)
    assert [p[2] for p in pending(out)] == [None]
    k = Jobmgr()
    running(k, "db", 1, kind="STATEFUL", extra=VOLUME)
    send_update(k, "db", n=1, batch_size=1)
    out = k.status("h0", "db", 0, "KILLED")
    assert [p[2] for p in pending(out)] == ["h0"]
    assert not k.task("db", 0).in_place  # a hard pin: the volume is there


def test_the_soft_pin_survives_replay_and_snapshot() -> None:
    j = Jobmgr()
    running(j, "web", 2)
    send_update(j, n=2, batch_size=1)
    j.status("h0", "web", 0, "KILLED")
    restored = replayed_and_restored(j)
    assert restored.jobs["web"].tasks[0].in_place
