"""Config versions (rolling updates) on the placement board: a run is placed with its
own version's task spec (constraint, resources) and its PlacementMade entry carries the
version; a run whose version's JobSpecChanged is not read yet waits and is placed once it
is; snapshots keep versions."""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
from event_bodies import (
    job_created,
    offer,
    offer_received,
    placement_rejected,
    tasks_admitted,
)
from hypothesis import given, settings

from peloton.model.event import Event
from peloton.model.spec import JobSpec
from peloton.placement.domain.board import PlacementBoard
from peloton.placement.domain.requests import Requests

Body = dict[str, Any]
ZONE_B = {"hostLabel": {"key": "zone", "equals": "b"}}


def job_spec_changed(job_id: str, n: int, version: int, *, at: int = 0,
                     **kw: Any) -> Body:
    return {**job_created(job_id, n, at=at, **kw), "version": version,
            "update_id": f"update-{version}"}


def admit(board: PlacementBoard, *instances: int, version: int, run: int = 1,
          at: int = 0) -> None:
    body = tasks_admitted("db", *instances, run=run, at=at)
    for t in body["tasks"]:
        t["config_version"] = version
    board.fold("TasksAdmitted", body)


def board_with(n: int = 2) -> PlacementBoard:
    board = PlacementBoard()
    board.fold("JobCreated", job_created("db", n, cpu=1.0))
    board.fold("OfferReceived", offer_received(
        offer("h1", cpu=16, labels={"zone": "a"}), offer("h2", cpu=16, labels={"zone": "b"})))
    return board


def placements(events: list[Event]) -> dict[int, tuple[str, float, int]]:
    """instance -> (host, cpu, config_version) of every PlacementMade entry."""
    return {p["instance"]: (p["host"], p["resources"]["cpu"], p["config_version"])
            for e in events if e.type == "PlacementMade" for p in e.body["placements"]}


def test_a_v2_run_is_placed_with_v2s_constraint_and_resources_a_v1_run_with_v1s() -> None:
    board = board_with()
    board.fold("JobSpecChanged", job_spec_changed("db", 2, 2, cpu=3.0, constraint=ZONE_B,
                                                  at=1))
    admit(board, 0, version=1)
    admit(board, 1, version=2)
    out = placements(board.next_round(2))
    assert out[1] == ("h2", 3.0, 2)
    assert out[0][1:] == (1.0, 1)


def test_every_v2_run_lands_in_zone_b() -> None:
    board = board_with(6)
    board.fold("JobSpecChanged", job_spec_changed("db", 6, 2, constraint=ZONE_B, at=1))
    admit(board, 0, 1, 2, version=2)
    admit(board, 3, 4, 5, version=1)
    out = placements(board.next_round(2))
    assert {i: out[i][0] for i in range(3)} == {0: "h2", 1: "h2", 2: "h2"}
    assert {out[i][2] for i in range(3)} == {2} and {out[i][2] for i in range(3, 6)} == {1}


def test_a_run_of_an_unknown_version_waits_then_is_placed_when_its_spec_is_read() -> None:
    board = board_with()
    admit(board, 0, version=2)
    admit(board, 1, version=1)
    out = board.next_round(1)
    assert set(placements(out)) == {1}
    assert not any(e.type == "PlacementFailed" for e in out)  # waiting is no failure
    assert board.next_round(2) == []  # nothing changed
    board.fold("JobSpecChanged", job_spec_changed("db", 2, 2, cpu=2.0, constraint=ZONE_B,
                                                  at=3))
    assert placements(board.next_round(3)) == {0: ("h2", 2.0, 2)}


def test_a_run_made_by_a_rejection_waits_for_its_admission_to_say_its_version() -> None:
    board = board_with()
    board.fold("JobSpecChanged", job_spec_changed("db", 2, 2, constraint=ZONE_B, at=1))
    board.fold("PlacementRejected", placement_rejected("db", 0, "h1", round_=5))
    assert ("db", 0, 1) in board.queue and board.next_round(6) == []
    admit(board, 0, version=2)
    assert placements(board.next_round(7)) == {0: ("h2", 1.0, 2)}


def test_a_spec_change_of_an_unknown_job_is_ignored() -> None:
    board = board_with()
    board.fold("JobSpecChanged", job_spec_changed("other", 2, 2, at=1))
    assert "other" not in board.versions and "other" not in board.jobs
    board.fold("JobSpecChanged", job_spec_changed("db", 2, 2, cpu=2.0, at=2))
    board.fold("JobSpecChanged", job_spec_changed("db", 2, 2, cpu=7.0, at=3))  # again
    assert board.versions["db"][2].default_task.resources.cpu == 2.0


def test_requests_are_cached_per_version() -> None:
    requests = Requests()
    v1 = JobSpec.from_body(job_created("db", 2, cpu=1.0))
    v2 = JobSpec.from_body(job_spec_changed("db", 2, 2, cpu=2.0))
    assert requests.get(v1, 0, 1).request.resources.cpu == 1.0
    assert requests.get(v2, 0, 1, version=2).request.resources.cpu == 2.0
    assert requests.get(v1, 0, 1).request.resources.cpu == 1.0
    assert requests.revocable(v2, 0, 2) is False


def test_versions_survive_a_snapshot_and_old_rows_restore_as_v1() -> None:
    board = board_with(3)
    board.fold("JobSpecChanged", job_spec_changed("db", 3, 2, cpu=2.0, constraint=ZONE_B,
                                                  at=1))
    admit(board, 0, version=2)
    admit(board, 1, version=3)  # its version is not known yet
    board.next_round(2)
    data = json.loads(json.dumps(board.snapshot()))
    restored = PlacementBoard.from_snapshot(data)
    assert restored.snapshot() == board.snapshot()
    for b in (board, restored):
        b.fold("JobSpecChanged", job_spec_changed("db", 3, 3, cpu=3.0, at=3))
        admit(b, 2, version=1)
    out = board.next_round(3)
    assert restored.next_round(3) == out
    assert {i: p[1:] for i, p in placements(out).items()} == {1: (3.0, 3), 2: (1.0, 1)}
    old = json.loads(json.dumps(data))
    old["book"]["runs"] = [row[:11] for row in old["book"]["runs"]]
    del old["versions"]
    assert {r.config_version for r in
            PlacementBoard.from_snapshot(old).book.runs.values()} == {1}


@settings(max_examples=40, deadline=None)
@given(st.permutations(range(4)))
def test_the_spec_change_and_admissions_in_any_order_place_the_same(order: list[int]) -> None:
    """Admissions (tasks-admitted) and the spec change (job-events) cross topics."""
    facts: list[tuple[str, Body]] = [
        ("JobSpecChanged", job_spec_changed("db", 3, 2, cpu=2.0, constraint=ZONE_B, at=1)),
        ("TasksAdmitted", tasks_admitted("db", 0, at=2)),
        ("TasksAdmitted", {**tasks_admitted("db", 1, at=3)}),
        ("TasksAdmitted", tasks_admitted("db", 2, run=2, at=4)),
    ]
    for _, body in facts[2:]:
        body["tasks"][0]["config_version"] = 2
    board = board_with(3)
    placed: dict[int, tuple[str, float, int]] = {}
    for now, i in enumerate(order, start=10):
        board.fold(*facts[i])
        placed |= placements(board.next_round(now))
    assert placed[0][1:] == (1.0, 1)
    assert placed[1] == placed[2] == ("h2", 2.0, 2)
