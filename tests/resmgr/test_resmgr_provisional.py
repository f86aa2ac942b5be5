"""Decide, publish, then commit: the resource manager's decisions are provisional until
they come back through the log. And Peloton's requeue: a run the job manager moves back
from READY to PENDING gives its allocation back and is not admitted before its backoff.

Examples: decisions that never come back are decided again after the timeout (and at once
after `discard_unpublished`); decisions folded back are never decided twice; a requeued
run frees its allocation for others and waits out `not_before_ms`; task-level revocable
tasks are admitted against the slack entitlement, like a revocable job.
"""

from __future__ import annotations

from typing import Any

from event_bodies import (
    job_created,
    offer,
    offer_received,
    task_state_changed,
)

from peloton.model.event import Event
from peloton.resmgr.domain.cycle import BACKOFF_REASON, ResourceManager

TIMEOUT = 5_000


def cluster(cpu: float, **kw: Any) -> ResourceManager:
    rm = ResourceManager(entitlement_cycle_ms=10_000, min_recompute_ms=0,
                         confirm_timeout_ms=TIMEOUT, **kw)
    rm.fold("OfferReceived", offer_received(offer("h0", cpu=cpu, mem=100_000)))
    return rm


def submit(rm: ResourceManager, job_id: str, n: int, at: int = 0, **kw: Any) -> None:
    rm.fold("JobCreated", job_created(job_id, n, at=at, **kw))
    rm.fold("TaskStateChanged", task_state_changed(job_id, *((i, "PENDING") for i in range(n)),
                                                   previous="INITIALIZED", at=at))


def of(events: list[Event], etype: str) -> list[Event]:
    return [e for e in events if e.type == etype]


def admitted(events: list[Event]) -> list[tuple[str, int, int]]:
    return [(t["job_id"], t["instance"], t["run"]) for e in of(events, "TasksAdmitted")
            for t in e.body["tasks"]]


def fold_back(rm: ResourceManager, events: list[Event]) -> None:
    for ev in events:
        if ev.type in ("TasksAdmitted", "TasksPreempted", "AdmissionDeferred"):
            rm.fold(ev.type, ev.body)


def test_decisions_that_never_come_back_are_decided_again_after_the_timeout() -> None:
    rm = cluster(4)
    submit(rm, "j", 2)
    first = rm.tick(0)
    assert admitted(first) == [("j", 0, 1), ("j", 1, 1)]
    assert rm.ledger.holding == {}  # the ledger only has what the log says
    for now in range(100, TIMEOUT, 500):
        assert admitted(rm.tick(now)) == []
    assert admitted(rm.tick(TIMEOUT)) == [("j", 0, 1), ("j", 1, 1)]


def test_decisions_folded_back_are_never_decided_twice() -> None:
    rm = cluster(4)
    submit(rm, "j", 2)
    seen: list[tuple[str, int, int]] = []
    for now in range(0, 6 * TIMEOUT, 700):
        out = rm.tick(now)
        seen += admitted(out)
        fold_back(rm, out)
    assert seen == [("j", 0, 1), ("j", 1, 1)]
    assert len(rm.provisional) == 0 and sorted(rm.ledger.holding) == [("j", 0), ("j", 1)]


def test_a_failed_publish_is_discarded_and_decided_again_at_once() -> None:
    rm = cluster(4)
    submit(rm, "j", 1)
    assert admitted(rm.tick(0)) == [("j", 0, 1)]
    rm.discard_unpublished()
    again = rm.tick(100)
    assert admitted(again) == [("j", 0, 1)]
    fold_back(rm, again)
    assert admitted(rm.tick(200)) == [] and admitted(rm.tick(TIMEOUT + 500)) == []


def test_a_discard_forgets_only_the_last_ticks_decisions() -> None:
    rm = cluster(4)
    submit(rm, "a", 1)
    assert admitted(rm.tick(0)) == [("a", 0, 1)]  # published, not folded back yet
    submit(rm, "b", 1)
    assert admitted(rm.tick(100)) == [("b", 0, 1)]
    rm.discard_unpublished()
    assert admitted(rm.tick(200)) == [("b", 0, 1)]


def test_deferral_reasons_are_provisional_too() -> None:
    rm = cluster(1)
    submit(rm, "big", 1, cpu=3.0)
    first = of(rm.tick(0), "AdmissionDeferred")
    assert len(first) == 1
    assert of(rm.tick(100), "AdmissionDeferred") == []  # said, not yet back: not repeated
    rm.discard_unpublished()  # no effect on the earlier tick's reason
    assert of(rm.tick(200), "AdmissionDeferred") == []
    assert len(of(rm.tick(TIMEOUT + 100), "AdmissionDeferred")) == 1  # never came back


