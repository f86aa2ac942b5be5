"""PlacementBoard: the queue of admitted runs, in-flight accounting, rounds.

A host's view for a round is its latest offer minus the placements made on it that
hostmgr has not answered yet; rejections re-queue, ended runs leave the queue, and no
round runs when nothing changed.
"""

from __future__ import annotations

from typing import Any

from event_bodies import (
    job_created,
    launch,
    launch_requested,
    offer,
    offer_received,
    placement_rejected,
    task_state_changed,
    tasks_admitted,
)

from peloton.model.event import Event
from peloton.placement.domain.board import PlacementBoard

Body = dict[str, Any]


def board_with(*offers: Body, jobs: dict[str, int] | None = None, **job_kw: Any) -> PlacementBoard:
    board = PlacementBoard()
    for job_id, n in (jobs or {"j1": 8}).items():
        board.fold("JobCreated", job_created(job_id, n, **job_kw))
    board.fold("OfferReceived", offer_received(*offers))
    return board


def admit(board: PlacementBoard, job_id: str, *instances: int, run: int = 1) -> None:
    board.fold("TasksAdmitted", tasks_admitted(job_id, *instances, run=run))


def placed(events: list[Event]) -> list[tuple[str, int, str]]:
    return [(p["job_id"], p["instance"], p["host"]) for e in events if e.type == "PlacementMade"
            for p in e.body["placements"]]


def failed(events: list[Event]) -> list[tuple[str, int, str]]:
    return [(t["job_id"], t["instance"], t["reason"]) for e in events
            if e.type == "PlacementFailed" for t in e.body["tasks"]]


def launched_on(board: PlacementBoard, host: str, job_id: str, *instances: int) -> None:
    board.fold("TaskLaunchRequested", launch_requested(host, *(launch(job_id, i)
                                                               for i in instances)))


def test_a_round_places_admitted_runs_with_their_spec_and_the_hosts_incarnation() -> None:
    board = board_with(offer("h1", cpu=4, incarnation="inc-7"), ports=("http",), cpu=1.5)
    admit(board, "j1", 0)
    (ev,) = board.next_round(42)
    assert ev.type == "PlacementMade" and ev.key == "j1"  # keyed by its job
    (p,) = ev.body["placements"]
    assert ev.body["at"] == 42 and ev.body["round"] == 42
    assert p["host"] == "h1" and p["incarnation"] == "inc-7" and (p["instance"], p["run"]) == (0, 1)
    assert p["resources"] == {"cpu": 1.5, "memory": 64.0, "disk": 0.0, "gpu": 0.0}
    assert set(p["ports"]) == {"http"} and 31000 <= p["ports"]["http"] <= 31009
    assert board.queue == {} and set(board.inflight) == {("j1", 0, 1)}


def test_a_hosts_view_is_its_offer_minus_in_flight_placements() -> None:
    board = board_with(offer("h1", cpu=4))
    admit(board, "j1", 0, 1, 2)
    assert len(placed(board.next_round(1))) == 3
    admit(board, "j1", 3, 4)
    out = board.next_round(2)
    assert len(placed(out)) == 1  # 4 cpus offered, 3 in flight
    assert [(j, i) for j, i, _ in failed(out)] == [("j1", 4)]
    # hostmgr launched all four and offers what is left: the view stays consistent
    launched_on(board, "h1", "j1", 0, 1, 2, 3)
    board.fold("OfferReceived", offer_received(offer("h1", cpu=4, free_cpu=0, generation=2)))
    assert board.inflight == {}
    assert placed(board.next_round(3)) == []


def test_an_offer_that_already_counts_an_in_flight_placement_is_conservative() -> None:
    board = board_with(offer("h1", cpu=4))
    admit(board, "j1", 0, 1)
    assert len(placed(board.next_round(1))) == 2
    # the new offer counts both placements while they are still in flight
    board.fold("OfferReceived", offer_received(offer("h1", cpu=4, free_cpu=2, generation=2)))
    admit(board, "j1", 2, 3)
    assert placed(board.next_round(2)) == []  # 2 free - 2 in flight: never optimistic


def test_in_flight_ports_are_not_handed_out_again() -> None:
    board = board_with(offer("h1", cpu=8, ports=(31000, 31001)), ports=("http",))
    admit(board, "j1", 0, 1)
    first = [p["ports"]["http"] for e in board.next_round(1) for p in e.body["placements"]]
    assert sorted(first) == [31000, 31001]
    admit(board, "j1", 2)
    out = board.next_round(2)
    assert placed(out) == [] and [i for _, i, _ in failed(out)] == [2]


def test_in_flight_placements_count_for_task_label_constraints() -> None:
    board = board_with(offer("h1", cpu=8), offer("h2", cpu=8), jobs={"j1": 3},
                       constraint={"maxPerHost": 1})
    admit(board, "j1", 0)
    assert [h for _, _, h in placed(board.next_round(1))] == ["h1"]
    admit(board, "j1", 1, 2)
    out = board.next_round(2)
    assert [h for _, _, h in placed(out)] == ["h2"] and [i for _, i, _ in failed(out)] == [2]


