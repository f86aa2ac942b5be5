"""The resource manager's per-tick views stay linear in a burst and decide as before.

`usage()` moves the runs it sees differently from the ledger (unused admissions, its own
provisional ones, runs being taken back) in groups of alike runs, and `_pending()` skips
the admissions it still trusts without sorting them. Property: on random mixes of
pending, admitted (trusted and lapsed), provisionally admitted, running and preempted
runs, both give exactly what the straightforward per-run versions (kept here as the
reference) give.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import hypothesis.strategies as st
from event_bodies import (
    job_created,
    offer,
    offer_received,
    task_state_changed,
    tasks_admitted,
    tasks_preempted,
)
from hypothesis import given, settings

from peloton.resmgr.domain.admissionages import AdmissionAges
from peloton.resmgr.domain.cycle import ResourceManager
from peloton.resmgr.domain.ledger import ADMITTED, HELD, PENDING, Cell, TaskEntry, bucket, micro
from peloton.resmgr.domain.provisionaltally import ProvisionalTally

UNUSED_MS = 1_000


def reference_usage(rm: ResourceManager, going_at: int | None) -> Any:
    """usage() as it was: one run at a time, every unused admission visited (the ledger
    counted them in no class, ADMITTED here)."""
    ledger = rm.ledger
    cells: dict[Any, Cell] = {(cls, b): list(cell) for cls in (PENDING, HELD)
                              for b, cell in ledger.sums[cls].items()}
    special: dict[Any, TaskEntry] = dict(ledger.unused)
    for job_id, instance, _ in rm.provisional.admitted:
        entry = ledger.entry(job_id, instance)
        if entry is not None:
            special[entry.key] = entry
    if going_at is not None:
        special.update(ledger.preempted)
        for job_id, instance, _ in rm.provisional.preempted:
            entry = ledger.entry(job_id, instance)
            if entry is not None:
                special[entry.key] = entry
    for key, entry in special.items():
        was = ledger.filed.get(key)
        if was == ADMITTED:  # the old ledger counted unused admissions in no class
            was = None
        now = None
        if ((key in ledger.pending or key in ledger.holding)
                and not (going_at is not None and rm._going(entry, going_at))):
            now = HELD if rm.holding(entry) else PENDING
        if was == now:
            continue
        vec, b = micro(entry.resources), bucket(entry)
        if was is not None:
            cell = cells[(was, b)]
            cell[0] -= 1
            for i in range(4):
                cell[i + 1] -= vec[i]
        if now is not None:
            cell = cells.setdefault((now, b), [0, 0, 0, 0, 0])
            cell[0] += 1
            for i in range(4):
                cell[i + 1] += vec[i]
    return {k: v for k, v in cells.items() if v[0]}


def reference_pending(rm: ResourceManager) -> Iterator[TaskEntry]:
    pending, unused = rm.ledger.pending, rm.ledger.unused
    for key in sorted(pending.keys() | unused.keys()):
        entry = pending.get(key) or unused[key]
        if entry.config_version is not None and not rm.admitted(entry):
            yield entry


run_kind = st.sampled_from(["pending", "admitted-old", "admitted-new", "provisional",
                            "running", "preempted-running", "preempted-pending"])


@settings(max_examples=60, deadline=None)
@given(jobs=st.lists(st.tuples(st.integers(1, 5), st.sampled_from([0.1, 0.25, 1.0]),
                               st.lists(run_kind, min_size=5, max_size=5)),
                     min_size=1, max_size=6),
       going=st.booleans())
def test_usage_and_pending_equal_the_per_run_versions(
        jobs: list[tuple[int, float, list[str]]], going: bool) -> None:
    rm = ResourceManager(entitlement_cycle_ms=10_000, min_recompute_ms=0,
                         unused_admission_ms=UNUSED_MS)
    rm.fold("OfferReceived", offer_received(offer("h0", cpu=4.0, mem=100_000)))
    now = 5_000
    for j, (n, cpu, kinds) in enumerate(jobs):
        job_id = f"job-{j}"
        rm.fold("JobCreated", job_created(job_id, n, cpu=cpu, at=j))
        rm.fold("TaskStateChanged", task_state_changed(
            job_id, *((i, "PENDING") for i in range(n)), previous="INITIALIZED", at=10))
        for i in range(n):
            kind = kinds[i]
            if kind.startswith("admitted"):
                at = 100 if kind == "admitted-old" else now - 10
                rm.fold("TasksAdmitted", tasks_admitted(job_id, i, at=at))
            elif kind.endswith("running"):
                rm.fold("TasksAdmitted", tasks_admitted(job_id, i, at=20))
                rm.fold("TaskStateChanged", task_state_changed(job_id, (i, "RUNNING"),
                                                               previous="LAUNCHED", at=30))
            if kind.startswith("preempted"):
                rm.fold("TasksPreempted", tasks_preempted(job_id, i, at=40))
    rm.tick(now)  # decides the pending runs: provisional admissions, never folded back
    rm._now = now
    going_at = now if going else None
    usage, alloc = rm.usage(going_at)
    ref_cells = reference_usage(rm, going_at)
    # the same totals per pool as the reference cells give
    ref_usage, ref_alloc = _summarise(rm, ref_cells)
    assert usage == ref_usage and alloc == ref_alloc
    # the same runs (`_pending` promises no order: `_queues` orders what it builds)
    assert sorted(e.key for e in rm._pending()) == [e.key for e in reference_pending(rm)]


def _summarise(rm: ResourceManager, cells: dict[Any, Cell]) -> Any:
    """The per-pool part of usage() applied to the reference cells (unchanged code)."""
    ledger = rm.ledger
    saved = (ledger.sums, ledger.unused, ledger.admission_ages, ledger.preempted,
             rm.provisional.admitted, rm._tally)
    ledger.sums = {PENDING: {}, HELD: {}, ADMITTED: {}}
    for (cls, b), cell in cells.items():
        ledger.sums[cls][b] = cell
    ledger.unused, ledger.admission_ages = {}, AdmissionAges()
    ledger.preempted, rm.provisional.admitted = {}, {}
    rm._tally = ProvisionalTally()  # counts nothing
    try:
        return rm.usage()
    finally:
        (ledger.sums, ledger.unused, ledger.admission_ages, ledger.preempted,
         rm.provisional.admitted, rm._tally) = saved
