"""The resource manager's cycle: pools, entitlement, preemption, then admission (pure).

Contract of `ResourceManager.tick(now_ms)` (only the leader calls it):
0. Pool decisions this instance made that have not come back through the log within
   `resend_pool_facts_ms` are published again (see peloton.resmgr.domain.poolbook).
   Admission and preemption decisions that have not come back within
   `confirm_timeout_ms` are dropped (see "Decide, publish, then commit" below).
1. Entitlement is recomputed every `entitlement_cycle_ms` (a *cycle*), at once when the
   pool tree or the cluster capacity changed, and otherwise at most every
   `min_recompute_ms` when demand or allocation changed, so new work does not wait a
   whole cycle. EntitlementUpdated is published every cycle, on every tree or capacity
   change (so the job manager learns new pools at once), and when the result changed.
2. Preemption (when enabled) runs once per cycle (peloton.resmgr.domain.preemption):
   between pools once a pool has been over its entitlement for `preemption_cycles`
   consecutive cycles, then within a pool for higher-priority pending gangs. Victims are
   published as TasksPreempted, one batch per pool. A run already being preempted counts
   as freed and is never chosen again, unless the job manager did not act on it within
   `preempt_ack_timeout_ms` (e.g. it was launching). Only runs the job manager can take
   back (`taskstate.VICTIMS`) are candidates.
3. Admission runs when anything changed since the last run, or when a run's retry backoff
   (`not_before_ms` of its requeue) has passed: each leaf pool's pending gangs are
   admitted within its entitlement (peloton.resmgr.domain.admission); a gang with a
   member still in its backoff waits. Admitted tasks are published as TasksAdmitted, one
   batch per pool and shard (`shard_of_job`: the partition of tasks-admitted a job's
   records land in, so a partitioned job manager or placement engine reads its own jobs'
   admissions, whatever their pool, in its own partition; None: one batch per pool), each
   run with its `pinned_host` (see ledger.py; null when unpinned) and its
   `config_version` (a run whose version no fact has said yet is not admitted: it waits
   for its PENDING change, see ledger.py); tasks left pending get their reason, published
   as AdmissionDeferred (batched as TasksAdmitted) only when it changed. Task-level
   `revocable` work is admitted against the slack entitlement like a revocable job;
   `controller` tasks against the controller limit. The revocable cpus divided into slack
   entitlements are the cpus no non-revocable run holds (`revocable_capacity`), so
   revocable runs are the first preemption victims when non-revocable work needs those
   cpus back.
The reservation check for non-preemptible work applies only when preemption is enabled,
as in Peloton (without preemption, elastic resources lent to such work could never be
taken back, so admitting it beyond the reservation is the lesser harm).

Decide, publish, then commit: the ledger changes only by folding facts from the log. A
decision of this instance (an admission, a preemption, a deferral reason) is held as
*provisional* until its fact is folded back (then the ledger has it), so the next tick does
not decide it again. A provisional decision whose fact has not come back within
`confirm_timeout_ms` is dropped and the run decided afresh, so a deposed leader never
diverges from the log for longer than the timeout (a decision about a run the ledger has
moved past says nothing meanwhile: every lookup is by the run's current key). A burst
leaves thousands of admissions not back yet, read back seconds later: which of them count
as held is kept as it changes (provisionaltally.py), so a tick does not visit them. When
the shell cannot publish a tick's events (or the tick raised half-way) it calls
`discard_unpublished()`: everything the tick changed (provisional decisions,
entitlements, admission and preemption counters, cadence) is put back, so the core equals
one that never ticked, and ticking again at the same time gives the same events. Pool
decisions follow PoolBook's rule (speculated until folded back, resent).

`fold` applies facts (every instance, replay included); `handle` also decides pool
requests (every instance decides; only the leader's answers are published, and every
instance's tree follows the published facts).

Snapshot: `snapshot()` gives the whole state as plain JSON-able data (pool book, ledger,
entitlements, admission and preemption counters, provisional decisions, cadence, and what
`discard_unpublished` would put back);
`restore(data)` replaces the state with it, so `restore(snapshot())` behaves exactly as
the original. `view()` is the part every instance folding the same log agrees on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import takewhile
from operator import attrgetter
from typing import Any

from peloton.model.event import Event
from peloton.model.jobshards import by_job_shard
from peloton.model.resources import Resources
from peloton.model.taskstate import ENDING, HOLDING, VICTIMS, TaskState
from peloton.resmgr.domain.admission import (
    AdmissionState,
    Gang,
    PoolAllocation,
    admission_views,
    admit,
    reason_key,
)
from peloton.resmgr.domain.entitlement import PoolEntitlement, PoolUsage, compute_entitlements
from peloton.resmgr.domain.ledger import (
    ADMITTED,
    DEFAULT_RETENTION_MS,
    HELD,
    MICRO,
    PENDING,
    Bucket,
    Cell,
    Ledger,
    TaskEntry,
    TaskKey,
    bucket,
    count,
    micro,
)
from peloton.resmgr.domain.poolbook import POOL_FACTS, POOL_REQUESTS, PoolBook, config_record
from peloton.resmgr.domain.pooltree import ROOT, PoolTree
from peloton.resmgr.domain.preemption import PreemptionState, TaskView, plan_preemption
from peloton.resmgr.domain.provisionaltally import ProvisionalTally, RunKey

__all__ = ["ResourceManager", "Provisional", "BACKOFF_REASON", "revocable_capacity"]

_MAX_BATCH = 4000
_NEVER = 10**18
BACKOFF_REASON = "waiting out the retry backoff of a requeued run"


@dataclass(slots=True)
class Provisional:
    """This instance's decisions that have not come back through the log yet, each table
    in the order they were decided (so the expired ones are found at its front)."""

    admitted: dict[RunKey, tuple[int, int]] = field(default_factory=dict)  # at, requeues
    preempted: dict[RunKey, int] = field(default_factory=dict)  # at
    reasons: dict[RunKey, tuple[str, int]] = field(default_factory=dict)  # reason, at

    def __len__(self) -> int:
        return len(self.admitted) + len(self.preempted) + len(self.reasons)


def _key(entry: TaskEntry) -> RunKey:
    return (entry.job.job_id, entry.instance, entry.run)


def _at(value: int) -> int:
    return value


def _at_first(value: tuple[int, int]) -> int:
    return value[0]


def _at_second(value: tuple[str, int]) -> int:
    return value[1]


def _front(table: dict[RunKey, Any], at_of: Callable[[Any], int], cutoff: int) -> list[RunKey]:
    """The keys at the front of a table (in decision order) decided at or before `cutoff`."""
    return [key for key, value in takewhile(lambda kv: at_of(kv[1]) <= cutoff, table.items())]


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
        confirm_timeout_ms: int = 10_000,
        unused_admission_ms: int = 60_000,
        retention_ms: int = DEFAULT_RETENTION_MS,
        shard_of_job: Callable[[str], int] | None = None,
    ) -> None:
        self.ledger = Ledger(retention_ms)
        self.shard_of_job = shard_of_job
        self.pools = PoolBook()
        self.entitlement_cycle_ms = entitlement_cycle_ms
        self.min_recompute_ms = min_recompute_ms
        self.preemption_enabled = preemption_enabled
        self.preemption_cycles = max(1, preemption_cycles)
        self.in_pool_preemption = in_pool_preemption
        self.preempt_ack_timeout_ms = preempt_ack_timeout_ms
        self.resend_pool_facts_ms = resend_pool_facts_ms
        self.confirm_timeout_ms = confirm_timeout_ms
        self.unused_admission_ms = unused_admission_ms
        self.entitlements: dict[str, PoolEntitlement] = {}
        self.admission = AdmissionState()
        self.preemption = PreemptionState()
        self.provisional = Provisional()
        self._tally = ProvisionalTally(self.ledger)  # which of them count as held
        self.cycle = 0
        self._computed_at = -(10**15)
        self._published_at = -(10**15)
        self._cycle_at = -(10**15)  # the last periodic cycle (recomputes do not move it)
        self._unpublished = False  # a changed result not published yet (rate limit)
        self._local = 0  # bumps on every change of the provisional decisions
        self._computed_version: tuple[int, int] = (-1, -1)
        self._computed_tree = -1
        self._computed_hosts = -1
        self._admitted_version: tuple[int, int] = (-1, -1)
        self._wake_at = _NEVER  # the earliest retry backoff still running
        self._now = -(10**15)  # the time of the last tick
        self._undo: _Decisions | None = None  # the decision state before the last tick
        self._arrivals_seen = 0  # the ledger's arrivals at the last tick

    @property
    def tree(self) -> PoolTree:
        """The pool tree as the log describes it (speculative decisions excluded)."""
        return self.pools.tree

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        self._undo = None  # the last call is no tick any more: nothing to discard
        if etype in POOL_FACTS:
            self.pools.fold(etype, body)
        elif etype not in POOL_REQUESTS:  # requests are decided live only (`handle`)
            self.ledger.fold(etype, body)
            self._confirm(etype, body)

    def _confirm(self, etype: str, body: dict[str, Any]) -> None:
        """A decision came back through the log: the ledger has it now."""
        tables: dict[str, dict[RunKey, Any]] = {
            "TasksAdmitted": self.provisional.admitted,
            "TasksPreempted": self.provisional.preempted,
            "AdmissionDeferred": self.provisional.reasons}
        table = tables.get(etype)
        if table:
            for t in body["tasks"]:
                key = (t["job_id"], t["instance"], t["run"])
                if table.pop(key, None) is not None:
                    self._local += 1
                    if etype == "TasksAdmitted":
                        self._tally.removed(key)

    def handle(self, etype: str, body: dict[str, Any], now_ms: int) -> list[Event]:
        """Fold a live fact, or decide a pool request (one answering fact)."""
        self._undo = None
        if etype in POOL_REQUESTS:
            capacity = self.ledger.capacity()
            return self.pools.decide(etype, body, None if capacity.is_zero() else capacity,
                                     self.busy_pools(), now_ms)
        self.fold(etype, body)
        return []

    def busy_pools(self) -> set[str]:
        """Pools (paths) of jobs that have not finished."""
        return {self._resolve(job.pool) for job in self.ledger.jobs.values()}

    # ---- provisional decisions ---------------------------------------------------------
    def admitted(self, entry: TaskEntry) -> bool:
        """Admitted by the log (and the admission not left unused by the job manager for
        `unused_admission_ms`, see ledger.py), or by a provisional decision."""
        if entry.admitted:
            return self._now - max(entry.admissions) < self.unused_admission_ms
        if not self.provisional.admitted:  # no key to build: a deep queue asks this a lot
            return False
        mine = self.provisional.admitted.get(_key(entry))
        return (mine is not None and entry.state == TaskState.PENDING
                and mine[1] == entry.requeues)

    def _lapsed(self) -> list[TaskEntry]:
        """The admissions the job manager left unused that this instance no longer trusts
        (those `admitted` says no of), in key order."""
        return self.ledger.lapsed(self._now - self.unused_admission_ms)

    def holding(self, entry: TaskEntry) -> bool:
        return entry.state in HOLDING or self.admitted(entry)

    def pending(self, entry: TaskEntry) -> bool:
        return entry.state == TaskState.PENDING and not self.admitted(entry)

    def preempted_at(self, entry: TaskEntry) -> int | None:
        if entry.preempted_at is not None:
            return entry.preempted_at
        return self.provisional.preempted.get(_key(entry))

    def reason(self, entry: TaskEntry) -> str | None:
        if not self.provisional.reasons:
            return entry.reason
        mine = self.provisional.reasons.get(_key(entry))
        return mine[0] if mine is not None else entry.reason

    def discard_unpublished(self) -> None:
        """Forget the last tick: the shell could not publish its events (or it raised).

        Everything the tick changed is put back (provisional decisions, entitlements,
        admission and preemption counters, cadence, pool resend marks), so the core is
        exactly what it was before the tick, i.e. what the log says; the next tick decides
        afresh (at the same time, the same events). After any other call (a fold, a pool
        request) there is nothing to forget: facts come from the log, and a pool answer
        stays speculated and is resent (see PoolBook).
        """
        if self._undo is not None:
            self._set_decisions(self._undo)
            self._undo = None

    def _decisions(self) -> _Decisions:
        """A copy of every part of the state a tick may change."""
        prov = self.provisional
        return _Decisions(
            dict(self.entitlements), self.admission, self.preemption,
            Provisional(dict(prov.admitted), dict(prov.preempted), dict(prov.reasons)),
            self.pools.resend_marks(),
            _Cadence(self.cycle, self._computed_at, self._published_at, self._cycle_at,
                     self._unpublished, self._local, self._computed_version,
                     self._computed_tree, self._computed_hosts, self._admitted_version,
                     self._wake_at, self._now))

    def _set_decisions(self, d: _Decisions) -> None:
        self.entitlements, self.admission, self.preemption = (
            d.entitlements, d.admission, d.preemption)
        self.provisional = d.provisional
        self._tally.rebuild(self.ledger, d.provisional.admitted)
        self.pools.set_resend_marks(d.resent)
        c = d.cadence
        (self.cycle, self._computed_at, self._published_at, self._cycle_at,
         self._unpublished, self._local, self._computed_version, self._computed_tree,
         self._computed_hosts, self._admitted_version, self._wake_at, self._now) = (
            c.cycle, c.computed_at, c.published_at, c.cycle_at, c.unpublished, c.local,
            c.computed_version, c.computed_tree, c.computed_hosts, c.admitted_version,
            c.wake_at, c.now)

    def _expire(self, now_ms: int) -> None:
        """Drop provisional decisions that did not come back in time: O(those dropped),
        from the front of each table (decision order). A decision about a run the ledger
        has moved past (a newer run, an end) stays until then too: every lookup is by the
        current run's key, so it says nothing meanwhile."""
        cutoff = now_ms - self.confirm_timeout_ms
        prov = self.provisional
        dropped = 0
        for table, at_of in ((prov.admitted, _at_first), (prov.preempted, _at),
                             (prov.reasons, _at_second)):
            for key in _front(table, at_of, cutoff):
                del table[key]
                dropped += 1
                if table is prov.admitted:
                    self._tally.removed(key)
        if dropped:
            self._local += 1

    @property
    def _version(self) -> tuple[int, int]:
        return (self.ledger.version, self._local)

    # ---- cycle ----------------------------------------------------------------------
    def tick_wanted(self) -> bool:
        """Runs began to wait since the last tick: admitting them should not wait for the
        next timer tick (the shell ticks soon; `peloton.bus.driver`)."""
        return self.ledger.arrivals != self._arrivals_seen

    def tick(self, now_ms: int) -> list[Event]:
        self._undo = self._decisions()
        self._arrivals_seen = self.ledger.arrivals
        self._now = now_ms
        events: list[Event] = self.pools.unconfirmed(now_ms, self.resend_pool_facts_ms)
        if self.provisional:
            self._expire(now_ms)
        due = now_ms - self._cycle_at >= self.entitlement_cycle_ms
        reshaped = (self.pools.version != self._computed_tree
                    or self.ledger.hosts_version != self._computed_hosts)
        changed = self._version != self._computed_version
        computed: list[Event] = []
        catch_up = self._unpublished and now_ms - self._published_at >= 1000
        if (due or reshaped or catch_up
                or (changed and now_ms - self._computed_at >= self.min_recompute_ms)):
            computed += self._entitlement(now_ms, publish=due or reshaped)
            if due:
                self._cycle_at = now_ms
                computed += self._preempt(now_ms)
        events += computed
        if self._version != self._admitted_version or computed or now_ms >= self._wake_at:
            events += self._admit(now_ms)
            self._admitted_version = self._version
        return events

    def _resolve(self, pool: str) -> str:
        resolved = self.tree.resolve(pool)
        return resolved if resolved is not None else pool

    def _pool_of(self, entry: TaskEntry) -> str:
        return self._resolve(entry.job.pool)

    def usage(
        self, going_at: int | None = None
    ) -> tuple[dict[str, PoolUsage], dict[str, PoolAllocation]]:
        """Per leaf pool: demand and allocation of the active runs (with `going_at`, the
        runs being taken back at that time, see `_going`, are left out).

        O(pools + runs whose standing changed), not O(active runs): it starts from the
        ledger's integer totals (`Ledger.sums`, where the admissions the job manager has
        not used yet count as held, as this instance counts them while it trusts them:
        `unused_admission_ms`) and moves what this instance sees differently: its
        provisional admissions that count as held (their totals, kept as they change:
        provisionaltally.py), admissions it stopped trusting (found without visiting the
        others: `Ledger.lapsed`) and (with `going_at`) runs being preempted. The totals
        are exact (integer micro-units), so the result is the same whatever the order the
        facts were folded in.
        """
        ledger = self.ledger
        cells: dict[tuple[int, Bucket], Cell] = {
            (cls, b): list(cell)
            for cls in (PENDING, HELD) for b, cell in ledger.sums[cls].items()}
        for b, cell in ledger.sums[ADMITTED].items():
            into = cells.setdefault((HELD, b), [0, 0, 0, 0, 0])
            for i in range(5):
                into[i] += cell[i]
        # the provisional admissions that count: filed PENDING, held here
        tally = self._tally
        tally.refresh(self.provisional.admitted)
        for b, cell in tally.cells.items():
            demand, held = cells[(PENDING, b)], cells.setdefault((HELD, b), [0, 0, 0, 0, 0])
            for i in range(5):
                demand[i] -= cell[i]
                held[i] += cell[i]
        special: dict[TaskKey, TaskEntry] = {e.key: e for e in self._lapsed()}
        if going_at is not None:
            special.update(ledger.preempted)
            for job_id, instance, _ in self.provisional.preempted:
                entry = ledger.entry(job_id, instance)
                if entry is not None:
                    special[entry.key] = entry
        # runs that move, counted by (from, to, bucket, resources): a burst leaves
        # thousands of admitted runs not READY yet, most of them alike
        moves: dict[tuple[int | None, int | None, Bucket, tuple[int, int, int, int]],
                    int] = defaultdict(int)
        for key, entry in special.items():
            was = HELD if key in tally.counted else ledger.filed.get(key)
            if was == ADMITTED:
                was = HELD
            now: int | None = None
            if ((key in ledger.pending or key in ledger.holding)
                    and not (going_at is not None and self._going(entry, going_at))):
                now = HELD if self.holding(entry) else PENDING
            if was != now:
                moves[(was, now, bucket(entry), micro(entry.resources))] += 1
        for (was, now, b, vec), n in moves.items():
            if was is not None:
                count(cells, (was, b), vec, -n)
            if now is not None:
                count(cells, (now, b), vec, n)
        # per pool: demand, allocation, slack demand, slack allocation, non-preemptible,
        # controller (micro-units), and the number of runs that hold
        per_pool: dict[str, list[list[int]]] = {}
        holders: dict[str, int] = defaultdict(int)
        for (cls, (name, revocable, preemptible, controller)), cell in cells.items():
            if cell[0] == 0:
                continue
            pool = self._resolve(name)
            sums = per_pool.setdefault(pool, [[0, 0, 0, 0] for _ in range(6)])
            targets = [(1 if cls == HELD else 0) + (2 if revocable else 0)]
            if cls == HELD:
                holders[pool] += cell[0]
                if not preemptible:
                    targets.append(4)
                if controller:
                    targets.append(5)
            for t in targets:
                total = sums[t]
                for i in range(4):
                    total[i] += cell[i + 1]
        usage: dict[str, PoolUsage] = {}
        alloc: dict[str, PoolAllocation] = {}
        for pool, sums in per_pool.items():
            r = [_resources(v) for v in sums]
            usage[pool] = PoolUsage(r[0], r[1], r[2], r[3])
            if holders[pool]:
                alloc[pool] = PoolAllocation(r[1], r[3], r[4], r[5])
        return usage, alloc

    def _entitlement(self, now_ms: int, publish: bool) -> list[Event]:
        usage, allocations = self.usage()
        capacity = self.ledger.capacity()
        ents = compute_entitlements(self.tree, capacity, usage,
                                    revocable_capacity(capacity, allocations.values()))
        changed = ents != self.entitlements
        self.entitlements = ents
        self._computed_at = now_ms
        self._computed_version = self._version
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
        at = self.preempted_at(entry)
        return at is not None and (entry.state in ENDING
                                   or now_ms - at < self.preempt_ack_timeout_ms)

    def _preempt(self, now_ms: int) -> list[Event]:
        if not self.preemption_enabled:
            return []
        _, allocations = self.usage(going_at=now_ms)
        views = admission_views(self.tree, self.entitlements, allocations)
        index: dict[str, TaskEntry] = {}
        tasks: list[TaskView] = []
        for key in sorted(self.ledger.holding):
            entry = self.ledger.holding[key]
            if entry.state in VICTIMS and not self._going(entry, now_ms):
                index[entry.task_id] = entry
                job = entry.job
                tasks.append(TaskView(entry.task_id, self._pool_of(entry), entry.state,
                                      job.priority, entry.resources, job.victim,
                                      entry.revocable, entry.started_seq))
        queues, _, _ = self._queues(now_ms)
        plan = plan_preemption(views, tasks, queues, self.preemption,
                               sustained_cycles=self.preemption_cycles,
                               in_pool=self.in_pool_preemption)
        self.preemption = plan.state
        by_pool: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for victim in plan.victims:
            entry = index[victim.task_id]
            self._decide("preempted", _key(entry), now_ms)
            by_pool[victim.pool].append({
                "job_id": entry.job.job_id, "instance": entry.instance, "run": entry.run,
                "reason": victim.reason[0], "detail": victim.reason[1]})
        return [
            Event("TasksPreempted", pool, {"at": now_ms, "pool": pool, "tasks": chunk})
            for pool in sorted(by_pool)
            for chunk in _chunks(by_pool[pool])
        ]

    def _decide(self, kind: str, key: RunKey, now_ms: int, value: Any = None) -> None:
        """Hold a decision as provisional (last in its table: tables stay in decision
        order for `_expire`)."""
        prov = self.provisional
        if kind == "admitted":
            if prov.admitted.pop(key, None) is None:
                self._tally.added(key)
            else:
                self._tally.changed(key)  # the same run admitted again (a later stage)
            prov.admitted[key] = (now_ms, value)
        elif kind == "preempted":
            prov.preempted.pop(key, None)
            prov.preempted[key] = now_ms
        else:
            prov.reasons.pop(key, None)
            prov.reasons[key] = (value, now_ms)
        self._local += 1

    # ---- admission ------------------------------------------------------------------
    def _admit(self, now_ms: int) -> list[Event]:
        _, allocations = self.usage()
        views = admission_views(self.tree, self.entitlements, allocations)
        queues, members, waiting = self._queues(now_ms)
        result = admit(views, queues, self.admission)
        self.admission = result.state
        admitted: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for gang in result.admitted:
            for entry in members[gang.gang_id]:
                self._decide("admitted", _key(entry), now_ms, entry.requeues)
                admitted[gang.pool].append(
                    {"job_id": entry.job.job_id, "instance": entry.instance, "run": entry.run,
                     "pinned_host": entry.pinned_host,
                     "config_version": entry.config_version}
                )
        events = [Event("TasksAdmitted", chunk[0]["job_id"],
                        {"at": now_ms, "pool": pool, "tasks": chunk})
                  for pool, chunk in _batches(admitted, self.shard_of_job)]
        reasons = {**result.pending_reasons, **{g: BACKOFF_REASON for g in waiting}}
        pool_of_gang = {g.gang_id: pool for pool, gangs in queues.items() for g in gangs}
        pool_of_gang.update(waiting)
        return events + self._deferred(now_ms, reasons, members, pool_of_gang)

    def _pending(self) -> Iterator[TaskEntry]:
        """Pending runs (with admissions the job manager left unused), in no particular
        order (`_queues` orders what it builds of them); runs whose config version is not
        said yet wait (see ledger.py)."""
        pending, unused = self.ledger.pending, self.ledger.unused
        # the unused admissions still trusted and the provisional admissions that count
        # are admitted: only the others are candidates (not visiting every admitted run
        # each tick keeps a burst linear)
        self._tally.refresh(self.provisional.admitted)
        counted = self._tally.counted
        keys = pending.keys() - counted.keys() if counted else pending.keys()
        lapsed = [entry.key for entry in self._lapsed()]
        # a run of `pending` has no admission of the log's (ledger.py files it there only
        # then), so only a provisional one may make it admitted: asked only if there are
        prov = bool(self.provisional.admitted)
        for key in (keys | set(lapsed) if lapsed else keys):
            entry = pending.get(key)
            ask = prov
            if entry is None:
                entry, ask = unused[key], True
            if entry.config_version is not None and not (ask and self.admitted(entry)):
                yield entry

    def _queues(
        self, now_ms: int
    ) -> tuple[dict[str, list[Gang]], dict[str, list[TaskEntry]], dict[str, str]]:
        """Pending gangs by pool, every gang's members, and the gangs (-> pool) waiting
        out a retry backoff (not queued). Sets when the next backoff ends (`_wake_at`)."""
        # a deep queue runs this for every pending run each tick: the common case (a run
        # scheduled alone, not waiting out a backoff) is built without a call it can skip
        members: dict[str, list[TaskEntry]] = {}
        ganged: set[str] = set()  # gang ids (the other gangs are named by their run's task)
        for entry in self._pending():
            job = entry.job
            gid = (job.spec.gang_id(entry.instance, entry.run)
                   if job.spec.gang_size > 1 else None)
            if gid is None:
                gid = entry.task_id
            else:
                ganged.add(gid)
            listed = members.get(gid)
            if listed is None:
                members[gid] = [entry]
            else:
                listed.append(entry)
        queues: dict[str, list[Gang]] = defaultdict(list)
        waiting: dict[str, str] = {}
        wake = _NEVER
        resolved: dict[str, str] = {}  # a job's pool as named -> the leaf it resolves to
        unpreemptible = not self.preemption_enabled
        # in no particular order: `admit` orders each pool's queue (priority, arrival, gang
        # id: a total order), `_deferred` the reasons; a gang's runs go in key order
        for gid, entries in members.items():
            if len(entries) == 1:  # most gangs: one run
                first = entries[0]
                backoff = first.not_before or 0
                # a lone run's gang is named by its task unless it is a gang's only
                # pending member (then it still needs the gang's size: `_missing_members`)
                task_ids: tuple[str, ...] = (first.task_id,) if gid in ganged else (gid,)
                resources, controller = first.resources, first.controller
            else:  # only a gang (a task id names one run)
                entries.sort(key=attrgetter("key"))
                first = entries[0]
                backoff = max((e.not_before or 0) for e in entries)
                task_ids = tuple(e.task_id for e in entries)
                resources = sum((e.resources for e in entries), Resources())
                controller = any(e.controller for e in entries)
            job = first.job
            pool = resolved.get(job.pool)
            if pool is None:
                pool = resolved[job.pool] = self._pool_of(first)
            if backoff > now_ms:
                waiting[gid] = pool
                wake = min(wake, backoff)
                continue
            queues[pool].append(Gang(
                gid, task_ids, pool, job.priority, job.seq * 1_000_000 + first.instance,
                resources, job.preemptible or unpreemptible, first.revocable, controller,
                job.spec.gang_size if gid in ganged else 1))
        self._wake_at = wake
        return dict(queues), dict(members), waiting

    def _deferred(
        self,
        now_ms: int,
        reasons: dict[str, str],
        members: dict[str, list[TaskEntry]],
        pool_of_gang: dict[str, str],
    ) -> list[Event]:
        by_pool: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for gid in sorted(reasons):
            # a reason is republished when what it says changes, not its figures (or the
            # gang it names), which move with every admission in the pool
            says = reason_key(reasons[gid])
            for entry in members.get(gid, ()):
                if reason_key(self.reason(entry)) != says:
                    self._decide("reasons", _key(entry), now_ms, reasons[gid])
                    by_pool[pool_of_gang[gid]].append(
                        {
                            "job_id": entry.job.job_id,
                            "instance": entry.instance,
                            "run": entry.run,
                            "reason": reasons[gid],
                        }
                    )
        return [Event("AdmissionDeferred", chunk[0]["job_id"],
                      {"at": now_ms, "pool": pool, "tasks": chunk})
                for pool, chunk in _batches(by_pool, self.shard_of_job)]

    def root_entitlement(self) -> Resources:
        ent = self.entitlements.get(ROOT)
        return ent.entitlement if ent else Resources()

    # ---- state ------------------------------------------------------------------------
    def view(self) -> dict[str, Any]:
        """The state every instance folding the same log agrees on, as comparable data:
        the pool tree, every live run and its standing (and pin and config version), jobs
        (and their config versions), hosts, entitlements."""
        return {
            "pools": {p: (parent, config_record(c))
                      for p, (parent, c) in sorted(self.pools.entries.items())},
            "tasks": {f"{j}/{i}": (e.run, e.state.value, self.holding(e),
                                   self.preempted_at(e), e.started_seq, e.pinned_host,
                                   e.config_version)
                      for (j, i), e in sorted(self.ledger.tasks.items())},
            "jobs": {j: sorted(job.updates) for j, job in sorted(self.ledger.jobs.items())},
            "hosts": {h: (a, c.as_dict()) for h, (a, c) in sorted(self.ledger.hosts.items())},
            "entitlements": {p: (e.entitlement.as_dict(), e.slack_entitlement.as_dict())
                             for p, e in sorted(self.entitlements.items())},
        }

    def snapshot(self) -> dict[str, Any]:
        """The whole state as plain JSON-able data (see the module doc), including what
        `discard_unpublished` would put back."""
        return {
            "pools": self.pools.snapshot(),
            "ledger": self.ledger.snapshot(),
            "decisions": _encode_decisions(self._decisions()),
            "undo": None if self._undo is None else _encode_decisions(self._undo),
        }

    def restore(self, data: dict[str, Any]) -> None:
        """Replace the state with `snapshot()` data (all or nothing); raises KeyError,
        TypeError or ValueError on data it cannot read."""
        pools = PoolBook.restore(data["pools"])
        ledger = Ledger.restore(data["ledger"])
        decisions = _decode_decisions(data["decisions"])
        undo = None if data["undo"] is None else _decode_decisions(data["undo"])
        self.pools, self.ledger = pools, ledger
        self._set_decisions(decisions)
        self._undo = undo


