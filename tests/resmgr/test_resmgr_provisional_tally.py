"""The provisional admissions that count as held are kept as they change
(`resmgr/domain/provisionaltally.py`), not found by visiting every one each tick.

Property: over random histories of the core (submissions, ticks, some decisions folded
back, discarded ticks, runs made READY, requeued, failed into a new run, or ended,
confirmations that never come and expire, restores from a JSON snapshot), after every
step the tally equals one rebuilt from scratch, `usage()` equals the walk over every
active run, and `_pending()` yields what the per-run version yields. Example: a tick
after a burst re-decides only the runs that changed since the last one.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import hypothesis.strategies as st
from event_bodies import job_created, offer, offer_received, task_state_changed
from hypothesis import HealthCheck, given, settings
from test_resmgr_burst_usage import reference_pending
from test_resmgr_usage import from_scratch_usage

from peloton.resmgr.domain import provisionaltally
from peloton.resmgr.domain.cycle import ResourceManager
from peloton.resmgr.domain.provisionaltally import ProvisionalTally

Op = tuple[str, int]


def new_rm() -> ResourceManager:
    rm = ResourceManager(entitlement_cycle_ms=10_000, min_recompute_ms=0,
                         confirm_timeout_ms=1_500)
    rm.fold("OfferReceived", offer_received(offer("h0", cpu=6.0, mem=100_000)))
    return rm


class Log:
    """Applies ops to a resource manager; each op's choices depend only on its state."""

    def __init__(self) -> None:
        self.rm = new_rm()
        self.now = 1_000
        self.jobs = 0
        self.decided: list[tuple[str, dict[str, Any]]] = []

    def apply(self, op: Op) -> None:
        kind, arg = op
        rm = self.rm
        if kind == "submit":
            job_id, n = f"j{self.jobs}", 1 + arg % 4
            self.jobs += 1
            rm.fold("JobCreated", job_created(job_id, n, cpu=0.5 + arg % 3, at=self.now))
            rm.fold("TaskStateChanged", task_state_changed(
                job_id, *((i, "PENDING") for i in range(n)), previous="INITIALIZED",
                at=self.now))
        elif kind == "tick":
            self.now += 100 * (1 + arg % 8)
            self.decided += [(e.type, e.body) for e in rm.tick(self.now)]
        elif kind == "confirm":  # some decisions come back, the others may never
            keep = []
            for i, fact in enumerate(self.decided):
                if (arg >> (i % 8)) & 1:
                    rm.fold(*fact)
                elif arg % 3:
                    keep.append(fact)
            self.decided = keep
        elif kind == "discard":
            rm.discard_unpublished()
        elif kind == "restore":
            rm.restore(json.loads(json.dumps(rm.snapshot())))
        else:
            self._move(kind, arg)

    def _move(self, kind: str, arg: int) -> None:
        """The job manager moves one run: READY, back to PENDING (a requeue), failed
        into a new PENDING run, or ended."""
        rm = self.rm
        runs = sorted(rm.ledger.tasks.items())
        if not runs:
            return
        (job_id, instance), entry = runs[arg % len(runs)]
        state, run = entry.state.value, entry.run
        self.now += 1
        if kind == "ready" and rm.admitted(entry):
            change = task_state_changed(job_id, (instance, "READY"), run=run,
                                        previous=state, at=self.now)
        elif kind == "requeue" and state == "READY":
            change = task_state_changed(job_id, (instance, "PENDING"), run=run,
                                        previous="READY", at=self.now)
        elif kind == "retry":
            change = task_state_changed(job_id, (instance, "PENDING"), run=run + 1,
                                        previous="INITIALIZED", at=self.now)
        elif kind == "end":
            change = task_state_changed(job_id, (instance, "SUCCEEDED"), run=run,
                                        previous=state, at=self.now)
        else:
            return
        rm.fold("TaskStateChanged", change)


def from_scratch(rm: ResourceManager) -> ProvisionalTally:
    tally = ProvisionalTally()
    tally.rebuild(copy.deepcopy(rm.ledger), rm.provisional.admitted)  # hooks into the copy
    return tally


def check(rm: ResourceManager, now: int) -> None:
    rm._tally.refresh(rm.provisional.admitted)
    mine = (dict(rm._tally.counted), {b: list(c) for b, c in rm._tally.cells.items()},
            dict(rm._tally.watched))
    fresh = from_scratch(rm)
    assert mine == (fresh.counted, fresh.cells, fresh.watched)
    rm._now = now
    assert rm.usage() == from_scratch_usage(rm)
    # the same runs (`_pending` promises no order: `_queues` orders what it builds)
    assert sorted(e.key for e in rm._pending()) == [e.key for e in reference_pending(rm)]


histories = st.lists(st.tuples(st.sampled_from(
    ["submit", "submit", "tick", "tick", "tick", "confirm", "confirm", "discard", "restore",
     "ready", "ready", "requeue", "requeue", "retry", "end"]), st.integers(0, 255)),
    min_size=20, max_size=60)


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(histories)
def test_the_tally_equals_a_recount_after_every_step(history: list[Op]) -> None:
    log = Log()
    for op in history:
        log.apply(op)
        check(log.rm, log.now)


def test_a_tick_after_a_burst_settles_only_what_changed(monkeypatch: Any) -> None:
    log = Log()
    log.rm.fold("OfferReceived", offer_received(offer("h1", cpu=4_000.0, mem=10**8)))
    for k in range(300):
        log.apply(("submit", k))
    log.apply(("tick", 0))  # admits every run of the burst; none comes back yet
    assert len(log.rm.provisional.admitted) > 700
    log.rm._tally.refresh(log.rm.provisional.admitted)
    settled: list[Any] = []
    real = ProvisionalTally._settle

    def counting(self: ProvisionalTally, task: Any, admissions: Any) -> None:
        settled.append(task)
        real(self, task, admissions)

    monkeypatch.setattr(provisionaltally.ProvisionalTally, "_settle", counting)
    log.apply(("submit", 2))  # three new runs
    log.apply(("tick", 0))  # admits them (and visits none of the burst's)
    log.rm._tally.refresh(log.rm.provisional.admitted)  # as the next tick does first
    assert len(settled) == 3 and {t[0] for t in settled} == {"j300"}
    check(log.rm, log.now)
