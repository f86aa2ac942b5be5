"""The ledger's fold: order across topics does not matter, and its state stays bounded.

Examples ("admitted before PENDING", "task changes before JobCreated", "requeue releases
the allocation", "a finished job is not resurrected") and a property: a random log made
by a job manager / resource manager exchange (admissions, requeues with backoff,
preemptions, failures and retries, finished jobs), folded in any interleaving that keeps
each partition's order, gives the same ledger as the log order, and at no point counts an
ended run in the allocation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import hypothesis.strategies as st
import pytest
from event_bodies import (
    job_created,
    offer,
    offer_received,
    task_state_changed,
    tasks_admitted,
    tasks_preempted,
)
from hypothesis import HealthCheck, given, settings

from peloton.model.resources import Resources
from peloton.model.taskstate import TERMINAL
from peloton.resmgr.domain.cycle import ResourceManager
from peloton.resmgr.domain.ledger import Ledger

Fact = tuple[str, str, dict[str, Any]]  # (partition, type, body)


def change(job_id: str, instance: int, state: str, *, run: int = 1, previous: str = "PENDING",
           at: int = 0, **extra: Any) -> dict[str, Any]:
    body = task_state_changed(job_id, (instance, state), run=run, previous=previous, at=at)
    body["changes"][0].update(extra)
    return body


def job_state(job_id: str, state: str, at: int = 0) -> dict[str, Any]:
    return {"job_id": job_id, "at": at, "state": state, "previous_state": "RUNNING",
            "task_counts": {}}


def signature(ledger: Ledger) -> dict[str, Any]:
    """What the ledger says about demand and allocation."""
    return {
        "holding": sorted((k, e.run) for k, e in ledger.holding.items()),
        "pending": sorted((k, e.run, e.not_before) for k, e in ledger.pending.items()),
        "preempted": sorted((k, e.preempted_at) for k, e in ledger.tasks.items()),
        "reasons": sorted((k, e.reason) for k, e in ledger.pending.items()),
        "allocation": _sum(e.resources for e in ledger.holding.values()),
        "demand": _sum(e.resources for e in ledger.pending.values()),
        "jobs": sorted(ledger.jobs),
        "pins": sorted((k, e.run, e.pinned_host) for k, e in ledger.tasks.items()),
    }


def pin_of(job_id: str, instance: int, run: int) -> str | None:
    """The host a run of the property's logs is pinned to (some runs are unpinned)."""
    return None if (instance + run + int(job_id[1:])) % 3 == 0 else f"h{(instance + run) % 2}"


def pinned(body: dict[str, Any], job_id: str) -> dict[str, Any]:
    """The body with each PENDING change (and admitted task) carrying its run's pin."""
    for item in body.get("changes", body.get("tasks", [])):
        if item.get("state", "PENDING") == "PENDING":
            item["pinned_host"] = pin_of(item.get("job_id", job_id), item["instance"],
                                         item["run"])
    return body


def _sum(items: Iterator[Resources]) -> dict[str, float]:
    total = Resources()
    for r in items:
        total = total + r
    return {k: round(v, 6) for k, v in total.as_dict().items()}


# --------------------------------------------------------------------- examples


def test_an_admission_folded_before_the_change_to_pending_is_kept_and_counted_once() -> None:
    ledger = Ledger()
    ledger.fold("JobCreated", job_created("j", 2, cpu=1.0))
    ledger.fold("TasksAdmitted", tasks_admitted("j", 0, at=5))
    ledger.fold("TaskStateChanged", change("j", 0, "PENDING", previous="INITIALIZED"))
    ledger.fold("TaskStateChanged", change("j", 1, "PENDING", previous="INITIALIZED"))
    assert sorted(ledger.holding) == [("j", 0)] and sorted(ledger.pending) == [("j", 1)]
    ledger.fold("TaskStateChanged", change("j", 0, "READY"))
    ledger.fold("TasksAdmitted", tasks_admitted("j", 0, at=5))  # redelivered
    assert sorted(ledger.holding) == [("j", 0)]
    assert signature(ledger)["allocation"]["cpu"] == 1.0