@dataclass(frozen=True, slots=True)
class _Cadence:
    cycle: int
    computed_at: int
    published_at: int
    cycle_at: int
    unpublished: bool
    local: int
    computed_version: tuple[int, int]
    computed_tree: int
    computed_hosts: int
    admitted_version: tuple[int, int]
    wake_at: int
    now: int


@dataclass(frozen=True, slots=True)
class _Decisions:
    """The part of the state a tick changes (see `ResourceManager.discard_unpublished`)."""

    entitlements: dict[str, PoolEntitlement]
    admission: AdmissionState
    preemption: PreemptionState
    provisional: Provisional
    resent: dict[str, int]
    cadence: _Cadence


def _encode_decisions(d: _Decisions) -> dict[str, Any]:
    prov, c = d.provisional, d.cadence
    return {
        "entitlements": [[p, *(r.as_dict() for r in (
            e.entitlement, e.slack_entitlement, e.nonslack_entitlement, e.requirement))]
            for p, e in d.entitlements.items()],
        "admission": sorted(d.admission.blocked_cycles.items()),
        "preemption": sorted(d.preemption.over_cycles.items()),
        "provisional": {
            "admitted": [[*k, at, rq] for k, (at, rq) in prov.admitted.items()],
            "preempted": [[*k, at] for k, at in prov.preempted.items()],
            "reasons": [[*k, r, at] for k, (r, at) in prov.reasons.items()],
        },
        "resent": sorted(d.resent.items()),
        "cadence": [c.cycle, c.computed_at, c.published_at, c.cycle_at, c.unpublished,
                    c.local, list(c.computed_version), c.computed_tree, c.computed_hosts,
                    list(c.admitted_version), c.wake_at, c.now],
    }


