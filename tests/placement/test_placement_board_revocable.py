"""Revocable work on the board: offers (OfferReceived.v2) carry each host's `slack`;
revocable runs (a revocable job, or a revocable task of a preemptible job) are placed
against slack only (HostView.slack_free), all other runs against free only; runs in
flight hold room in both pools until an offer counts them."""

from __future__ import annotations

from typing import Any

from event_bodies import (
    job_created,
    offer,
    offer_received,
    tasks_admitted,
)

from peloton.model.event import Event
from peloton.placement.domain.board import PlacementBoard

Body = dict[str, Any]


def placed(events: list[Event]) -> list[tuple[str, int, str]]:
    return sorted((p["job_id"], p["instance"], p["host"]) for e in events
                  if e.type == "PlacementMade" for p in e.body["placements"])


def failed(events: list[Event]) -> list[tuple[str, int]]:
    return sorted((t["job_id"], t["instance"]) for e in events
                  if e.type == "PlacementFailed" for t in e.body["tasks"])


def board_with(*offers: Body, **jobs: Body) -> PlacementBoard:
    board = PlacementBoard()
    for body in jobs.values():
        board.fold("JobCreated", body)
    board.fold("OfferReceived", offer_received(*offers))
    return board


def test_revocable_runs_use_slack_and_others_use_free() -> None:
    board = board_with(offer("busy", cpu=8, free_cpu=0, slack_cpu=2, slack_mem=4096),
                       offer("idle", cpu=8, free_cpu=3, slack_cpu=0),
                       rev=job_created("rev", 3, revocable=True),
                       std=job_created("std", 4))
    board.fold("TasksAdmitted", tasks_admitted("rev", 0, 1, 2))
    board.fold("TasksAdmitted", tasks_admitted("std", 0, 1, 2, 3))
    out = board.next_round(1)
    assert placed(out) == [("rev", 0, "busy"), ("rev", 1, "busy"),
                           ("std", 0, "idle"), ("std", 1, "idle"), ("std", 2, "idle")]
    assert failed(out) == [("rev", 2), ("std", 3)]


def test_runs_in_flight_of_either_kind_hold_both_free_and_slack() -> None:
    """hostmgr validates revocable and other placements against one allocation (its
    slack is what no run holds): until an offer counts a run, the run's room is gone
    from both pools, or the board would double-book the host."""
    board = board_with(offer("h1", cpu=8, free_cpu=2, slack_cpu=2, slack_mem=4096),
                       rev=job_created("rev", 3, revocable=True), std=job_created("std", 3))
    board.fold("TasksAdmitted", tasks_admitted("rev", 0))
    board.fold("TasksAdmitted", tasks_admitted("std", 0))
    assert len(placed(board.next_round(1))) == 2
    view = board.hosts.view("h1")
    assert view is not None and view.free.cpu == 0 and view.slack_free.cpu == 0
    board.fold("TasksAdmitted", tasks_admitted("std", 1))
    board.fold("TasksAdmitted", tasks_admitted("rev", 1))
    out = board.next_round(2)
    assert placed(out) == [] and failed(out) == [("rev", 1), ("std", 1)]


def test_a_revocable_task_of_a_preemptible_job_is_placed_on_slack() -> None:
    body = job_created("mix", 2)
    assert body["preemptible"] and not body["revocable"]
    body["instance_tasks"] = {"1": {**body["default_task"], "revocable": True}}
    board = board_with(offer("free", cpu=4, free_cpu=4),
                       offer("slack", cpu=4, free_cpu=0, slack_cpu=4, slack_mem=4096), mix=body)
    board.fold("TasksAdmitted", tasks_admitted("mix", 0, 1))
    assert placed(board.next_round(1)) == [("mix", 0, "free"), ("mix", 1, "slack")]


def test_an_offer_without_slack_gives_revocable_work_nothing() -> None:
    v1 = offer("h1", cpu=4)
    del v1["slack"]  # OfferReceived.v1
    board = board_with(v1, rev=job_created("rev", 1, revocable=True), std=job_created("std", 1))
    board.fold("TasksAdmitted", tasks_admitted("rev", 0))
    board.fold("TasksAdmitted", tasks_admitted("std", 0))
    out = board.next_round(1)
    assert placed(out) == [("std", 0, "h1")] and failed(out) == [("rev", 0)]
