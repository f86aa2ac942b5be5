"""Runs pinned to a host (TasksAdmitted v2 `pinned_host`): placed on that host only, however
emptier the others; while it is absent, unavailable or full they wait, with a reason that
names the host; they land once it has room. Pins survive a snapshot."""

from __future__ import annotations

import json
from typing import Any

from _placement_builders import host
from event_bodies import (
    job_created,
    offer,
    offer_received,
    task_state_changed,
    tasks_admitted,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.model.constraint import (
    HOSTNAME_LABEL,
    AndConstraint,
    Condition,
    HostLabelConstraint,
    LabelConstraint,
    LabelKind,
    LabelOp,
    OrConstraint,
    parse_constraint,
    to_dict,
)
from peloton.model.event import Event
from peloton.model.resources import Resources
from peloton.model.spec import JobSpec
from peloton.placement.checker import check_round
from peloton.placement.domain import place
from peloton.placement.domain.board import PlacementBoard
from peloton.placement.domain.evaluator import host_names
from peloton.placement.domain.framework import PlacementConfig
from peloton.placement.domain.pins import pin_constraint
from peloton.placement.domain.requests import Requests
from peloton.placement.domain.types import Strategy, TaskRequest

Body = dict[str, Any]
PINNED = "waiting for host {} (the run is pinned to it): "


def board_with(*offers: Body, n: int = 4, strategy: str | None = None,
               **job_kw: Any) -> PlacementBoard:
    board = PlacementBoard()
    body = job_created("db", n, **job_kw)
    if strategy is not None:
        body["placement_strategy"] = strategy
    board.fold("JobCreated", body)
    if offers:
        board.fold("OfferReceived", offer_received(*offers))
    return board


def admit(board: PlacementBoard, *instances: int, pin: str | None, run: int = 1,
          at: int = 0) -> None:
    board.fold("TasksAdmitted", tasks_admitted("db", *instances, run=run, at=at,
                                               pinned_host=pin))


def placed(events: list[Event]) -> dict[int, str]:
    return {p["instance"]: p["host"] for e in events if e.type == "PlacementMade"
            for p in e.body["placements"]}


def failed(events: list[Event]) -> dict[int, str]:
    return {t["instance"]: t["reason"] for e in events if e.type == "PlacementFailed"
            for t in e.body["tasks"]}


def test_a_pinned_run_lands_on_its_host_even_when_another_is_emptier() -> None:
    board = board_with(offer("h1", cpu=4, free_cpu=1), offer("h2", cpu=16),
                       offer("h3", cpu=16))
    admit(board, 0, pin="h1")
    admit(board, 1, pin=None)
    out = board.next_round(1)
    assert placed(out)[0] == "h1"
    assert failed(out) == {}


def test_the_pin_beats_the_strategy_in_both_directions() -> None:
    # PACK prefers the fullest host, SPREAD the emptiest: the pin wins over both
    for strategy, pin in (("PACK", "h2"), ("SPREAD", "h1")):
        board = board_with(offer("h1", cpu=4, free_cpu=1), offer("h2", cpu=16),
                           strategy=strategy, cpu=0.5)
        admit(board, 0, 1, pin=pin)
        assert placed(board.next_round(1)) == {0: pin, 1: pin}


def test_a_pinned_run_waits_while_its_host_is_full_and_lands_once_room_appears() -> None:
    board = board_with(offer("h1", cpu=4, free_cpu=0), offer("h2", cpu=16))
    admit(board, 0, pin="h1")
    out = board.next_round(1)
    assert placed(out) == {}
    reason = failed(out)[0]
    assert reason.startswith(PINNED.format("h1"))
    assert "hostname=h1" in reason and "(2 hosts; hostname=h1: 1;" in reason  # the counts
    assert board.next_round(2) == []  # nothing changed: no round
    board.fold("OfferReceived", offer_received(offer("h1", cpu=4, free_cpu=2, generation=2)))
    out = board.next_round(3)
    assert placed(out) == {0: "h1"} and board.queue == {}


def test_a_run_pinned_to_an_unknown_or_unavailable_host_waits_with_that_reason() -> None:
    board = board_with(offer("h1", cpu=16), offer("h2", cpu=16, available=False))
    admit(board, 0, pin="h7")
    admit(board, 1, pin="h2")
    out = board.next_round(1)
    assert placed(out) == {}
    reasons = failed(out)
    assert reasons[0] == PINNED.format("h7") + "no offer from h7 (the host is unknown or gone)"
    assert reasons[1] == PINNED.format("h2") + "h2 is not available"
    board.fold("OfferReceived", offer_received(offer("h7", cpu=8),
                                               offer("h2", cpu=8, generation=2)))
    assert placed(board.next_round(2)) == {0: "h7", 1: "h2"}


def test_a_pinned_run_keeps_its_task_constraint() -> None:
    board = board_with(offer("h1", cpu=16), offer("h2", cpu=16),
                       constraint={"hostLabel": {"key": "zone", "equals": "a"}})
    admit(board, 0, pin="h1")
    reason = failed(board.next_round(1))[0]
    assert reason.startswith(PINNED.format("h1")) and "zone=a" in reason
    board.fold("OfferReceived", offer_received(
        offer("h1", cpu=16, labels={"zone": "a"}, generation=2)))
    assert placed(board.next_round(2)) == {0: "h1"}


def test_a_newer_run_of_the_instance_has_its_own_pin_or_none() -> None:
    board = board_with(offer("h1", cpu=4, free_cpu=0), offer("h2", cpu=16),
                       offer("h3", cpu=4, free_cpu=0))
    admit(board, 0, pin="h1")
    assert failed(board.next_round(1))[0].startswith(PINNED.format("h1"))
    board.fold("TaskStateChanged", task_state_changed("db", (0, "KILLED"), at=2))
    admit(board, 0, pin="h3", run=2, at=3)  # pinned elsewhere: a new request, a new reason
    assert failed(board.next_round(4))[0].startswith(PINNED.format("h3"))
    admit(board, 0, pin=None, run=3, at=5)  # a newer run without a pin goes anywhere
    assert placed(board.next_round(6)) == {0: "h2"}


def test_a_later_admission_of_the_run_without_its_pin_keeps_the_pin() -> None:
    board = board_with(offer("h1", cpu=4, free_cpu=0), offer("h2", cpu=16))
    admit(board, 0, pin="h1", at=1)
    board.fold("TaskStateChanged", task_state_changed("db", (0, "PENDING"), previous="READY",
                                                      at=2))  # a placement timeout
    admit(board, 0, pin=None, at=3)  # readmitted, the pin said again or not at all
    assert placed(board.next_round(4)) == {}


def test_pins_survive_a_snapshot_and_older_rows_restore_unpinned() -> None:
    board = board_with(offer("h1", cpu=4, free_cpu=0), offer("h2", cpu=16))
    admit(board, 0, pin="h1")
    admit(board, 1, pin=None)
    board.next_round(1)
    data = json.loads(json.dumps(board.snapshot()))
    restored = PlacementBoard.from_snapshot(data)
    assert restored.book.runs[("db", 0, 1)].pinned_host == "h1"
    restored.fold("OfferReceived", offer_received(offer("h2", cpu=16, generation=2)))
    board.fold("OfferReceived", offer_received(offer("h2", cpu=16, generation=2)))
    assert restored.next_round(2) == board.next_round(2)
    assert restored.snapshot() == board.snapshot()
    # a snapshot written before runs kept their pin: 10 fields per run, runs unpinned
    old = json.loads(json.dumps(board.snapshot()))
    old["book"]["runs"] = [row[:10] for row in old["book"]["runs"]]
    assert all(r.pinned_host is None
               for r in PlacementBoard.from_snapshot(old).book.runs.values())


def test_requests_are_cached_per_pin() -> None:
    requests = Requests()
    job = JobSpec.from_body(job_created("db", 2))
    free = requests.get(job, 0, 1)
    on_h1 = requests.get(job, 0, 1, pinned_host="h1")
    assert free.request.constraint is None and free.pinned_host is None
    assert on_h1.request.constraint == HostLabelConstraint(HOSTNAME_LABEL, LabelOp.EQUALS,
                                                           ("h1",))
    on_h2 = requests.get(job, 0, 2, pinned_host="h2")
    assert on_h2.request.constraint == pin_constraint("h2", None)
    assert requests.get(job, 0, 2, pinned_host="h2") is requests.get(job, 0, 2, pinned_host="h2")
    # runs with the same pin share one constraint object (the engine groups them cheaply)
    assert requests.get(job, 1, 1, pinned_host="h2").request.constraint is (
        requests.get(job, 0, 2, pinned_host="h2").request.constraint)


def test_the_pin_constraint_round_trips_and_reads_as_a_hostname() -> None:
    c = pin_constraint("h1", HostLabelConstraint("zone", LabelOp.EQUALS, ("a",)))
    assert str(c) == "hostname=h1 and zone=a"
    assert parse_constraint(to_dict(c)) == c  # as the dry-run plan file writes it


def test_host_names_reads_the_hosts_a_constraint_allows_by_name() -> None:
    zone = HostLabelConstraint("zone", LabelOp.EQUALS, ("a",))
    peloton_form = LabelConstraint(LabelKind.HOST, Condition.EQUAL, HOSTNAME_LABEL, "h2", 1)
    assert host_names(pin_constraint("h1", zone)) == {"h1"}
    assert host_names(peloton_form) == {"h2"}
    assert host_names(AndConstraint((peloton_form, pin_constraint("h1", None)))) == set()
    assert host_names(HostLabelConstraint(HOSTNAME_LABEL, LabelOp.IN, ("h1", "h3"))) == {
        "h1", "h3"}
    assert host_names(zone) is None
    assert host_names(HostLabelConstraint(HOSTNAME_LABEL, LabelOp.NOT_IN, ("h1",))) is None
    assert host_names(LabelConstraint(LabelKind.HOST, Condition.LESS_THAN, HOSTNAME_LABEL,
                                      "h1", 1)) is None  # "not h1"
    assert host_names(OrConstraint((peloton_form, zone))) is None


_HOSTS = [f"h{i}" for i in range(5)]


@settings(max_examples=60, deadline=None)
@given(
    free=st.lists(st.integers(0, 4), min_size=5, max_size=5),
    tasks=st.lists(st.tuples(st.sampled_from([None, *_HOSTS, "h9"]), st.integers(1, 2),
                             st.sampled_from(list(Strategy))), min_size=1, max_size=12),
    scan_from=st.sampled_from([2, 2048]),
)
def test_pinned_tasks_go_to_their_host_or_nowhere_and_the_round_stays_sound(
    free: list[int], tasks: list[tuple[str | None, int, Strategy]], scan_from: int
) -> None:
    hosts = [host(n, cpu=4, free=Resources(f, 8192)) for n, f in zip(_HOSTS, free, strict=True)]
    requests = [TaskRequest(f"t-{i}", f"j{i % 3}", Resources(cpu, 64),
                            constraint=None if pin is None else pin_constraint(pin, None),
                            strategy=strategy)
                for i, (pin, cpu, strategy) in enumerate(tasks)]
    result = place(hosts, requests, PlacementConfig(partial_scan_from=scan_from, scan_block=2))
    assert check_round(hosts, requests, result) == []
    for p in result.placements:
        pin = tasks[int(p.task_id.split("-")[1])][0]
        assert pin is None or p.host == pin
    room = dict(zip(_HOSTS, free, strict=True))
    for p in result.placements:
        room[p.host] -= tasks[int(p.task_id.split("-")[1])][1]
    for task_id in result.unplaced:  # a pinned task waits only if its host lacks room
        pin, cpu, _ = tasks[int(task_id.split("-")[1])]
        if pin is not None:
            assert room.get(pin, 0) < cpu


def test_pinned_runs_go_before_work_that_could_go_anywhere() -> None:
    # room for one task on h1 (and none elsewhere): the run pinned there gets it, though
    # the unpinned run was admitted first
    board = board_with(offer("h1", cpu=4, free_cpu=1), offer("h2", cpu=4, free_cpu=0))
    admit(board, 0, pin=None, at=1)
    admit(board, 1, pin="h1", at=2)
    out = board.next_round(3)
    assert placed(out) == {1: "h1"}
    assert 0 in failed(out)
