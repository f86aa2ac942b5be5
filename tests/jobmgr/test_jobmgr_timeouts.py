"""Peloton's timeouts in the job manager (issue 8, item 6), driven by ticks with now_ms.

- READY (admitted, holding an allocation) but not placed within the placement timeout:
  back to PENDING, the allocation given back, admitted again after Peloton's backoff,
  `(attempt mod 3) x 5 min` (`not_before_ms` on TaskStateChanged.v2).
- PREEMPTING whose kill never ends: back to RUNNING after the preemption timeout.
"""

from __future__ import annotations

import copy

import pytest
from event_bodies import (
    job_kill_requested,
    placement,
    placement_made,
    tasks_admitted,
    tasks_preempted,
)
from jobmgr_driver import Jobmgr, changes

from peloton.jobmgr.domain.book import JobBook
from peloton.jobmgr.domain.timeouts import Timeouts
from peloton.jobmgr.service import JobManagerCore
from peloton.model.event import Event

MIN = 60_000
LIMITS = Timeouts(placement_ms=10 * MIN, placement_backoff_unit_ms=5 * MIN,
                  preempt_ms=10 * MIN)


def book(limits: Timeouts = LIMITS) -> Jobmgr:
    jm = Jobmgr(JobBook(timeouts=limits))
    jm.submit("j", 2)
    return jm


def admit(jm: Jobmgr, *instances: int) -> None:
    jm.send("TasksAdmitted", tasks_admitted("j", *instances, at=jm.now))


def timed_out(events: list[Event]) -> list[tuple[int, str, str, int | None]]:
    return [(c["instance"], c["previous_state"], c["state"], c["not_before_ms"])
            for e in events if e.type == "TaskStateChanged" for c in e.body["changes"]]


def test_the_defaults_are_pelotons() -> None:
    assert Timeouts() == LIMITS
    assert JobManagerCore().timeouts == LIMITS


def test_a_ready_run_not_placed_in_time_goes_back_to_pending_with_a_backoff() -> None:
    jm = book()
    admit(jm, 0, 1)
    ready_at = jm.now
    assert jm.tick(10 * MIN - 1) == []  # not yet
    out = jm.tick(1)
    now = jm.now
    assert now - ready_at == 10 * MIN
    assert timed_out(out) == [(0, "READY", "PENDING", now + 5 * MIN),
                              (1, "READY", "PENDING", now + 5 * MIN)]
    reason = out[0].body["changes"][0]["reason"]
    assert reason.startswith("placement timeout") and "allocation given back" in reason
    assert jm.states("j") == ["PENDING", "PENDING"]
    assert jm.task("j", 0).not_before_ms == now + 5 * MIN
    assert jm.tick(60 * MIN) == []  # PENDING runs are not watched


def test_the_backoff_follows_pelotons_cycle_of_three() -> None:
    jm = book()
    backoffs = []
    for _ in range(4):
        admit(jm, 0)
        out = jm.tick(10 * MIN)
        (change,) = timed_out(out)
        backoffs.append(None if change[3] is None else change[3] - jm.now)
    assert backoffs == [5 * MIN, 10 * MIN, None, 5 * MIN]  # (attempt mod 3) x 5 min
    assert jm.task("j", 0).placement_attempts == 4


def test_an_admission_older_than_the_give_back_does_not_make_the_run_ready_again() -> None:
    jm = book()
    first = tasks_admitted("j", 0, at=jm.now)
    jm.send("TasksAdmitted", first)
    jm.tick(10 * MIN)  # given back, admitted again after 5 min
    assert jm.send("TasksAdmitted", first) == []  # a redelivery of the first admission
    assert jm.states("j")[0] == "PENDING"
    jm.now += 5 * MIN
    out = jm.send("TasksAdmitted", tasks_admitted("j", 0, at=jm.now))
    assert changes(out) == [("j", 0, 1, "PENDING", "READY")]


def test_a_placed_run_does_not_time_out_and_a_retry_starts_a_new_count() -> None:
    jm = book()
    admit(jm, 0, 1)
    jm.send("PlacementMade", placement_made(placement("j", 0, "h1")))
    out = jm.tick(10 * MIN)
    assert timed_out(out) == [(1, "READY", "PENDING", jm.now + 5 * MIN)]
    assert jm.states("j") == ["PLACED", "PENDING"]


