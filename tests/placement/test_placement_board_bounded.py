"""Bounded state: finished jobs and ended runs leave the board `retention_ms` (event time)
after they finished; a live job keeps its spec however long its runs wait; runs of a job
whose JobCreated never arrives are dropped after the window. Over many waves of jobs the
board's sizes (and its snapshot) stay flat."""

from __future__ import annotations

import json
from typing import Any

from event_bodies import (
    job_created,
    job_state_changed,
    launch,
    launch_requested,
    offer,
    offer_received,
    placement_made,
    task_state_changed,
    tasks_admitted,
)

from peloton.model.event import Event
from peloton.placement.domain.board import PlacementBoard

Body = dict[str, Any]
RETENTION = 1_000
JOBS_PER_WAVE = 5
TASKS = 4
HOSTS = ("h1", "h2")


def placed(events: list[Event]) -> list[Body]:
    return [p for e in events if e.type == "PlacementMade" for p in e.body["placements"]]


def sizes(board: PlacementBoard) -> dict[str, int]:
    return {
        "jobs": len(board.jobs), "finished": len(board.finished), "runs": len(board.book.runs),
        "ended": len(board.book.ended), "queue": len(board.queue),
        "holds": len(board.inflight), "reasons": len(board.reasons), "rank": len(board._rank),
        "waiting": len(board._waiting), "requests": len(board._requests._requests),
        "parts": len(board._requests._parts),
        "snapshot": len(json.dumps(board.snapshot())) // 1000,
    }


class Cluster:
    """hostmgr and jobmgr as far as the board needs them, wave after wave."""

    def __init__(self) -> None:
        self.board = PlacementBoard(retention_ms=RETENTION)
        self.generation = dict.fromkeys(HOSTS, 1)
        self.now = 0
        self.offers(0)

    def offers(self, used: int, at: int | None = None) -> None:
        bodies = []
        for h in HOSTS:
            self.generation[h] += 1
            bodies.append(offer(h, cpu=16, free_cpu=16 - used, generation=self.generation[h]))
        self.board.fold("OfferReceived", offer_received(*bodies, at=self.now if at is None
                                                         else at))

    def wave(self, w: int) -> None:
        """Jobs of the wave are created, admitted, placed, launched, run and finish; one
        instance of each fails once and its second run goes the same way."""
        board, t = self.board, self.now
        jobs = [f"w{w}-{k}" for k in range(JOBS_PER_WAVE)]
        for job in jobs:
            board.fold("JobCreated", job_created(job, TASKS, at=t))
            board.fold("TasksAdmitted", tasks_admitted(job, *range(TASKS), at=t))
        made = placed(board.next_round(t))
        assert len(made) == JOBS_PER_WAVE * TASKS  # every run placed at once
        for p in made:
            board.fold("TaskLaunchRequested", launch_requested(
                p["host"], launch(p["job_id"], p["instance"], round_=t), at=t + 1))
        for job in jobs:
            board.fold("TaskStateChanged", task_state_changed(
                job, (0, "FAILED"), previous="RUNNING", host="h1", at=t + 2))
            board.fold("TasksAdmitted", tasks_admitted(job, 0, run=2, at=t + 2))
        again = placed(board.next_round(t + 2))
        assert len(again) == JOBS_PER_WAVE
        for p in again:
            board.fold("TaskLaunchRequested", launch_requested(
                p["host"], launch(p["job_id"], 0, run=2, round_=t + 2), at=t + 3))
        for job in jobs:
            board.fold("TaskStateChanged", task_state_changed(
                job, *((i, "SUCCEEDED") for i in range(1, TASKS)), previous="RUNNING",
                at=t + 4))
            board.fold("TaskStateChanged", task_state_changed(
                job, (0, "SUCCEEDED"), run=2, previous="RUNNING", at=t + 4))
            board.fold("JobStateChanged", job_state_changed(job, "SUCCEEDED", "RUNNING", {},
                                                            at=t + 4))
        # a late duplicate of an old placement of this wave: it must not place anything
        board.fold("PlacementMade", placement_made(made[0], round_=t, at=t))
        self.offers(0, at=t + 4)
        self.now = t + RETENTION // 4


def test_sizes_stay_flat_over_many_waves_of_jobs() -> None:
    cluster = Cluster()
    history = []
    for w in range(60):
        cluster.wave(w)
        history.append(sizes(cluster.board))
    warm, late = history[15], history[15:]
    for name in warm:
        assert max(s[name] for s in late) <= max(warm[name], 1) * 1.2 + 1, (name, warm, late[-1])
    board = cluster.board
    # only jobs still inside the window are remembered (four waves of RETENTION/4 apart)
    assert len(board.jobs) <= 6 * JOBS_PER_WAVE and board.queue == {}
    assert all(job.startswith(("w5", "w56", "w57", "w58", "w59")) for job in board.jobs)


def test_a_live_job_keeps_its_spec_however_long_its_runs_wait() -> None:
    board = PlacementBoard(retention_ms=RETENTION)
    board.fold("JobCreated", job_created("slow", 2, at=0))
    board.fold("TasksAdmitted", tasks_admitted("slow", 0, at=0))
    board.fold("OfferReceived", offer_received(offer("h1", cpu=1), at=0))
    assert placed(board.next_round(1))
    board.fold("TaskLaunchRequested", launch_requested("h1", launch("slow", 0, round_=1), at=2))
    for now in range(3, 20 * RETENTION, RETENTION // 2):  # the job stays alive
        board.next_round(now)
    assert "slow" in board.jobs
    board.fold("TasksAdmitted", tasks_admitted("slow", 1, at=20 * RETENTION))
    board.fold("OfferReceived", offer_received(offer("h1", cpu=2, free_cpu=1, generation=2),
                                               at=20 * RETENTION))
    assert [p["instance"] for p in placed(board.next_round(20 * RETENTION + 1))] == [1]


def test_a_finished_job_leaves_after_the_window_and_late_facts_do_not_revive_it() -> None:
    board = PlacementBoard(retention_ms=RETENTION)
    board.fold("JobCreated", job_created("done", 1, at=0))
    board.fold("OfferReceived", offer_received(offer("h1", cpu=4), at=0))
    board.fold("TaskStateChanged", task_state_changed("done", (0, "SUCCEEDED"),
                                                      previous="RUNNING", at=5))
    board.fold("JobStateChanged", job_state_changed("done", "SUCCEEDED", "RUNNING", {}, at=5))
    board.next_round(RETENTION)
    assert "done" in board.jobs  # inside the window
    board.next_round(RETENTION + 5 + RETENTION // 10)  # the board sweeps every tenth
    assert "done" not in board.jobs and board.finished == {} and board.book.ended == {}
    board.fold("TasksAdmitted", tasks_admitted("done", 0, at=2 * RETENTION))  # a stale copy
    assert board.next_round(2 * RETENTION) == []
    board.next_round(4 * RETENTION)
    assert board.book.runs == {} and board.queue == {} and board.orphans_dropped == 1


def test_a_run_whose_job_never_arrives_is_dropped_after_the_window() -> None:
    board = PlacementBoard(retention_ms=RETENTION)
    board.fold("OfferReceived", offer_received(offer("h1", cpu=4), at=0))
    board.fold("TasksAdmitted", tasks_admitted("ghost", 0, 1, at=0))
    board.next_round(RETENTION // 2)
    assert len(board.queue) == 2 and board._waiting == {"ghost"}
    board.next_round(2 * RETENTION)
    assert board.queue == {} and board.book.runs == {} and board._waiting == set()
    assert board.orphans_dropped == 2