def test_a_run_s_start_is_the_at_of_the_first_change_that_started_it() -> None:
    """`started_seq` orders preemption victims (the latest started first): set by the
    first change that put the run on its host (LAUNCHING, STARTING, RUNNING), whether the
    run was held before (a held stage to another) or not (a RUNNING read while the ledger
    still had it PENDING)."""
    ledger = Ledger()
    ledger.fold("JobCreated", job_created("j", 2, cpu=1.0))
    for i in (0, 1):
        ledger.fold("TaskStateChanged", change("j", i, "PENDING", previous="INITIALIZED"))
    ledger.fold("TasksAdmitted", tasks_admitted("j", 0, at=5))
    for state, previous, at in (("READY", "PENDING", 10), ("PLACED", "READY", 20),
                                ("LAUNCHING", "PLACED", 30), ("STARTING", "LAUNCHING", 40),
                                ("RUNNING", "STARTING", 50)):
        ledger.fold("TaskStateChanged", change("j", 0, state, previous=previous, at=at))
        assert ledger.tasks[("j", 0)].started_seq == (30 if at >= 30 else 0)
    ledger.fold("TaskStateChanged", change("j", 1, "RUNNING", previous="LAUNCHING", at=60))
    assert ledger.tasks[("j", 1)].started_seq == 60
    assert sorted(ledger.holding) == [("j", 0), ("j", 1)]


def test_task_changes_before_their_job_created_are_held_then_applied() -> None:
    ledger = Ledger()
    ledger.fold("TaskStateChanged", change("j", 0, "PENDING", previous="INITIALIZED"))
    ledger.fold("TasksAdmitted", tasks_admitted("j", 1))
    assert ledger.tasks == {} and ledger.size()["orphans"] == 2
    ledger.fold("JobCreated", job_created("j", 2, cpu=2.0))
    assert sorted(ledger.pending) == [("j", 0)] and sorted(ledger.holding) == [("j", 1)]
    assert ledger.size()["orphans"] == 0


def test_a_requeue_releases_the_allocation_and_a_late_admission_does_not_retake_it() -> None:
    ledger = Ledger()
    ledger.fold("JobCreated", job_created("j", 1))
    ledger.fold("TaskStateChanged", change("j", 0, "PENDING", previous="INITIALIZED"))
    # the job-events partition runs ahead: READY, then back to PENDING after a timeout
    ledger.fold("TaskStateChanged", change("j", 0, "READY"))
    ledger.fold("TaskStateChanged", change("j", 0, "PENDING", previous="READY",
                                           not_before_ms=900))
    ledger.fold("TasksAdmitted", tasks_admitted("j", 0, at=10))  # the first admission, late
    assert list(ledger.pending) == [("j", 0)] and ledger.holding == {}
    assert ledger.pending[("j", 0)].not_before == 900
    ledger.fold("TasksAdmitted", tasks_admitted("j", 0, at=1000))  # the second admission
    assert list(ledger.holding) == [("j", 0)] and ledger.pending == {}


def test_in_log_order_a_requeue_releases_the_allocation_too() -> None:
    ledger = Ledger()
    ledger.fold("JobCreated", job_created("j", 1))
    ledger.fold("TaskStateChanged", change("j", 0, "PENDING", previous="INITIALIZED"))
    ledger.fold("TasksAdmitted", tasks_admitted("j", 0, at=10))
    ledger.fold("TaskStateChanged", change("j", 0, "READY"))
    assert list(ledger.holding) == [("j", 0)]
    ledger.fold("TaskStateChanged", change("j", 0, "PENDING", previous="READY"))
    assert list(ledger.pending) == [("j", 0)] and ledger.holding == {}


