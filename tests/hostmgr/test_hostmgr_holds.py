"""Room held for a stateful task between its runs (hosts.py, "Holds").

A run launched with a volume that ends while its task may run again keeps its room on its
host for its (job, instance): offers leave it out of `free`/`slack` and list it in
`holds`, other placements cannot take it, and the task's next run placed there uses it.
The hold ends with the next run's launch, a kill for good, the job's end, the host's loss
(or a new incarnation) and retention forgetting the job; never for a preemption.
"""

from __future__ import annotations

import json
from typing import Any

from event_bodies import (
    agent_status,
    host_registered,
    job_created,
    job_state_changed,
    launch,
    launch_requested,
    placement,
    task_state_changed,
)
from hostmgr_helpers import book_with, launched, of, place, rejections, tick

from peloton.hostmgr.domain import snapshot
from peloton.hostmgr.domain.hosts import HostBook
from peloton.hostmgr.domain.records import RoomHold
from peloton.model.resources import Resources

Body = dict[str, Any]


def stateful(job_id: str, instances: int = 1, **kw: Any) -> Body:
    body = job_created(job_id, instances, **kw)
    body["type"] = "STATEFUL"
    body["default_task"] = {**body["default_task"], "volume": "/data"}
    return body


def db_ran_once(cpu: float = 2.0) -> HostBook:
    """h1 and h2 with 2 cpus each; db/0 (1 cpu, stateful) ran on h1 and succeeded."""
    book = book_with("h1", "h2", cpu=cpu, jobs={"j1": 4})
    book.fold("JobCreated", stateful("db"))
    assert launched(place(book, placement("db", 0, "h1"))) == [("h1", "db", 0)]
    book.fold("TaskStatusReported", agent_status("h1", "db", 0, "SUCCEEDED", run=1, at=200))
    return book


def offer_of(book: HostBook, host: str, now: int = 300) -> Body:
    """The host's offer made by the next tick."""
    (offer,) = [o for ev in of(tick(book, now), "OfferReceived") for o in ev.body["offers"]
                if o["host"] == host]
    return offer


def test_a_stateful_runs_end_holds_its_room_on_its_host() -> None:
    book = db_ran_once()
    h1 = book.hosts["h1"]
    assert h1.runs == {} and h1.holds == {("db", 0): RoomHold(1, Resources(1, 64), 100)}
    assert h1.free == Resources(1, 4096 - 64, 10_000)
    offer = offer_of(book, "h1")
    assert offer["free"]["cpu"] == offer["slack"]["cpu"] == 1.0
    assert offer["holds"] == [{"job_id": "db", "instance": 0, "resources": {
        "cpu": 1.0, "memory": 64.0, "disk": 0.0, "gpu": 0.0}}]
    # another job's run cannot take the held room ...
    events = place(book, placement("j1", 0, "h1", cpu=2.0), now=400)
    assert rejections(events) == [("j1", 0, "host h1 no longer fits: cpu 2>1")]
    # ... but db's next run placed there uses it, and its allocation takes over
    events = place(book, placement("db", 0, "h1", run=2, cpu=2.0), now=500)
    assert launched(events) == [("h1", "db", 0)]
    assert h1.holds == {} and h1.allocated == Resources(2, 64) and h1.free.cpu == 0.0
    assert [o["holds"] for ev in of(events, "OfferReceived") for o in ev.body["offers"]
            if o["host"] == "h1"] == [[]]


def test_a_run_of_the_task_and_other_runs_in_one_batch_share_the_room_rightly() -> None:
    """Validated in one batch, the held task's run takes its hold (not free room twice)."""
    book = db_ran_once()
    events = place(book, placement("db", 0, "h1", run=2),
                   placement("j1", 1, "h1", cpu=1.0), now=400)
    assert sorted(launched(events)) == [("h1", "db", 0), ("h1", "j1", 1)]
    assert book.hosts["h1"].free.cpu == 0.0


def test_a_non_stateful_runs_end_holds_nothing() -> None:
    book = book_with("h1", cpu=2.0, jobs={"j1": 2})
    place(book, placement("j1", 0, "h1"))
    book.fold("TaskStatusReported", agent_status("h1", "j1", 0, "FAILED", run=1, at=200))
    assert book.hosts["h1"].holds == {} and book.hosts["h1"].free.cpu == 2.0
    assert offer_of(book, "h1")["holds"] == []


