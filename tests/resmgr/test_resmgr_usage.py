"""Usage maintained incrementally: `Ledger.sums` and `ResourceManager.usage()`.

The ledger keeps demand and allocation totals (integer micro-units, per pool as named in
the job's spec and run class) as runs enter and leave the pending and holding states, so
a tick does not walk every active run. Properties: after every fold of any interleaving
of a causal log (with redeliveries and restores from a JSON round trip of the snapshot),
the totals equal a recomputation from scratch over every live run, and end equal to the
totals of the log order; over random core histories (pools created under jobs,
provisional and unused admissions, preemptions), `usage()` (with and without the runs
being taken back) equals the old walk over every active run, computed from scratch.
"""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from typing import Any

import hypothesis.strategies as st
from event_bodies import job_created, task_state_changed, tasks_admitted
from hypothesis import HealthCheck, given, settings
from ledger_sums import from_scratch_sums, usage_class
from test_resmgr_ledger import Fact, change, interleavings, job_state, logs
from test_resmgr_snapshot import Driver, Op, new_core

from peloton.model.resources import Resources
from peloton.resmgr.domain.admission import PoolAllocation
from peloton.resmgr.domain.cycle import ResourceManager
from peloton.resmgr.domain.entitlement import PoolUsage
from peloton.resmgr.domain.ledger import MICRO, Ledger, micro

# cpus whose float sums depend on the order they are added in
_ODD_CPU = {0.5: 0.1, 1.0: 0.7, 2.0: 0.3}


def from_scratch_usage(
    rm: ResourceManager, going_at: int | None = None
) -> tuple[dict[str, PoolUsage], dict[str, PoolAllocation]]:
    """The old `usage()`: a walk over every active run, in integer micro-units."""
    demand: dict[str, list[list[int]]] = {}
    holders: dict[str, int] = defaultdict(int)
    for entry in rm.ledger.tasks.values():
        if not (entry.pending or entry.holding):
            continue
        if going_at is not None and rm._going(entry, going_at):
            continue
        holding = rm.holding(entry)
        pool = rm._pool_of(entry)
        slots = demand.setdefault(pool, [[0] * 4 for _ in range(6)])
        targets = [(1 if holding else 0) + (2 if entry.revocable else 0)]
        if holding:
            holders[pool] += 1
            targets += [4] * (not entry.job.preemptible) + [5] * entry.controller
        for t in targets:
            for i, v in enumerate(micro(entry.resources)):
                slots[t][i] += v
    usage, alloc = {}, {}
    for pool, slots in demand.items():
        r = [Resources(*(v / MICRO for v in s)) for s in slots]
        usage[pool] = PoolUsage(r[0], r[1], r[2], r[3])
        if holders[pool]:
            alloc[pool] = PoolAllocation(r[1], r[3], r[4], r[5])
    return usage, alloc


def odd(facts: list[Fact]) -> list[Fact]:
    out = []
    for part, etype, body in facts:
        if etype == "JobCreated":
            body = copy.deepcopy(body)
            res = body["default_task"]["resources"]
            res["cpu"] = _ODD_CPU[res["cpu"]]
            res["memory"] = 0.1 + res["cpu"]
        out.append((part, etype, body))
    return out


def sums_of(ledger: Ledger) -> Any:
    return [dict(s) for s in ledger.sums]


def indexes_of(ledger: Ledger) -> dict[str, set[Any]]:
    return {"pending": set(ledger.pending), "holding": set(ledger.holding),
            "unused": set(ledger.unused), "preempted": set(ledger.preempted)}


def from_scratch_indexes(ledger: Ledger) -> dict[str, set[Any]]:
    """The runs each index should hold, by every live run's own properties."""
    live = ledger.tasks.items()
    return {"pending": {k for k, e in live if e.pending},
            "holding": {k for k, e in live if e.holding},
            "unused": {k for k, e in live if e.admitted},
            "preempted": {k for k, e in live if e.preempted_at is not None}}


# ------------------------------------------------------------------- ledger