def test_a_finished_job_leaves_and_late_facts_do_not_resurrect_it() -> None:
    ledger = Ledger()
    ledger.fold("JobCreated", job_created("j", 1))
    ledger.fold("TaskStateChanged", change("j", 0, "PENDING", previous="INITIALIZED"))
    ledger.fold("TaskStateChanged", change("j", 0, "SUCCEEDED", previous="RUNNING"))
    ledger.fold("JobStateChanged", job_state("j", "SUCCEEDED"))
    for etype, body in [("TasksAdmitted", tasks_admitted("j", 0)),
                        ("TasksPreempted", tasks_preempted("j", 0)),
                        ("JobCreated", job_created("j", 1)),
                        ("TaskStateChanged", change("j", 0, "RUNNING", previous="READY"))]:
        ledger.fold(etype, body)
    assert ledger.size() == {"jobs": 0, "tasks": 0, "ended": 0, "forgotten": 1,
                             "orphans": 0, "hosts": 0}


def test_facts_about_an_ended_or_older_run_are_stale() -> None:
    ledger = Ledger()
    ledger.fold("JobCreated", job_created("j", 1))
    ledger.fold("TaskStateChanged", change("j", 0, "PENDING", previous="INITIALIZED"))
    ledger.fold("TaskStateChanged", change("j", 0, "FAILED", previous="RUNNING"))
    ledger.fold("TasksAdmitted", tasks_admitted("j", 0))  # run 1 ended
    assert ledger.tasks == {}
    ledger.fold("TasksAdmitted", tasks_admitted("j", 0, run=2))  # proves run 2 is PENDING
    ledger.fold("TaskStateChanged", change("j", 0, "PENDING", run=2, previous="FAILED"))
    assert list(ledger.holding) == [("j", 0)] and ledger.tasks[("j", 0)].run == 2


