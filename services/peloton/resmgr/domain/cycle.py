"""The resource manager's cycle: pools, entitlement, preemption, then admission (pure).

Contract of `ResourceManager.tick(now_ms)` (only the leader calls it):
0. Pool decisions this instance made that have not come back through the log within
   `resend_pool_facts_ms` are published again (see peloton.resmgr.domain.poolbook).
1. Entitlement is recomputed every `entitlement_cycle_ms` (a *cycle*), at once when the
   pool tree or the cluster capacity changed, and otherwise at most every
   `min_recompute_ms` when demand or allocation changed, so new work does not wait a
   whole cycle. EntitlementUpdated is published every cycle, on every tree or capacity
   change (so the job manager learns new pools at once), and when the result changed.
2. Preemption (when enabled) runs once per cycle (peloton.resmgr.domain.preemption):
   between pools once a pool has been over its entitlement for `preemption_cycles`
   consecutive cycles, then within a pool for higher-priority pending gangs. Victims are
   marked in the ledger at once and published as TasksPreempted, one batch per pool. A
   run already being preempted counts as freed and is never chosen again, unless the job
   manager did not act on it within `preempt_ack_timeout_ms` (e.g. it was launching).
   Only runs the job manager can take back are candidates: READY, PLACING (re-queued)
   and LAUNCHED, STARTING, RUNNING (killed with their grace period).
3. Admission runs when anything changed since the last run: each leaf pool's pending
   gangs are admitted within its entitlement (peloton.resmgr.domain.admission). Admitted
   tasks are marked in the ledger at once (so the next tick does not admit them again)
   and published as TasksAdmitted, one batch per pool; tasks left pending get their
   reason, published as AdmissionDeferred only when it changed.
The reservation check for non-preemptible work applies only when preemption is enabled,
as in Peloton (without preemption, elastic resources lent to such work could never be
taken back, so admitting it beyond the reservation is the lesser harm).

`fold` applies facts (every instance, replay included); `handle` also decides pool
requests (every instance decides; only the leader's answers are published, and every
instance's tree follows the published facts).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
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
from peloton.resmgr.domain.poolbook import POOL_FACTS, POOL_REQUESTS, PoolBook, config_record
from peloton.resmgr.domain.pooltree import ROOT, PoolTree
from peloton.resmgr.domain.preemption import PreemptionState, TaskView, plan_preemption

__all__ = ["ResourceManager", "VICTIM_STATES"]

_MAX_BATCH = 4000
_TERMINAL = frozenset({"SUCCEEDED", "FAILED", "LOST", "KILLED"})
#: States whose runs the job manager can take back (see the module doc, step 2).
VICTIM_STATES = frozenset({"READY", "PLACING", "LAUNCHED", "STARTING", "RUNNING"})
_GOING = frozenset({"PREEMPTING", "KILLING"})


class ResourceManager:
    def __init__(
        self,
        entitlement_cycle_ms: int = 10_000,
        min_recompute_ms: int = 200,
        preemption_enabled: bool = False,
        *,
        preemption_cycles: int = 5,
        in_pool_preemption: bool = True,
        preempt_ack_timeout_ms: int = 30_000,
        resend_pool_facts_ms: int = 3_000,
    ) -> None:
        self.ledger = Ledger()
        self.pools = PoolBook()
        self.entitlement_cycle_ms = entitlement_cycle_ms
        self.min_recompute_ms = min_recompute_ms
        self.preemption_enabled = preemption_enabled
        self.preemption_cycles = max(1, preemption_cycles)
        self.in_pool_preemption = in_pool_preemption
        self.preempt_ack_timeout_ms = preempt_ack_timeout_ms
        self.resend_pool_facts_ms = resend_pool_facts_ms
        self.entitlements: dict[str, PoolEntitlement] = {}
        self.admission = AdmissionState()
        self.preemption = PreemptionState()
        self.cycle = 0
        self._computed_at = -(10**15)
        self._published_at = -(10**15)
        self._cycle_at = -(10**15)  # the last periodic cycle (recomputes do not move it)
        self._unpublished = False  # a changed result not published yet (rate limit)
        self._computed_version = -1
        self._computed_tree = -1
        self._computed_hosts = -1
        self._admitted_version = -1
        self._reasons: dict[str, str] = {}

    @property
    def tree(self) -> PoolTree:
        """The pool tree as the log describes it (speculative decisions excluded)."""
        return self.pools.tree

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        if etype in POOL_FACTS:
            self.pools.fold(etype, body)
        elif etype == "AdmissionDeferred":  # what was said, so a new leader does not repeat it
            for t in body["tasks"]:
                self._reasons[f"{t['job_id']}-{t['instance']}-{t['run']}"] = t["reason"]
        elif etype not in POOL_REQUESTS:  # requests are decided live only (`handle`)
            self.ledger.fold(etype, body)

    def handle(self, etype: str, body: dict[str, Any], now_ms: int) -> list[Event]:
        """Fold a live fact, or decide a pool request (one answering fact)."""
        if etype in POOL_REQUESTS:
            capacity = self.ledger.capacity()
            return self.pools.decide(etype, body, None if capacity.is_zero() else capacity,
                                     self.busy_pools(), now_ms)
        self.fold(etype, body)
        return []

    def busy_pools(self) -> set[str]:
        """Pools (paths) that hold tasks whose current run has not ended."""
        return {self._pool_of(e) for e in self.ledger.tasks.values()
                if e.state not in _TERMINAL}

    # ---- cycle ----------------------------------------------------------------------
    def tick(self, now_ms: int) -> list[Event]:
        events: list[Event] = self.pools.unconfirmed(now_ms, self.resend_pool_facts_ms)
        due = now_ms - self._cycle_at >= self.entitlement_cycle_ms
        reshaped = (self.pools.version != self._computed_tree
                    or self.ledger.hosts_version != self._computed_hosts)
        changed = self.ledger.version != self._computed_version
        computed: list[Event] = []
        catch_up = self._unpublished and now_ms - self._published_at >= 1000
        if (due or reshaped or catch_up
                or (changed and now_ms - self._computed_at >= self.min_recompute_ms)):
            computed += self._entitlement(now_ms, publish=due or reshaped)
            if due:
                self._cycle_at = now_ms
                computed += self._preempt(now_ms)
        events += computed
        if self.ledger.version != self._admitted_version or computed:
            events += self._admit(now_ms)
            self._admitted_version = self.ledger.version
        return events

    def _pool_of(self, entry: TaskEntry) -> str:
        resolved = self.tree.resolve(entry.job.pool)
        return resolved if resolved is not None else entry.job.pool

    def usage(
        self, skip: Callable[[TaskEntry], bool] | None = None
    ) -> tuple[dict[str, PoolUsage], dict[str, PoolAllocation]]:
        """Per leaf pool: demand and allocation (tasks for which `skip` is true left out)."""
        demand: dict[str, list[Resources]] = defaultdict(lambda: [Resources()] * 4)
        alloc: dict[str, PoolAllocation] = defaultdict(PoolAllocation)
        for entry in self.ledger.active():
            if skip is not None and skip(entry):
                continue
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
        self._computed_tree = self.pools.version
        self._computed_hosts = self.ledger.hosts_version
        self._unpublished = self._unpublished or changed
        if not (publish or self._unpublished) or (
                not publish and now_ms - self._published_at < 1000):
            return []
        self.cycle += 1
        self._published_at = now_ms
        self._unpublished = False
        return [
            Event(
                "EntitlementUpdated",
                "cluster",
                {
                    "at": now_ms,
                    "cycle": self.cycle,
                    "capacity": capacity.as_dict(),
                    "pools": self._pool_rows(usage, capacity),
                },
            )
        ]

    def _pool_rows(self, usage: dict[str, PoolUsage],
                   capacity: Resources) -> list[dict[str, Any]]:
        """One row per pool; the root's reservation and limit are the cluster capacity."""
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
                    "reservation": (capacity if path == ROOT
                                    else self.tree.reservation(path) or zero).as_dict(),
                    "limit": (capacity if path == ROOT
                              else self.tree.limit(path) or zero).as_dict(),
                    "entitlement": (ent.entitlement if ent else zero).as_dict(),
                    "slack_entitlement": (ent.slack_entitlement if ent else zero).as_dict(),
                    "nonslack_entitlement": (ent.nonslack_entitlement if ent else zero).as_dict(),
                    "allocation": totals[path][1].as_dict(),
                    "demand": totals[path][0].as_dict(),
                }
            )
        return rows

    # ---- preemption -----------------------------------------------------------------
    def _going(self, entry: TaskEntry, now_ms: int) -> bool:
        """A run already chosen that the job manager is taking back (or still may)."""
        at = entry.preempted_at
        return at is not None and (entry.state in _GOING
                                   or now_ms - at < self.preempt_ack_timeout_ms)

    def _preempt(self, now_ms: int) -> list[Event]:
        if not self.preemption_enabled:
            return []
        _, allocations = self.usage(skip=lambda e: self._going(e, now_ms))
        views = admission_views(self.tree, self.entitlements, allocations)
        index: dict[str, TaskEntry] = {}
        tasks: list[TaskView] = []
        for entry in self.ledger.active():
            if (entry.holding and entry.state in VICTIM_STATES
                    and not self._going(entry, now_ms)):
                index[entry.task_id] = entry
                job = entry.job
                tasks.append(TaskView(entry.task_id, self._pool_of(entry), entry.state,
                                      job.priority, entry.resources, job.preemptible,
                                      job.revocable, entry.started_seq))
        queues, _ = self._queues()
        plan = plan_preemption(views, tasks, queues, self.preemption,
                               sustained_cycles=self.preemption_cycles,
                               in_pool=self.in_pool_preemption)
        self.preemption = plan.state
        by_pool: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for victim in plan.victims:
            entry = index[victim.task_id]
            self.ledger.mark_preempted(entry.job.job_id, entry.instance, entry.run, now_ms)
            by_pool[victim.pool].append({
                "job_id": entry.job.job_id, "instance": entry.instance, "run": entry.run,
                "reason": victim.reason[0], "detail": victim.reason[1]})
        return [
            Event("TasksPreempted", pool, {"at": now_ms, "pool": pool, "tasks": chunk})
            for pool in sorted(by_pool)
            for chunk in _chunks(by_pool[pool])
        ]

    # ---- admission ------------------------------------------------------------------
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
                # a retried member restarts alone: the rest of its gang already runs
                in_gang = (job.gang_size > 1 and entry.instance < job.gang_size
                           and entry.run == 1)
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

    def snapshot(self) -> dict[str, Any]:
        """The state a failover must preserve, as plain comparable data: the pool tree,
        every task's run and standing, hosts, and the entitlements last computed."""
        return {
            "pools": {p: (parent, config_record(c))
                      for p, (parent, c) in sorted(self.pools.entries.items())},
            "tasks": {f"{j}/{i}": (e.run, e.state, e.admitted, e.preempted_at, e.started_seq)
                      for (j, i), e in sorted(self.ledger.tasks.items())},
            "jobs": sorted(self.ledger.jobs),
            "hosts": {h: (a, c.as_dict()) for h, (a, c) in sorted(self.ledger.hosts.items())},
            "entitlements": {p: (e.entitlement.as_dict(), e.slack_entitlement.as_dict())
                             for p, e in sorted(self.entitlements.items())},
        }


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