def _decode_decisions(data: dict[str, Any]) -> _Decisions:
    """The inverse of `_encode_decisions`; KeyError/TypeError/ValueError on bad data."""
    ents = {str(p): PoolEntitlement(*(Resources.from_mapping(r) for r in rs))
            for p, *rs in data["entitlements"]}
    raw = data["provisional"]
    prov = Provisional(
        {(str(j), int(i), int(r)): (int(at), int(rq)) for j, i, r, at, rq in raw["admitted"]},
        {(str(j), int(i), int(r)): int(at) for j, i, r, at in raw["preempted"]},
        {(str(j), int(i), int(r)): (str(reason), int(at))
         for j, i, r, reason, at in raw["reasons"]})
    (cycle, computed_at, published_at, cycle_at, unpublished, local, (cv0, cv1),
     computed_tree, computed_hosts, (av0, av1), wake_at, now) = data["cadence"]
    cadence = _Cadence(int(cycle), int(computed_at), int(published_at), int(cycle_at),
                       bool(unpublished), int(local), (int(cv0), int(cv1)),
                       int(computed_tree), int(computed_hosts), (int(av0), int(av1)),
                       int(wake_at), int(now))
    return _Decisions(ents, AdmissionState({str(g): int(n) for g, n in data["admission"]}),
                      PreemptionState({str(p): int(n) for p, n in data["preemption"]}),
                      prov, {str(r): int(at) for r, at in data["resent"]}, cadence)