def test_a_kill_for_good_ends_the_hold_in_either_order() -> None:
    kill = task_state_changed("db", (0, "KILLING"), run=1, previous="RUNNING", host="h1",
                              at=250)
    book = db_ran_once()
    book.fold("TaskStateChanged", kill)
    assert book.hosts["h1"].holds == {} and book.hosts["h1"].free.cpu == 2.0
    # the kill read before the agent's end: no hold is made
    book = book_with("h1", "h2", cpu=2.0)
    book.fold("JobCreated", stateful("db"))
    place(book, placement("db", 0, "h1"))
    book.fold("TaskStateChanged", kill)
    book.fold("TaskStatusReported", agent_status("h1", "db", 0, "KILLED", run=1, at=260))
    assert book.hosts["h1"].holds == {}


def test_a_kill_of_the_waiting_next_run_ends_the_hold() -> None:
    book = db_ran_once()
    book.fold("TaskStateChanged", task_state_changed(
        "db", (0, "KILLED"), run=2, previous="PENDING", at=300))
    assert book.hosts["h1"].holds == {}


def test_a_preemption_keeps_the_hold() -> None:
    book = db_ran_once()
    preempted = task_state_changed("db", (0, "KILLED"), run=1, previous="PREEMPTING",
                                   host="h1", at=250)
    preempted["changes"][0]["reason"] = "PREEMPTED (HOST_MAINTENANCE: drain)"
    book.fold("TaskStateChanged", preempted)
    assert ("db", 0) in book.hosts["h1"].holds


def test_the_jobs_end_ends_the_hold() -> None:
    book = db_ran_once()
    book.fold("JobStateChanged", job_state_changed("db", "KILLED", "RUNNING", {}, at=300))
    assert book.hosts["h1"].holds == {} and offer_of(book, "h1")["free"]["cpu"] == 2.0


def test_the_hosts_loss_or_restart_ends_the_hold() -> None:
    book = db_ran_once()
    book.fold("HostLost", {"host": "h1", "incarnation": "inc-1", "at": 300,
                           "reason": "gone", "runs": []})
    assert book.hosts["h1"].holds == {} and book.jobs["db"].held == {}
    book = db_ran_once()
    book.fold("HostRegistered", host_registered("h1", cpu=2.0, incarnation="inc-2", at=300))
    assert book.hosts["h1"].holds == {} and book.jobs["db"].held == {}


def test_a_launch_read_after_its_end_holds_the_room_as_read_in_order() -> None:
    """On replay the agent's status topic may come before our own launches."""
    book = book_with("h1", cpu=2.0, jobs={})
    book.fold("JobCreated", stateful("db"))
    book.fold("TaskStatusReported", agent_status("h1", "db", 0, "FAILED", run=1, at=200))
    entry = {**launch("db", 0), "volume": "/data"}
    book.fold("TaskLaunchRequested", launch_requested("h1", entry, at=100))
    assert book.hosts["h1"].runs == {}
    assert book.hosts["h1"].holds == {("db", 0): RoomHold(1, Resources(1, 64), 100)}
    # the next run's launch read before the end of the run before: no hold of run 1
    book = book_with("h1", cpu=2.0, jobs={})
    book.fold("JobCreated", stateful("db"))
    for run, at in ((1, 100), (2, 300)):
        book.fold("TaskLaunchRequested", launch_requested(
            "h1", {**launch("db", 0, run=run), "volume": "/data"}, at=at))
    book.fold("TaskStatusReported", agent_status("h1", "db", 0, "FAILED", run=1, at=200))
    assert book.hosts["h1"].holds == {} and set(book.hosts["h1"].runs) == {("db", 0, 2)}


def test_retention_forgets_the_hold_of_a_job_it_forgets() -> None:
    book = HostBook(retention_ms=1000)
    book.fold("HostRegistered", host_registered("h1", cpu=2.0))
    book.fold("TaskLaunchRequested", launch_requested(
        "h1", {**launch("gone", 0), "volume": "/data"}, at=10))  # its JobCreated never read
    book.fold("TaskStatusReported", agent_status("h1", "gone", 0, "FAILED", run=1, at=20))
    assert ("gone", 0) in book.hosts["h1"].holds
    book.tick(5000)
    assert book.hosts["h1"].holds == {} and "gone" not in book.jobs


def test_holds_survive_a_snapshot() -> None:
    book = db_ran_once()
    book.fold("TaskStateChanged", task_state_changed(
        "j1", (3, "KILLED"), run=4, previous="PENDING", at=300))  # a void entry
    state = json.loads(json.dumps(snapshot.dump(book)))
    twin = HostBook(heartbeat_timeout_ms=book.heartbeat_timeout_ms, hold_ms=book.hold_ms)
    snapshot.load(twin, state)
    assert snapshot.dump(twin) == snapshot.dump(book)
    assert twin.jobs["db"].held == {0: "h1"} and twin.hosts["h1"].holds == book.hosts["h1"].holds
    assert twin.tick(400) == book.tick(400)
