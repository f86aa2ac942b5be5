"""Snapshots of the resource manager core: `restore(snapshot())` behaves as the original.

Property: over random histories (jobs, pools, ticks, decisions folded back or lost,
discarded publishes, task progress, finished jobs), a core restored at any point from a
JSON round trip of `snapshot()` decides exactly what the original decides from then on
and ends in the same state. Examples: unreadable or older snapshots raise, leaving the
core unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
import pytest
from event_bodies import (
    job_created,
    offer,
    offer_received,
    task_state_changed,
)
from hypothesis import HealthCheck, given, settings

from peloton.model.event import Event
from peloton.resmgr.service import ResourceManagerCore

Op = tuple[str, int]
_NEXT = {"READY": "RUNNING", "RUNNING": "SUCCEEDED"}


def pool_config(name: str, cpu: float) -> dict[str, Any]:
    return {"name": name, "description": "", "resources": [
        {"kind": k, "reservation": cpu if k == "cpu" else 0.0,
         "limit": 1e6, "share": 1.0, "type": "ELASTIC"}
        for k in ("cpu", "memory", "disk", "gpu")],
        "slack_limit_percent": 0.0, "controller_limit_percent": 0.0}


def new_core() -> ResourceManagerCore:
    core = ResourceManagerCore(1.0, preemption_cycles=2)
    core.manager.min_recompute_ms = 0
    core.manager.confirm_timeout_ms = 800
    core.fold("OfferReceived", offer_received(offer("h0", cpu=6, mem=100_000),
                                              offer("h1", cpu=6, mem=100_000)))
    return core


class Driver:
    """Applies ops to a core; the ops' choices depend only on the core's state."""

    def __init__(self, core: ResourceManagerCore) -> None:
        self.core = core
        self.now = 0
        self.jobs = 0
        self.unpublished: list[Event] = []
        self.out: list[tuple[str, str, Any]] = []

    def state(self) -> dict[str, Any]:
        return {"core": self.core.snapshot(), "now": self.now, "jobs": self.jobs,
                "unpublished": [(e.type, e.key, e.body) for e in self.unpublished]}

    def apply(self, op: Op) -> None:
        kind, arg = op
        core, m = self.core, self.core.manager
        if kind == "submit":
            job_id = f"j{self.jobs}"
            self.jobs += 1
            pool = ["/default", "/A", "/B"][arg % 3]
            core.fold("JobCreated", job_created(job_id, 1 + arg % 4, at=self.now,
                                                cpu=1.0 + arg % 3, respool=pool,
                                                priority=arg % 2, min_running=1 + arg % 2))
            core.fold("TaskStateChanged", task_state_changed(
                job_id, *((i, "PENDING") for i in range(1 + arg % 4)),
                previous="INITIALIZED", at=self.now))
        elif kind == "pool":
            name = "AB"[arg % 2]
            self.unpublished += core.handle("ResourcePoolCreateRequested", {
                "request_id": f"r{arg}", "at": self.now, "path": f"/{name}",
                "config": pool_config(name, 1.0 + arg % 4)}, self.now)
        elif kind == "tick":
            self.now += 100 * (1 + arg % 5)
            out = core.tick(self.now)
            self.out += [(e.type, e.key, e.body) for e in out]
            self.unpublished += out
        elif kind == "publish":  # some of the events come back through the log
            keep = []
            for i, ev in enumerate(self.unpublished):
                if (arg >> (i % 8)) & 1:
                    core.fold(ev.type, ev.body)
                else:
                    keep.append(ev)
            self.unpublished = keep
        elif kind == "discard":
            core.discard_unpublished()
        elif kind == "progress":  # the job manager moves one run on
            entries = [(k, e) for k, e in sorted(m.ledger.tasks.items())
                       if m.admitted(e) or e.state in _NEXT]
            if not entries:
                return
            (job_id, instance), entry = entries[arg % len(entries)]
            state = "READY" if m.admitted(entry) else _NEXT[entry.state]
            self.now += 1
            core.fold("TaskStateChanged", task_state_changed(
                job_id, (instance, state), run=entry.run, previous=entry.state.value,
                at=self.now))
            if state == "SUCCEEDED" and not any(j == job_id for j, _ in m.ledger.tasks):
                core.fold("JobStateChanged", {"job_id": job_id, "at": self.now,
                                              "state": "SUCCEEDED", "previous_state":
                                              "RUNNING", "task_counts": {}})


ops = st.lists(st.tuples(st.sampled_from(["submit", "pool", "tick", "tick", "publish",
                                          "publish", "discard", "progress", "progress",
                                          "progress"]), st.integers(0, 255)),
               min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(ops, ops)
def test_a_restored_core_behaves_exactly_as_the_original(before: list[Op],
                                                         after: list[Op]) -> None:
    original = Driver(new_core())
    for op in before:
        original.apply(op)
    data = json.loads(json.dumps(original.core.snapshot()))
    restored_core = ResourceManagerCore(1.0, preemption_cycles=2)
    restored_core.manager.min_recompute_ms = 0
    restored_core.manager.confirm_timeout_ms = 800
    restored_core.restore(data)
    restored = Driver(restored_core)
    restored.now, restored.jobs = original.now, original.jobs
    restored.unpublished = list(original.unpublished)
    assert json.loads(json.dumps(restored_core.snapshot())) == data
    original.out = []
    for op in after:
        original.apply(op)
        restored.apply(op)
    assert restored.out == original.out
    assert restored.state() == original.state()


def test_unreadable_or_older_snapshots_raise_and_leave_the_core_unchanged() -> None:
    core = new_core()
    d = Driver(core)
    for op in [("submit", 5), ("tick", 0), ("publish", 255), ("progress", 0)]:
        d.apply(op)
    good = core.snapshot()
    v, m = core.snapshot_version, good["manager"]
    ledger, decisions = m["ledger"], m["decisions"]
    row = ledger["tasks"][0]
    bad_manager = [
        {}, {**m, "ledger": {"jobs": 3}}, {**m, "ledger": {**ledger, "tasks": [row[:-1]]}},
        {**m, "ledger": {**ledger, "tasks": [[*row[:3], "NOT_A_STATE", *row[4:]]]}},
        {**m, "ledger": {**ledger, "jobs": [{"job_id": "x"}]}},
        {**m, "decisions": {**decisions, "cadence": decisions["cadence"][:5]}},
        {**m, "decisions": {**decisions, "entitlements": [["/", {"bogons": 1}]]}},
        {**m, "undo": {"cadence": []}}, {**m, "pools": None},
    ]
    for bad in [{}, {"version": v - 1, "manager": m}, [], {"version": v, "manager": None},
                *({"version": v, "manager": b} for b in bad_manager)]:
        with pytest.raises((ValueError, KeyError, TypeError)):
            core.restore(bad)  # type: ignore[arg-type]
        assert core.snapshot() == good


def test_the_snapshot_of_a_finished_history_is_small() -> None:
    d = Driver(new_core())
    for i in range(30):
        d.apply(("submit", 3 * i))  # all in /default
        for _ in range(8):
            d.apply(("tick", 0))
            d.apply(("publish", 255))
            for k in range(4):
                d.apply(("progress", k))
    for _ in range(40):
        d.apply(("tick", 0))
        d.apply(("publish", 255))
        d.apply(("progress", 0))
    snap = d.core.snapshot()["manager"]
    assert snap["ledger"]["jobs"] == [] and snap["ledger"]["tasks"] == []
    assert len(json.dumps(snap)) < 20_000


# ------------------------------------------------- decide, publish, then commit


def log_state(core: ResourceManagerCore) -> dict[str, Any]:
    """The snapshot without `undo` (what a discard right now would put back: a tick's
    scratch, not the state of the log)."""
    snap = core.snapshot()
    return {**snap, "manager": {k: v for k, v in snap["manager"].items() if k != "undo"}}


def twin(driver: Driver) -> Driver:
    """A second core in exactly the state of `driver`'s (through a JSON snapshot)."""
    core = ResourceManagerCore(1.0, preemption_cycles=2)
    core.manager.min_recompute_ms = 0
    core.manager.confirm_timeout_ms = 800
    core.restore(json.loads(json.dumps(driver.core.snapshot())))
    other = Driver(core)
    other.now, other.jobs = driver.now, driver.jobs
    return other


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.integers(0, 2_000))
def test_a_discarded_tick_leaves_the_core_as_if_it_never_ticked(before: list[Op],
                                                                 step: int) -> None:
    """Decide, then discard (the publish failed): the core equals one that never decided,
    and deciding again at the same time gives the same events."""
    d = Driver(new_core())
    for op in before:
        d.apply(op)
    never = twin(d)
    now = d.now + step
    first = d.core.tick(now)
    d.core.discard_unpublished()
    assert log_state(d.core) == log_state(never.core)
    again = d.core.tick(now)
    assert again == first == never.core.tick(now)
    assert log_state(d.core) == log_state(never.core)