def revocable_capacity(capacity: Resources,
                       allocations: Iterable[PoolAllocation]) -> Resources:
    """The cluster's revocable (slack) cpus: the cpus no non-revocable run holds.

    The host manager offers a host's unallocated resources as its slack (OfferReceived
    v2), and validates revocable and non-revocable placements against one allocation. So
    the cpus revocable work may use are the capacity minus what non-revocable runs hold
    (admitted or on a host); revocable runs already holding cpus keep counting in it.
    When non-revocable work takes more, this shrinks below what revocable runs hold, their
    pools go over their slack entitlement, and they are the first victims of preemption.
    """
    held = sum((a.nonslack.cpu for a in allocations), 0.0)
    return Resources(cpu=max(0.0, capacity.cpu - held))


def _resources(vec: list[int]) -> Resources:
    """Micro-units back to resources (exact for any run's rounded resources)."""
    return Resources(vec[0] / MICRO, vec[1] / MICRO, vec[2] / MICRO, vec[3] / MICRO)


def _chunks(items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [items[i : i + _MAX_BATCH] for i in range(0, len(items), _MAX_BATCH)]


def _batches(by_pool: dict[str, list[dict[str, Any]]],
             shard_of_job: Callable[[str], int] | None,
             ) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The batches of runs of a TasksAdmitted or AdmissionDeferred, as (pool, runs): by
    pool, then by the shard of their job (a batch's runs all of one shard, in their
    order; its record is keyed by its first run's job), then in chunks."""
    for pool in sorted(by_pool):
        for part in by_job_shard(by_pool[pool], shard_of_job):
            for chunk in _chunks(part):
                yield pool, chunk