def test_a_rejection_requeues_the_run_and_frees_its_in_flight_resources() -> None:
    board = board_with(offer("h1", cpu=2), offer("h2", cpu=2))
    admit(board, "j1", 0, 1)
    first = placed(board.next_round(1))
    assert len(first) == 2
    _, _, host = first[0]
    board.fold("PlacementRejected", placement_rejected("j1", 0, host, reason="stale"))
    assert set(board.queue) == {("j1", 0, 1)} and ("j1", 0, 1) not in board.inflight
    board.fold("OfferReceived", offer_received(offer(host, cpu=2, generation=2)))
    assert [(j, i) for j, i, _ in placed(board.next_round(2))] == [("j1", 0)]


def test_ended_runs_leave_the_queue_and_free_their_in_flight_resources() -> None:
    board = board_with(offer("h1", cpu=2))
    admit(board, "j1", 0, 1, 2)
    assert len(placed(board.next_round(1))) == 2
    waiting = set(board.queue)
    assert len(waiting) == 1
    ((_, queued, _),) = waiting
    board.fold("TaskStateChanged", task_state_changed("j1", (queued, "KILLED"), previous="READY"))
    assert board.queue == {}
    (inflight, *_) = sorted(board.inflight)
    board.fold("TaskStateChanged", task_state_changed("j1", (inflight[1], "KILLING"),
                                                      previous="PLACED", host="h1"))
    assert inflight not in board.inflight
    admit(board, "j1", queued)  # a late duplicate admission of the ended run
    admit(board, "j1", 3)
    assert [(j, i) for j, i, _ in placed(board.next_round(2))] == [("j1", 3)]


def test_a_run_that_reached_its_host_is_not_placed_again() -> None:
    board = board_with(offer("h1", cpu=4))
    admit(board, "j1", 0)
    board.next_round(1)
    launched_on(board, "h1", "j1", 0)
    admit(board, "j1", 0)  # duplicate delivery
    board.fold("OfferReceived", offer_received(offer("h1", cpu=4, free_cpu=3, generation=2)))
    assert board.next_round(2) == []


def test_no_round_when_nothing_changed() -> None:
    board = board_with(offer("h1", cpu=1))
    assert board.next_round(1) == []  # nothing queued
    admit(board, "j1", 0, 1)
    out = board.next_round(2)
    assert len(placed(out)) == 1 and len(failed(out)) == 1 and board.round == 2
    assert board.next_round(3) == [] and board.round == 2
    admit(board, "j1", 1)  # already queued: no change
    launched_on(board, "h1", "j1", 0)
    assert board.next_round(4) == [] and board.round == 2


def test_a_round_is_wanted_when_runs_join_the_queue_not_when_hosts_change() -> None:
    board = board_with(offer("h1", cpu=1), offer("h2", cpu=1))
    assert not board.tick_wanted()
    admit(board, "j1", 0, 1)
    assert board.tick_wanted()  # runs to place: the shell ticks soon
    first = placed(board.next_round(1))
    assert not board.tick_wanted()
    admit(board, "j1", 1)  # a duplicate admission: nothing new to place
    board.fold("OfferReceived", offer_received(offer("h3", cpu=4)))
    assert not board.tick_wanted()  # more room: the timer's next round uses it
    _, _, host = first[0]
    board.fold("PlacementRejected", placement_rejected("j1", first[0][1], host, reason="x"))
    assert board.tick_wanted()  # a rejected run waits in the queue again
    assert len(placed(board.next_round(2))) == 1
    assert not board.tick_wanted()


def test_a_placement_failure_is_reported_once_per_reason() -> None:
    board = board_with(offer("h1", cpu=1), cpu=2)
    admit(board, "j1", 0)
    assert [i for _, i, _ in failed(board.next_round(1))] == [0]
    board.fold("OfferReceived", offer_received(offer("h1", cpu=1, generation=2)))
    out = board.next_round(2)
    assert out == [] and board.round == 2  # the round ran; the reason did not change
    board.fold("OfferReceived", offer_received(offer("h1", cpu=2, generation=3)))
    assert [(j, i) for j, i, _ in placed(board.next_round(3))] == [("j1", 0)]


def test_unavailable_hosts_are_not_offered_to_the_engine() -> None:
    board = board_with(offer("h1", cpu=4, available=False))
    admit(board, "j1", 0)
    out = board.next_round(1)
    assert placed(out) == [] and len(failed(out)) == 1