def test_fifty_waves_of_jobs_leave_the_ledger_bounded() -> None:
    ledger = Ledger(retention_ms=5_000)
    ledger.fold("OfferReceived", offer_received(offer("h0", cpu=64)))
    sizes = []
    for wave in range(50):
        at = wave * 2_000
        for j in range(20):
            job_id = f"w{wave}-{j}"
            ledger.fold("JobCreated", job_created(job_id, 4, at=at))
            ledger.fold("TaskStateChanged", task_state_changed(
                job_id, *((i, "PENDING") for i in range(4)), previous="INITIALIZED", at=at))
            ledger.fold("TasksAdmitted", tasks_admitted(job_id, 0, 1, 2, 3, at=at + 1))
            ledger.fold("TaskStateChanged", task_state_changed(
                job_id, *((i, "RUNNING") for i in range(4)), previous="READY", at=at + 2))
            ledger.fold("TaskStateChanged", task_state_changed(
                job_id, *((i, "SUCCEEDED") for i in range(4)), previous="RUNNING",
                at=at + 3))
            ledger.fold("JobStateChanged", job_state(job_id, "SUCCEEDED", at + 3))
            # a late redelivery of the admission, after the job ended
            ledger.fold("TasksAdmitted", tasks_admitted(job_id, 0, 1, 2, 3, at=at + 1))
        sizes.append(ledger.size())
        assert ledger.pending == {} and ledger.holding == {}
    assert all(s["jobs"] == 0 and s["tasks"] == 0 and s["ended"] == 0 for s in sizes)
    assert all(s["orphans"] == 0 for s in sizes)
    # tombstones: only the jobs ended within the retention window (plus one sweep)
    assert max(s["forgotten"] for s in sizes[5:]) <= 20 * (5_000 // 2_000 + 2)


def test_a_task_level_revocable_task_is_marked_revocable() -> None:
    ledger = Ledger()
    body = job_created("j", 2)
    body["instance_tasks"] = {"1": {**body["default_task"], "revocable": True}}
    ledger.fold("JobCreated", body)
    ledger.fold("TaskStateChanged", task_state_changed("j", (0, "PENDING"), (1, "PENDING"),
                                                       previous="INITIALIZED"))
    assert [ledger.tasks[("j", i)].revocable for i in (0, 1)] == [False, True]


# ------------------------------------------------------------------- property


@st.composite
def logs(draw: st.DrawFn) -> list[Fact]:
    """A causal log: the resource manager admits/preempts what it saw, the job manager
    moves runs on. Partitions: job-events per job, tasks-admitted and respool-events."""
    facts: list[Fact] = [("offers", "OfferReceived", offer_received(offer("h0", cpu=64)))]
    n_jobs = draw(st.integers(1, 3))
    runs: dict[tuple[str, int], list[Any]] = {}  # task -> [run, phase]
    at = 1
    for j in range(n_jobs):
        job_id = f"j{j}"
        n = draw(st.integers(1, 3))
        facts.append((f"jobs/{job_id}", "JobCreated",
                       job_created(job_id, n, cpu=draw(st.sampled_from([0.5, 1.0, 2.0])))))
        facts.append((f"jobs/{job_id}", "TaskStateChanged", pinned(task_state_changed(
            job_id, *((i, "PENDING") for i in range(n)), previous="INITIALIZED", at=at),
            job_id)))
        for i in range(n):
            runs[(job_id, i)] = [1, "pending"]
    for _ in range(draw(st.integers(0, 25))):
        live = sorted(k for k, v in runs.items() if v[1] != "done")
        if not live:
            break
        job_id, i = draw(st.sampled_from(live))
        run, phase = runs[(job_id, i)]
        at += 1
        part = f"jobs/{job_id}"
        options = {"pending": ["admit", "defer"], "admitted": ["ready"],
                   "ready": ["requeue", "place", "run", "preempt"],
                   "running": ["finish", "fail", "preempt"],
                   # a READY victim the job manager requeued (placement timeout) before
                   # it read the preemption: the run stays, PENDING again
                   "preempted-ready": ["kill", "requeue"],
                   "preempted": ["kill"]}[phase]
        action = draw(st.sampled_from(options))
        if action == "admit":
            facts.append(("admitted", "TasksAdmitted", tasks_admitted(
                job_id, i, run=run, at=at, pinned_host=pin_of(job_id, i, run))))
            runs[(job_id, i)][1] = "admitted"
        elif action == "ready":
            facts.append((part, "TaskStateChanged", change(job_id, i, "READY", run=run,
                                                           at=at)))
            runs[(job_id, i)][1] = "ready"
        elif action == "defer":
            facts.append(("admitted", "AdmissionDeferred", {"at": at, "pool": "/default",
                                                            "tasks": [{
                "job_id": job_id, "instance": i, "run": run, "reason": f"r{at % 3}"}]}))
        elif action == "requeue":
            facts.append((part, "TaskStateChanged", change(
                job_id, i, "PENDING", run=run, previous="READY", at=at,
                not_before_ms=at + 50)))
            runs[(job_id, i)][1] = "pending"
        elif action == "place":  # a held stage to another, still waiting to start
            facts.append((part, "TaskStateChanged", change(
                job_id, i, draw(st.sampled_from(["PLACED", "LAUNCHING"])), run=run,
                previous="READY", at=at)))
        elif action == "run":
            facts.append((part, "TaskStateChanged", change(job_id, i, "RUNNING", run=run,
                                                           previous="READY", at=at)))
            runs[(job_id, i)][1] = "running"
        elif action == "preempt":
            facts.append(("preempted", "TasksPreempted", tasks_preempted(job_id, i, run=run,
                                                                         at=at)))
            runs[(job_id, i)][1] = "preempted-ready" if phase == "ready" else "preempted"
        elif action == "finish":
            facts.append((part, "TaskStateChanged", change(job_id, i, "SUCCEEDED", run=run,
                                                           previous="RUNNING", at=at)))
            runs[(job_id, i)][1] = "done"
        else:  # fail or kill: the run ends, a new run is PENDING in the same batch
            body = task_state_changed(job_id, (i, "KILLED" if action == "kill" else "FAILED"),
                                      run=run, previous="RUNNING", at=at)
            body["changes"] += pinned(task_state_changed(
                job_id, (i, "PENDING"), run=run + 1, previous="FAILED", at=at), job_id)["changes"]
            facts.append((part, "TaskStateChanged", body))
            runs[(job_id, i)] = [run + 1, "pending"]
        if all(v[1] == "done" for k, v in runs.items() if k[0] == job_id):
            facts.append((part, "JobStateChanged", job_state(job_id, "SUCCEEDED", at)))
    return facts


def interleavings(facts: list[Fact], order: list[int], split_created: bool) -> list[Fact]:
    """A merge of the partitions (each kept in order) picked by `order`. With
    `split_created`, JobCreated sits in a partition of its own (a late JobCreated)."""
    queues: dict[str, list[Fact]] = {}
    for fact in facts:
        part = fact[0] + "/created" if split_created and fact[1] == "JobCreated" else fact[0]
        queues.setdefault(part, []).append(fact)
    names = sorted(queues)
    out: list[Fact] = []
    k = 0
    while any(queues.values()):
        live = [n for n in names if queues[n]]
        pick = live[order[k % len(order)] % len(live)] if order else live[0]
        k += 1
        out.append(queues[pick].pop(0))
    return out


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(logs(), st.lists(st.integers(0, 7), max_size=40), st.booleans())
def test_any_interleaving_gives_the_ledger_of_the_log_order(
    facts: list[Fact], order: list[int], split_created: bool,
) -> None:
    expected = Ledger()
    for _, etype, body in facts:
        expected.fold(etype, body)
    ledger = Ledger()
    ended: set[tuple[str, int, int]] = set()
    for _, etype, body in interleavings(facts, order, split_created):
        ledger.fold(etype, body)
        if etype == "TaskStateChanged":
            ended |= {(body["job_id"], c["instance"], c["run"]) for c in body["changes"]
                      if c["state"] in TERMINAL}
        # never an ended run in the allocation; one entry per task, so never twice
        assert not {(j, i, e.run) for (j, i), e in ledger.holding.items()} & ended
        assert ledger.holding.keys().isdisjoint(ledger.pending.keys())
    assert signature(ledger) == signature(expected)


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(logs(), st.lists(st.integers(0, 7), max_size=40), st.booleans())
def test_any_interleaving_gives_the_decisions_of_the_log_order(
    facts: list[Fact], order: list[int], split_created: bool,
) -> None:
    """What the resource manager decides next does not depend on the interleaving."""
    def manager(folded: list[Fact]) -> ResourceManager:
        rm = ResourceManager(min_recompute_ms=0, preemption_enabled=True,
                             preemption_cycles=1)
        for _, etype, body in folded:
            rm.fold(etype, body)
        return rm

    expected = manager(facts)
    shuffled = manager(interleavings(facts, order, split_created))
    for now in (40, 200, 10_200):  # 40: some runs still wait out a backoff
        assert shuffled.tick(now) == expected.tick(now)


# ------------------------------------------------------------------- bad input


def test_a_fact_that_cannot_be_read_raises_and_changes_nothing() -> None:
    """A fold is all or nothing: the body is read whole before anything is applied (the
    shell dead-letters the record; the ledger stays what the log says)."""
    ledger = Ledger()
    ledger.fold("OfferReceived", offer_received(offer("h0", cpu=8)))
    ledger.fold("JobCreated", job_created("j", 3))
    ledger.fold("TaskStateChanged", change("j", 0, "PENDING", previous="INITIALIZED", at=5))
    before = ledger.snapshot()
    bad_state = task_state_changed("j", (1, "PENDING"), (2, "NOT_A_STATE"), at=900_000)
    bad_task = tasks_admitted("j", 0, 1, at=900_000)
    del bad_task["tasks"][1]["run"]
    bad_offer = offer_received(offer("h1", cpu=8), offer("h2", cpu=8))
    bad_offer["offers"][1]["capacity"] = {"bogons": 1.0}
    bad_offer["at"] = 900_000
    bad_job = job_created("k", 1, at=900_000)
    del bad_job["default_task"]["resources"]
    for etype, body in [("TaskStateChanged", bad_state), ("TasksAdmitted", bad_task),
                        ("OfferReceived", bad_offer), ("JobCreated", bad_job),
                        ("TaskStateChanged", {"job_id": "j", "at": "soon", "changes": []})]:
        with pytest.raises((KeyError, TypeError, ValueError)):
            ledger.fold(etype, body)
        assert ledger.snapshot() == before, etype