def test_a_requeued_run_gives_its_allocation_back_and_waits_out_its_backoff() -> None:
    rm = cluster(1)
    submit(rm, "a", 1, at=0)
    out = rm.tick(0)
    assert admitted(out) == [("a", 0, 1)]
    fold_back(rm, out)
    rm.fold("TaskStateChanged", task_state_changed("a", (0, "READY"), at=10))
    submit(rm, "b", 1, at=20)
    assert admitted(rm.tick(100)) == []  # the one cpu is held by a's READY run
    # a stayed READY past the placement timeout: back to PENDING, retry after 5 s
    requeue = task_state_changed("a", (0, "PENDING"), previous="READY", at=1000)
    requeue["changes"][0]["not_before_ms"] = 6_000
    rm.fold("TaskStateChanged", requeue)
    out = rm.tick(1100)
    assert admitted(out) == [("b", 0, 1)]
    assert [(t["job_id"], t["reason"]) for e in of(out, "AdmissionDeferred")
            for t in e.body["tasks"]] == [("a", BACKOFF_REASON)]
    fold_back(rm, out)
    rm.fold("TaskStateChanged", task_state_changed("b", (0, "SUCCEEDED"), previous="RUNNING",
                                                   at=1200))
    assert admitted(rm.tick(1300)) == []  # room again, but a's backoff runs until 6 s
    assert admitted(rm.tick(5_900)) == []
    assert admitted(rm.tick(6_000)) == [("a", 0, 1)]  # no other change needed


def test_a_task_level_revocable_task_is_admitted_against_the_slack_entitlement() -> None:
    rm = cluster(4)
    body = job_created("j", 2)
    body["instance_tasks"] = {"1": {**body["default_task"], "revocable": True}}
    rm.fold("JobCreated", body)
    rm.fold("TaskStateChanged", task_state_changed("j", (0, "PENDING"), (1, "PENDING"),
                                                   previous="INITIALIZED"))
    out = rm.tick(0)
    # revocable memory is carved from the pool's reservation (slack limit 20% of it) and
    # /default reserves nothing: the revocable task waits on the slack entitlement
    assert admitted(out) == [("j", 0, 1)]
    reasons = [(t["instance"], t["reason"]) for e in of(out, "AdmissionDeferred")
               for t in e.body["tasks"]]
    assert len(reasons) == 1 and reasons[0][0] == 1
    assert reasons[0][1] == "pool over slack entitlement: memory 64/0"


def test_a_run_admitted_twice_for_one_pending_stage_is_healed_after_a_requeue() -> None:
    """A duplicate admission (re-decided after its fact was late) that the job manager
    never used does not keep a requeued run from being admitted for ever."""
    rm = cluster(4, unused_admission_ms=30_000)
    submit(rm, "j", 1)
    rm.fold("TasksAdmitted", {"at": 0, "pool": "/default",
                              "tasks": [{"job_id": "j", "instance": 0, "run": 1}]})
    rm.fold("TasksAdmitted", {"at": 6_000, "pool": "/default",
                              "tasks": [{"job_id": "j", "instance": 0, "run": 1}]})
    rm.fold("TaskStateChanged", task_state_changed("j", (0, "READY"), at=10))
    rm.fold("TaskStateChanged", task_state_changed("j", (0, "PENDING"), previous="READY",
                                                   at=20_000))
    assert admitted(rm.tick(20_100)) == []  # looks admitted: the duplicate is unused
    assert admitted(rm.tick(36_000)) == [("j", 0, 1)]


def test_a_retried_run_with_a_backoff_is_admitted_only_once_it_has_passed() -> None:
    """`not_before_ms` on any change to PENDING (here a new run after a failure) holds the
    run back; a later tick admits it with no other change (time is passed in)."""
    rm = cluster(4)
    submit(rm, "j", 1)
    out = rm.tick(0)
    fold_back(rm, out)
    rm.fold("TaskStateChanged", task_state_changed("j", (0, "RUNNING"), previous="READY",
                                                   at=10))
    retry = task_state_changed("j", (0, "FAILED"), previous="RUNNING", at=500)
    retry["changes"] += task_state_changed("j", (0, "PENDING"), run=2, previous="FAILED",
                                           at=500)["changes"]
    retry["changes"][1]["not_before_ms"] = 2_500
    rm.fold("TaskStateChanged", retry)
    assert [admitted(rm.tick(now)) for now in (600, 1_500, 2_499)] == [[], [], []]
    assert admitted(rm.tick(2_500)) == [("j", 0, 2)]