def test_higher_priority_runs_go_first() -> None:
    board = PlacementBoard()
    board.fold("JobCreated", job_created("low", 1, priority=0))
    board.fold("JobCreated", job_created("high", 1, priority=9))
    board.fold("OfferReceived", offer_received(offer("h1", cpu=1)))
    admit(board, "low", 0)
    admit(board, "high", 0)
    out = board.next_round(1)
    assert [j for j, _, _ in placed(out)] == ["high"] and [j for j, _, _ in failed(out)] == ["low"]


def test_rounds_are_deterministic() -> None:
    def run() -> list[tuple[str, Body]]:
        board = board_with(offer("h1", cpu=3), offer("h2", cpu=2), offer("h3", cpu=5),
                           jobs={"a": 4, "b": 4}, ports=("http",))
        admit(board, "b", 3, 1, 0)
        admit(board, "a", 0, 1, 2, 3)
        admit(board, "b", 2)
        return [(e.type, e.body) for e in board.next_round(7)]
    assert run() == run()


# ------------------------------------------- facts arriving in any cross-topic order


def test_a_launch_seen_before_the_offer_that_counts_it_is_not_optimistic() -> None:
    board = board_with(offer("h1", cpu=4))
    admit(board, "j1", 0, 1, 2, 3)
    assert len(placed(board.next_round(1))) == 4
    launched_on(board, "h1", "j1", 0, 1, 2, 3)  # before the offer with free cpu 0
    admit(board, "j1", 4)
    assert placed(board.next_round(2)) == []


def test_a_rejection_of_a_run_that_has_ended_does_not_requeue_it() -> None:
    board = board_with(offer("h1", cpu=4))
    admit(board, "j1", 0)
    assert placed(board.next_round(1))
    board.fold("TaskStateChanged", task_state_changed("j1", (0, "KILLED"), previous="PLACED",
                                                      host="h1"))
    board.fold("PlacementRejected", placement_rejected("j1", 0, "h1", reason="stale"))
    assert board.queue == {} and placed(board.next_round(2)) == []


def test_a_run_admitted_before_its_job_was_seen_is_placed_once_it_is() -> None:
    board = PlacementBoard()
    board.fold("OfferReceived", offer_received(offer("h1", cpu=4)))
    admit(board, "j1", 0)
    assert board.next_round(1) == []  # the job's spec is not known yet
    board.fold("JobCreated", job_created("j1", 1))
    assert placed(board.next_round(2)) == [("j1", 0, "h1")]


def test_a_retried_gang_member_is_placed_alone() -> None:
    board = board_with(offer("h1", cpu=8), jobs={"g": 3}, min_running=3)
    admit(board, "g", 0, 1, 2)
    assert len(placed(board.next_round(1))) == 3
    launched_on(board, "h1", "g", 0, 1, 2)
    admit(board, "g", 0, run=2)
    assert placed(board.next_round(2)) == [("g", 0, "h1")]


def test_a_launch_that_frees_room_makes_the_board_run_a_round() -> None:
    board = board_with(offer("h1", cpu=3))
    admit(board, "j1", 0, 1, 2)
    assert len(placed(board.next_round(1))) == 3
    # hostmgr refused run 2 and launched 0 and 1; the offer that counts them comes first
    board.fold("PlacementRejected", placement_rejected("j1", 2, "h1", round_=1))
    board.fold("OfferReceived", offer_received(offer("h1", cpu=3, free_cpu=1, generation=3),
                                               at=5))
    assert placed(board.next_round(2)) == []  # 0 and 1 still held: no room seen yet
    board.fold("TaskLaunchRequested", launch_requested(
        "h1", launch("j1", 0, round_=1), launch("j1", 1, round_=1), at=5))
    assert placed(board.next_round(3)) == [("j1", 2, "h1")]  # without any other change


def test_a_rejected_gang_member_is_placed_alone_once_its_gang_went_ahead() -> None:
    board = board_with(offer("h1", cpu=8), jobs={"g": 3}, min_running=3)
    admit(board, "g", 0, 1, 2)
    assert len(placed(board.next_round(1))) == 3
    board.fold("PlacementRejected", placement_rejected("g", 0, "h1", round_=1))
    launched_on(board, "h1", "g", 1, 2)
    assert placed(board.next_round(2)) == [("g", 0, "h1")]


def test_a_gang_rejected_whole_is_placed_as_a_gang_again() -> None:
    board = board_with(offer("h1", cpu=2), offer("h2", cpu=8, available=False),
                       jobs={"g": 3}, min_running=3)
    admit(board, "g", 0, 1, 2)
    assert placed(board.next_round(1)) == []  # 2 cpus for a gang of 3: none placed
    board.fold("OfferReceived", offer_received(offer("h2", cpu=8, generation=2)))
    assert len(placed(board.next_round(2))) == 3
    for i in range(3):
        board.fold("PlacementRejected", placement_rejected("g", i, "h2", round_=2))
    board.fold("OfferReceived", offer_received(offer("h2", cpu=8, available=False,
                                                     generation=3)))
    assert placed(board.next_round(3)) == []  # still a gang: never 2 of 3 on h1
