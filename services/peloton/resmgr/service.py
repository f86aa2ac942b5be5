"""The resource manager service: the ResourceManager core inside the common service shell.

Every instance folds the whole log (a hot standby); only the etcd leader ticks and
publishes. A new leader therefore starts from the state the log describes: the pool tree
from respool-events (its own facts), tasks and capacity from the job manager's and host
manager's facts, admissions and preemptions from its own earlier decisions.

Pool requests (respool-requested) are decided by every instance as they arrive (only the
leader's answers are published); they are not replayed: a request already answered in
the log is skipped when it is consumed again.

Decide, publish, then commit: the core's decisions stay provisional until they come back
through the log (see peloton.resmgr.domain.cycle); when publishing a tick's events
fails (or the tick raised) the shell calls `discard_unpublished()`, which puts back
everything the tick changed. Snapshots (`snapshot`/`restore`, `snapshot_version`) carry
the whole core state as plain data.

Metrics (this shell, not the pure core, records them; see peloton.bus.metrics): when a
tick published an entitlement cycle, its duration, the pools' entitlement and allocation
(from the EntitlementUpdated rows) and the pending runs by pool and reason class.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from peloton.bus.metrics import (
    RESMGR_CYCLE_SECONDS,
    reason_class,
    record_entitlement,
    record_pending,
)
from peloton.bus.routing import partition_of
from peloton.model.event import Event
from peloton.resmgr.domain.cycle import ResourceManager

__all__ = ["ResourceManagerCore"]


class ResourceManagerCore:
    #: 2: the tick's undo record replaced the decision batch; ledger rows carry
    #: requeued_at and reason_at. 3: ledger rows carry the run's pinned_host. 4: ledger
    #: rows carry the run's config_version, jobs their later spec versions.
    snapshot_version: int = 4
    inputs: tuple[str, ...] = ("job-events", "tasks-admitted", "offer-received",
                               "respool-events", "respool-requested")
    replay: tuple[str, ...] = ("job-events", "tasks-admitted", "offer-received",
                               "respool-events")

    def __init__(
        self,
        entitlement_cycle_s: float = 10.0,
        preemption_cycles: int = 3,
        tick_interval: float = 0.1,
        preemption: bool = True,
        in_pool_preemption: bool = True,
    ) -> None:
        self.manager = ResourceManager(
            int(entitlement_cycle_s * 1000), preemption_enabled=preemption,
            preemption_cycles=preemption_cycles, in_pool_preemption=in_pool_preemption,
            shard_of_job=partition_of("tasks-admitted"))
        self.preemption_cycles = preemption_cycles
        self.tick_interval: float | None = tick_interval

    def partitions_known(self, counts: Mapping[str, int]) -> None:
        """The broker's partition counts of our inputs (the shell, at each rebuild): the
        admissions put in one record only jobs of one partition of tasks-admitted as the
        broker has it (where the records land), which is the catalog's unless the topic was
        created with another (`peloton.bus.brokercounts`)."""
        count = counts.get("tasks-admitted")
        if count is not None:
            self.manager.shard_of_job = partition_of("tasks-admitted", count)

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        self.manager.fold(etype, body)

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        return self.manager.handle(etype, body, now)

    def tick_wanted(self) -> bool:
        return self.manager.tick_wanted()

    def tick(self, now: int) -> list[Event]:
        cycle, started = self.manager.cycle, time.perf_counter()
        events = self.manager.tick(now)
        if self.manager.cycle != cycle:  # an entitlement cycle was decided
            self._record_cycle(time.perf_counter() - started, events)
        return events

    def _record_cycle(self, seconds: float, events: list[Event]) -> None:
        RESMGR_CYCLE_SECONDS.observe(seconds)
        for ev in events:
            if ev.type == "EntitlementUpdated":
                record_entitlement(ev.body["pools"])
        m = self.manager
        pending: Counter[tuple[str, str]] = Counter()
        for entry in m.ledger.pending.values():
            if m.pending(entry):
                pool = m.tree.resolve(entry.job.pool) or entry.job.pool
                pending[(pool, reason_class(m.reason(entry)))] += 1
        record_pending("resmgr", pending)

    def after_replay(self, now: int) -> list[Event]:
        return []

    def discard_unpublished(self) -> None:
        """Publishing the last tick's events failed: forget that tick's decisions."""
        self.manager.discard_unpublished()

    def snapshot(self) -> dict[str, Any]:
        return {"version": self.snapshot_version, "manager": self.manager.snapshot()}

    def restore(self, state: dict[str, Any]) -> None:
        """Replace the core's state; ValueError/KeyError/TypeError on unreadable data (the
        core is then unchanged)."""
        if not isinstance(state, dict):
            raise TypeError(f"resmgr snapshot: a mapping, got {type(state).__name__}")
        if state.get("version") != self.snapshot_version:
            raise ValueError(f"resmgr snapshot version {state.get('version')!r}, "
                             f"this core reads {self.snapshot_version}")
        self.manager.restore(state["manager"])