def test_totals_follow_a_run_through_its_life_and_leave_nothing_behind() -> None:
    ledger = Ledger()
    body = job_created("j", 2, cpu=0.1)
    ledger.fold("JobCreated", body)
    ledger.fold("TaskStateChanged", change("j", 0, "PENDING", previous="INITIALIZED", at=1))
    ledger.fold("TaskStateChanged", change("j", 1, "PENDING", previous="INITIALIZED", at=1))
    key = ("/default", False, True, False)
    assert ledger.sums[0] == {key: [2, 200_000, 128 * MICRO, 0, 0]} and ledger.sums[1] == {}
    ledger.fold("TasksAdmitted", tasks_admitted("j", 0, at=2))  # admitted, not READY yet
    assert ledger.sums[0] == {key: [1, 100_000, 64 * MICRO, 0, 0]} and ledger.sums[1] == {}
    assert ledger.sums[2] == {key: [1, 100_000, 64 * MICRO, 0, 0]}  # ADMITTED
    ledger.fold("TaskStateChanged", change("j", 0, "READY", at=3))
    assert ledger.sums[1] == {key: [1, 100_000, 64 * MICRO, 0, 0]} and ledger.sums[2] == {}
    ledger.fold("TaskStateChanged", change("j", 0, "SUCCEEDED", previous="RUNNING", at=4))
    ledger.fold("JobStateChanged", job_state("j", "KILLED", at=5))
    assert ledger.sums == ({}, {}, {}) and ledger.filed == {}


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(logs(), st.lists(st.integers(0, 7), max_size=40), st.booleans(),
       st.lists(st.integers(0, 60), max_size=4), st.integers(0, 60))
def test_totals_equal_a_recomputation_after_any_interleaving_redelivery_or_restore(
    facts: list[Fact], order: list[int], split_created: bool, again: list[int],
    restore_at: int,
) -> None:
    facts = odd(facts)
    expected = Ledger()
    for _, etype, body in facts:
        expected.fold(etype, body)
    assert sums_of(expected) == list(from_scratch_sums(expected))
    sent = list(facts)
    for k in again:  # redeliveries: a fact written twice in its partition (a retry)
        sent.insert(k % len(sent) + 1, sent[k % len(sent)])
    shuffled = interleavings(sent, order, split_created)
    ledger = Ledger()
    for n, (_, etype, body) in enumerate(shuffled):
        if n == restore_at:
            ledger = Ledger.restore(json.loads(json.dumps(ledger.snapshot())))
        ledger.fold(etype, body)
        assert sums_of(ledger) == list(from_scratch_sums(ledger))
        assert ledger.filed == {k: usage_class(e) for k, e in ledger.tasks.items()
                                if usage_class(e) is not None}
        assert indexes_of(ledger) == from_scratch_indexes(ledger)
    assert sums_of(ledger) == sums_of(expected)


# ------------------------------------------------------------------- manager


def check_usage(rm: ResourceManager, now: int) -> None:
    assert rm.usage() == from_scratch_usage(rm)
    assert rm.usage(going_at=now) == from_scratch_usage(rm, going_at=now)


histories = st.lists(st.tuples(st.sampled_from(["submit", "submit", "pool", "tick", "tick",
                                               "publish", "publish", "discard", "progress",
                                               "progress", "progress"]),
                               st.integers(0, 255)), min_size=10, max_size=50)


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(histories, st.integers(0, 50))
def test_usage_equals_the_walk_over_every_active_run(history: list[Op], restore_at: int) -> None:
    driver = Driver(new_core())
    m = driver.core.manager
    m.preemption_enabled = True
    m.unused_admission_ms = 500  # some admissions are no longer trusted
    for n, op in enumerate(history):
        if n == restore_at:
            data = json.loads(json.dumps(driver.core.snapshot()))
            driver.core.restore(data)
            m = driver.core.manager
        driver.apply(op)
        check_usage(m, driver.now)
        if op[0] == "tick":  # the decisions of the tick come back as preemptions too
            for ev in driver.unpublished:
                if ev.type == "TasksAdmitted" and op[1] % 3 == 0:
                    m.fold("TasksPreempted", {**ev.body, "tasks": [
                        {**t, "reason": "r", "detail": ""} for t in ev.body["tasks"]]})
            check_usage(m, driver.now)
            check_usage(m, driver.now + 40_000)  # preemption acks timed out


def test_usage_sums_are_exact_whatever_the_order() -> None:
    """0.1 + 0.7 + 0.3 differs by float order; the micro-unit totals do not."""
    results = []
    for jobs in (["a", "b", "c"], ["c", "a", "b"], ["b", "c", "a"]):
        rm = ResourceManager()
        for job_id in jobs:
            cpu = {"a": 0.1, "b": 0.7, "c": 0.3}[job_id]
            rm.fold("JobCreated", job_created(job_id, 1, cpu=cpu))
            rm.fold("TaskStateChanged", task_state_changed(job_id, (0, "RUNNING"),
                                                           previous="READY"))
        results.append(rm.usage())
    assert results[0] == results[1] == results[2]
    assert results[0][1]["/default"].nonslack.cpu == 1.1
