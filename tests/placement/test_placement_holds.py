"""Room hostmgr holds for a stateful task between runs (OfferReceived v3 `holds`): no run
is given it but a pinned run of that task on that host, which is placed with its per-filter
reason right; once placed, the room it takes is not counted twice."""

from __future__ import annotations

import json
from typing import Any

from event_bodies import job_created, offer, offer_received, tasks_admitted

from peloton.model.event import Event
from peloton.placement.domain.board import PlacementBoard

Body = dict[str, Any]
PINNED = "waiting for host h1 (the run is pinned to it): "


def held_offer(host: str, *, cpu: float, free_cpu: float, held_cpu: float = 1.0,
               instance: int = 0, generation: int = 1) -> Body:
    body = offer(host, cpu=cpu, free_cpu=free_cpu, generation=generation)
    body["holds"] = [{"job_id": "db", "instance": instance, "resources": {
        "cpu": held_cpu, "memory": 64.0, "disk": 0.0, "gpu": 0.0}}]
    return body


def board_with(*offers: Body, db_cpu: float = 1.0) -> PlacementBoard:
    board = PlacementBoard()
    board.fold("JobCreated", job_created("db", 2, cpu=db_cpu))
    board.fold("JobCreated", job_created("web", 2, cpu=1.0))
    board.fold("OfferReceived", offer_received(*offers))
    return board


def placed(events: list[Event]) -> dict[tuple[str, int], str]:
    return {(p["job_id"], p["instance"]): p["host"] for e in events
            if e.type == "PlacementMade" for p in e.body["placements"]}


def failed(events: list[Event]) -> dict[tuple[str, int], str]:
    return {(t["job_id"], t["instance"]): t["reason"] for e in events
            if e.type == "PlacementFailed" for t in e.body["tasks"]}


def test_a_held_room_is_given_to_no_other_run() -> None:
    board = board_with(held_offer("h1", cpu=4, free_cpu=0))
    board.fold("TasksAdmitted", tasks_admitted("web", 0))
    board.fold("TasksAdmitted", tasks_admitted("db", 1, run=2, pinned_host="h1"))
    events = board.next_round(100)
    assert placed(events) == {}
    assert failed(events)[("web", 0)].startswith("no host with free cpu>=1")
    # another instance of the same job, pinned there, does not get instance 0's hold
    assert failed(events)[("db", 1)].startswith(PINNED + "no host with hostname=h1 and "
                                                "free cpu>=1")


def test_the_pinned_run_of_the_held_task_gets_its_room() -> None:
    board = board_with(held_offer("h1", cpu=4, free_cpu=0), offer("h2", cpu=16))
    board.fold("TasksAdmitted", tasks_admitted("db", 0, run=2, pinned_host="h1"))
    events = board.next_round(100)
    assert placed(events) == {("db", 0): "h1"} and failed(events) == {}
    made = next(e for e in events if e.type == "PlacementMade").body["placements"]
    assert made[0]["run"] == 2 and made[0]["resources"]["cpu"] == 1.0


def test_a_pinned_run_needing_more_than_its_hold_and_the_free_room_waits_saying_why() -> None:
    board = board_with(held_offer("h1", cpu=4, free_cpu=0.5), db_cpu=2.0)
    board.fold("TasksAdmitted", tasks_admitted("db", 0, run=2, pinned_host="h1"))
    events = board.next_round(100)
    assert placed(events) == {}
    reason = failed(events)[("db", 0)]
    assert reason.startswith(PINNED + "no host with hostname=h1 and free cpu>=2")
    assert reason.endswith("(1 hosts; hostname=h1: 1; capacity cpu>=2 memory>=64MB: 1; "
                           "free cpu>=2 memory>=64MB: 0)")  # its hold 1 + free 0.5 < 2
    # more free room later: it uses its hold and the free room together
    board.fold("OfferReceived", offer_received(held_offer("h1", cpu=4, free_cpu=1,
                                                          generation=2), at=200))
    assert placed(board.next_round(300)) == {("db", 0): "h1"}


def test_the_room_a_held_tasks_run_takes_is_not_counted_twice() -> None:
    """h1: 1 cpu free plus db/0's hold of 1 cpu. db/0's next run takes its hold; a web
    run still gets the free cpu, in the same round and in the next one."""
    board = board_with(held_offer("h1", cpu=4, free_cpu=1))
    board.fold("TasksAdmitted", tasks_admitted("db", 0, run=2, pinned_host="h1"))
    board.fold("TasksAdmitted", tasks_admitted("web", 0))
    assert placed(board.next_round(100)) == {("db", 0): "h1", ("web", 0): "h1"}
    board = board_with(held_offer("h1", cpu=4, free_cpu=1))
    board.fold("TasksAdmitted", tasks_admitted("db", 0, run=2, pinned_host="h1"))
    assert placed(board.next_round(100)) == {("db", 0): "h1"}
    board.fold("TasksAdmitted", tasks_admitted("web", 0, at=150))
    assert placed(board.next_round(200)) == {("web", 0): "h1"}
    board.fold("TasksAdmitted", tasks_admitted("web", 1, at=250))
    assert failed(board.next_round(300))[("web", 1)].startswith("no host with free cpu>=1")


def test_holds_survive_the_boards_snapshot() -> None:
    board = board_with(held_offer("h1", cpu=4, free_cpu=0))
    twin = PlacementBoard.from_snapshot(json.loads(json.dumps(board.snapshot())))
    for b in (board, twin):
        b.fold("TasksAdmitted", tasks_admitted("db", 0, run=2, pinned_host="h1"))
    assert board.next_round(100) == twin.next_round(100)
    assert twin.offers["h1"].holds == board.offers["h1"].holds