def test_a_tick_that_raises_half_way_is_discarded_whole(monkeypatch: Any) -> None:
    """Entitlement and preemption ran, admission raised: discarding puts everything back."""
    d = Driver(new_core())
    for op in [("submit", 7), ("submit", 2), ("tick", 0), ("publish", 255), ("submit", 5)]:
        d.apply(op)
    never = twin(d)
    m = d.core.manager

    def broken(now_ms: int) -> list[Event]:
        raise RuntimeError("admission bug")

    monkeypatch.setattr(m, "_admit", broken)
    with pytest.raises(RuntimeError):
        d.core.tick(d.now + 10_000)  # a whole cycle later: entitlement is recomputed
    assert log_state(d.core) != log_state(never.core)
    d.core.discard_unpublished()
    assert log_state(d.core) == log_state(never.core)
    monkeypatch.undo()
    assert d.core.tick(d.now + 10_000) == never.core.tick(d.now + 10_000)


def test_a_discard_after_a_published_tick_and_a_fold_changes_nothing() -> None:
    """Only the last call is discarded: a tick whose events were published and folded
    back is not undone by a later failure (e.g. a pool request's answer not published)."""
    d = Driver(new_core())
    d.apply(("submit", 1))
    d.apply(("tick", 0))
    d.apply(("publish", 255))
    d.apply(("pool", 1))  # decided; its answer is not published
    kept = d.core.snapshot()
    d.core.discard_unpublished()
    assert d.core.snapshot() == kept
