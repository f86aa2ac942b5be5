"""The resource manager's cycle: entitlement, then admission (pure).

Contract of `ResourceManager.tick(now_ms)` (only the leader calls it):
1. Entitlement is recomputed every `entitlement_cycle_ms`, and sooner (at most every
   `min_recompute_ms`) when demand, allocation or capacity changed, so new work does not
   wait a whole cycle. EntitlementUpdated is published every cycle and whenever the
   result changed.
2. Admission runs when anything changed since the last run: each leaf pool's pending
   gangs are admitted within its entitlement (peloton.resmgr.domain.admission). Admitted
   tasks are marked in the ledger at once (so the next tick does not admit them again)
   and published as TasksAdmitted, one batch per pool; tasks left pending get their
   reason, published as AdmissionDeferred only when it changed.
The reservation check for non-preemptible work applies only when preemption is enabled,
as in Peloton (without preemption, elastic resources lent to such work could never be
taken back, so admitting it beyond the reservation is the lesser harm).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from peloton.model.event import Event
from peloton.model.resources import Resources
from peloton.resmgr.domain.admission import (
    AdmissionState,
    Gang,
    PoolAllocation,
    admission_views,
    admit,
)
from peloton.resmgr.domain.entitlement import PoolEntitlement, PoolUsage, compute_entitlements
from peloton.resmgr.domain.ledger import Ledger, TaskEntry
from peloton.resmgr.domain.pooltree import ROOT, PoolTree, ensure_default_pool

__all__ = ["ResourceManager"]

_MAX_BATCH = 4000


class ResourceManager:
    def __init__(
        self,
        entitlement_cycle_ms: int = 10_000,
        min_recompute_ms: int = 200,
        preemption_enabled: bool = False,
    ) -> None:
        self.ledger = Ledger()
        tree = ensure_default_pool(PoolTree.empty())
        assert isinstance(tree, PoolTree)
        self.tree: PoolTree = tree
        self.entitlement_cycle_ms = entitlement_cycle_ms
        self.min_recompute_ms = min_recompute_ms
        self.preemption_enabled = preemption_enabled
        self.entitlements: dict[str, PoolEntitlement] = {}
        self.admission = AdmissionState()
        self.cycle = 0
        self._computed_at = -(10**15)
        self._published_at = -(10**15)
        self._computed_version = -1
        self._admitted_version = -1
        self._reasons: dict[str, str] = {}

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        self.ledger.fold(etype, body)

    # ---- cycle ----------------------------------------------------------------------
    def tick(self, now_ms: int) -> list[Event]:
        events: list[Event] = []
        due = now_ms - self._computed_at >= self.entitlement_cycle_ms
        changed = self.ledger.version != self._computed_version
        if due or (changed and now_ms - self._computed_at >= self.min_recompute_ms):
            events += self._entitlement(now_ms, publish=due)
        if self.ledger.version != self._admitted_version or events:
            events += self._admit(now_ms)
            self._admitted_version = self.ledger.version
        return events

    def _pool_of(self, entry: TaskEntry) -> str:
        resolved = self.tree.resolve(entry.job.pool)
        return resolved if resolved is not None else entry.job.pool

    def usage(self) -> tuple[dict[str, PoolUsage], dict[str, PoolAllocation]]:
        demand: dict[str, list[Resources]] = defaultdict(lambda: [Resources()] * 4)
        alloc: dict[str, PoolAllocation] = defaultdict(PoolAllocation)
        for entry in self.ledger.active():
            pool = self._pool_of(entry)
            slot = demand[pool]
            idx = (0 if entry.pending else 1) + (2 if entry.job.revocable else 0)
            slot[idx] = slot[idx] + entry.resources
            if entry.holding:
                alloc[pool] = alloc[pool].plus(_gang_of_one(entry, pool))
        usage = {p: PoolUsage(d[0], d[1], d[2], d[3]) for p, d in demand.items()}
        return usage, dict(alloc)

    def _entitlement(self, now_ms: int, publish: bool) -> list[Event]:
        usage, _ = self.usage()
        capacity = self.ledger.capacity()
        ents = compute_entitlements(self.tree, capacity, usage)
        changed = ents != self.entitlements
        self.entitlements = ents
        self._computed_at = now_ms
        self._computed_version = self.ledger.version
        if not (publish or changed) or (not publish and now_ms - self._published_at < 1000):
            return []
        self.cycle += 1
        self._published_at = now_ms
        return [
            Event(
                "EntitlementUpdated",
                "cluster",
                {
                    "at": now_ms,
                    "cycle": self.cycle,
                    "capacity": capacity.as_dict(),
                    "pools": self._pool_rows(usage),
                },
            )
        ]

    def _pool_rows(self, usage: dict[str, PoolUsage]) -> list[dict[str, Any]]:
        rows = []
        totals: dict[str, tuple[Resources, Resources]] = {}
        for path in reversed(self.tree.preorder):
            kids = self.tree.children(path)
            if kids:
                demand = sum((totals[k][0] for k in kids), Resources())
                alloc = sum((totals[k][1] for k in kids), Resources())
            else:
                u = usage.get(path, PoolUsage())
                demand = u.demand + u.slack_demand
                alloc = u.allocation + u.slack_allocation
            totals[path] = (demand, alloc)
        for path in self.tree.preorder:
            node = self.tree.node(path)
            ent = self.entitlements.get(path)
            zero = Resources()
            rows.append(
                {
                    "pool": path,
                    "parent": node.parent,
                    "reservation": (self.tree.reservation(path) or zero).as_dict(),
                    "limit": (self.tree.limit(path) or zero).as_dict(),
                    "entitlement": (ent.entitlement if ent else zero).as_dict(),
                    "slack_entitlement": (ent.slack_entitlement if ent else zero).as_dict(),
                    "nonslack_entitlement": (ent.nonslack_entitlement if ent else zero).as_dict(),
                    "allocation": totals[path][1].as_dict(),
                    "demand": totals[path][0].as_dict(),
                }
            )
        return rows

    def _admit(self, now_ms: int) -> list[Event]:
        _, allocations = self.usage()
        views = admission_views(self.tree, self.entitlements, allocations)
        queues, members = self._queues()
        result = admit(views, queues, self.admission)
        self.admission = result.state
        admitted: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for gang in result.admitted:
            for entry in members[gang.gang_id]:
                self.ledger.mark_admitted(entry.job.job_id, entry.instance, entry.run)
                admitted[gang.pool].append(
                    {"job_id": entry.job.job_id, "instance": entry.instance, "run": entry.run}
                )
        events = [
            Event("TasksAdmitted", pool, {"at": now_ms, "pool": pool, "tasks": chunk})
            for pool in sorted(admitted)
            for chunk in _chunks(admitted[pool])
        ]
        return events + self._deferred(now_ms, result.pending_reasons, members, queues)

    def _queues(self) -> tuple[dict[str, list[Gang]], dict[str, list[TaskEntry]]]:
        members: dict[str, list[TaskEntry]] = defaultdict(list)
        for entry in self.ledger.active():
            if entry.pending:
                job = entry.job
                in_gang = job.gang_size > 1 and entry.instance < job.gang_size
                gid = f"{job.job_id}/gang" if in_gang else entry.task_id
                members[gid].append(entry)
        queues: dict[str, list[Gang]] = defaultdict(list)
        for gid in sorted(members):
            entries = members[gid]
            first = entries[0]
            job = first.job
            pool = self._pool_of(first)
            queues[pool].append(
                Gang(
                    gang_id=gid,
                    task_ids=tuple(e.task_id for e in entries),
                    pool=pool,
                    priority=job.priority,
                    seq=job.seq * 1_000_000 + first.instance,
                    resources=sum((e.resources for e in entries), Resources()),
                    preemptible=job.preemptible or not self.preemption_enabled,
                    revocable=job.revocable,
                    min_members=job.gang_size if gid.endswith("/gang") else 1,
                )
            )
        return dict(queues), dict(members)

    def _deferred(
        self,
        now_ms: int,
        reasons: dict[str, str],
        members: dict[str, list[TaskEntry]],
        queues: dict[str, list[Gang]],
    ) -> list[Event]:
        by_pool: dict[str, list[dict[str, Any]]] = defaultdict(list)
        pool_of_gang = {g.gang_id: pool for pool, gangs in queues.items() for g in gangs}
        for gid in sorted(reasons):
            for entry in members.get(gid, []):
                key = f"{entry.task_id}-{entry.run}"
                if self._reasons.get(key) != reasons[gid]:
                    self._reasons[key] = reasons[gid]
                    by_pool[pool_of_gang[gid]].append(
                        {
                            "job_id": entry.job.job_id,
                            "instance": entry.instance,
                            "run": entry.run,
                            "reason": reasons[gid],
                        }
                    )
        return [
            Event("AdmissionDeferred", pool, {"at": now_ms, "pool": pool, "tasks": chunk})
            for pool in sorted(by_pool)
            for chunk in _chunks(by_pool[pool])
        ]

    def root_entitlement(self) -> Resources:
        ent = self.entitlements.get(ROOT)
        return ent.entitlement if ent else Resources()


def _gang_of_one(entry: TaskEntry, pool: str) -> Gang:
    return Gang(
        entry.task_id,
        (entry.task_id,),
        pool,
        entry.job.priority,
        0,
        entry.resources,
        preemptible=entry.job.preemptible,
        revocable=entry.job.revocable,
    )


def _chunks(items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [items[i : i + _MAX_BATCH] for i in range(0, len(items), _MAX_BATCH)]