def test_a_placement_read_after_the_timeout_still_places_the_run() -> None:
    jm = book()
    admit(jm, 0)
    jm.tick(10 * MIN)
    out = jm.send("PlacementMade", placement_made(placement("j", 0, "h1")))
    assert changes(out) == [("j", 0, 1, "PENDING", "PLACED")]


def test_a_run_being_killed_does_not_time_out() -> None:
    jm = book()
    admit(jm, 0)
    jm.send("JobKillRequested", job_kill_requested("j"))
    assert timed_out(jm.tick(10 * MIN)) == []


def test_a_preemption_that_never_ends_returns_the_run_to_running() -> None:
    jm = book()
    jm.to_running("j", 0, "h1")
    jm.send("TasksPreempted", tasks_preempted("j", 0))
    assert jm.states("j")[0] == "PREEMPTING"
    assert jm.tick(10 * MIN - 1) == []
    out = jm.tick(1)
    assert changes(out) == [("j", 0, 1, "PREEMPTING", "RUNNING")]
    assert out[0].body["changes"][0]["reason"].startswith("preemption timeout")
    assert jm.job_state("j") == "RUNNING"
    # no timeout follows; an hour without news of the run, its agent is asked about it
    assert [e.type for e in jm.tick(60 * MIN)] == ["TaskReconcileRequested"]


def test_a_preemption_that_ends_in_time_requeues_the_task_and_nothing_times_out() -> None:
    jm = book()
    jm.to_running("j", 0, "h1")
    jm.send("TasksPreempted", tasks_preempted("j", 0))
    jm.status("h1", "j", 0, "KILLED")
    assert (jm.task("j", 0).run, jm.states("j")[0]) == (2, "PENDING")
    assert changes(jm.tick(60 * MIN)) == []


def test_zero_turns_a_timeout_off() -> None:
    jm = book(Timeouts(placement_ms=0, preempt_ms=0))
    admit(jm, 0)
    jm.to_running("j", 1, "h1")
    jm.send("TasksPreempted", tasks_preempted("j", 1))
    assert jm.tick(24 * 60 * MIN) == []


def test_negative_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="placement_ms"):
        Timeouts(placement_ms=-1)


def test_timeouts_count_event_time_from_the_log_so_a_replay_decides_the_same() -> None:
    jm = book()
    admit(jm, 0, 1)
    jm.tick(10 * MIN)
    admit(jm, 0)
    replayed = JobBook(timeouts=LIMITS)
    for etype, body in jm.log:
        replayed.apply(etype, copy.deepcopy(body))
    assert replayed.jobs["j"].tasks == jm.book.jobs["j"].tasks
    later = jm.now + 10 * MIN
    assert [e.body for e in replayed.tick(later)] == [e.body for e in jm.book.tick(later)]


def test_the_service_reads_its_limits_from_the_environment() -> None:
    core = JobManagerCore.from_env({
        "PELOTON_JOBMGR_PLACEMENT_TIMEOUT_S": "30", "PELOTON_JOBMGR_PLACEMENT_BACKOFF_S": "1.5",
        "PELOTON_JOBMGR_PREEMPT_TIMEOUT_S": "0", "PELOTON_JOBMGR_RETENTION_S": "120"})
    assert core.timeouts == Timeouts(placement_ms=30_000, placement_backoff_unit_ms=1_500,
                                     preempt_ms=0)
    assert core.retention_ms == core.book.retention_ms == 120_000
    assert core.book.timeouts is core.timeouts
    assert JobManagerCore.from_env({}).timeouts == LIMITS


@pytest.mark.parametrize("raw", ["soon", "-1", "nan", "inf"])
def test_a_bad_limit_in_the_environment_is_named(raw: str) -> None:
    with pytest.raises(ValueError, match="PELOTON_JOBMGR_PLACEMENT_TIMEOUT_S"):
        JobManagerCore.from_env({"PELOTON_JOBMGR_PLACEMENT_TIMEOUT_S": raw})
