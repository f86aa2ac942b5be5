"""One simulated scheduling cycle, made of the production cores (never copies of them).

Contract of a cycle at simulated time `now` (the simulation calls the stages in order):
1. `entitle()`: `compute_entitlements` on the pool tree, the up hosts' capacity and each
   leaf pool's demand (PENDING) and allocation (READY + RUNNING).
2. `preempt()` (every entitlement cycle, when enabled): `plan_preemption` with the
   pools' admission views; READY victims go back to PENDING, RUNNING victims go
   RUNNING -> PREEMPTING -> KILLED and their task starts a new run (PENDING).
3. `admit()`: `admit` on each pool's queue; admitted tasks become READY and hold
   allocation.
4. `place()`: one `place` round over the READY tasks and the hosts' offers; placed
   tasks go READY -> PLACING -> PLACED -> LAUNCHING -> RUNNING, others back to READY.

Aggregation (what makes a million tasks cheap, without changing any decision):
- A job's pending tasks are identical, so admission sees them as chunk gangs of sizes
  r, 2^(k-1), ..., 2, 1 (binary splitting of the pending count, r the remainder, in
  that order): admission's backfilling scan then admits exactly min(n, what fits) of
  the job, as a per-task scan would. A job whose chunk failed a scan ages by one (the
  resource manager ages each blocked task gang); once it is old enough to reserve, a
  gang of one task follows its chunks (the job's next task, `_add_next_task_gangs`), so
  it reserves where the job's first task that does not fit would, after the job's
  chunks that fit were admitted. (Without the age, lower-priority work kept backfilling
  past a blocked higher-priority job and was preempted again and again by stage 2: the
  cross-check against the production cores, tests/sim/test_sim_engines_agree.py, found
  it.) A chunk's `task_ids` is one label naming the chunk; real gangs list every member.
- An admission scan looks at the first `admission_window` jobs of each pool's queue in
  admission order (Peloton's dequeue limit).
- Preemption is given only the tasks it could choose: every preemptible task of a pool
  that is over its entitlement (stage 1), and in other pools the preemptible tasks below
  the highest pending priority (stage 2, which takes only lower-priority victims), with
  the pending gangs that outrank some such task. Both stages decide exactly as with
  every task and gang.
- A placement round is skipped when nothing changed since a round that placed nothing
  (no new READY task, no freed or returned host): it would place nothing again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from peloton.jobmgr.domain.states import TaskState
from peloton.model.resources import Resources
from peloton.placement.domain import Strategy, TaskRequest, place
from peloton.resmgr.domain import (
    AdmissionState,
    Gang,
    PoolAdmissionView,
    PoolAllocation,
    PoolEntitlement,
    PoolUsage,
    PreemptionState,
    TaskView,
    admission_views,
    admit,
    compute_entitlements,
    plan_preemption,
)

from .scenario import SchedulerParams
from .state import SimJob, SimState
from .tasktable import CODE, STATES, IntArray

__all__ = ["Scheduler", "PreemptionOutcome", "RoundOutcome", "chunk_sizes"]

S = TaskState
_READY, _RUNNING = CODE[S.READY], CODE[S.RUNNING]
_GANG_SUFFIX = "#gang"
_MAX_SKIPS = 3  # admission's `max_skips` (peloton.resmgr.domain.admission.admit's default)
_STATE_NAMES = [state.value for state in STATES]
_NO_LABELS: Mapping[str, str] = MappingProxyType({})


def chunk_sizes(n: int) -> list[int]:
    """Binary splitting of n: the remainder r (if any), then 2^(k-1), ..., 2, 1.

    Greedy in this order takes exactly min(n, budget) for any budget.
    """
    powers: list[int] = []
    k = 0
    while (1 << (k + 1)) - 1 <= n:
        powers.append(1 << k)
        k += 1
    r = n - ((1 << k) - 1)
    return ([r] if r else []) + powers[::-1]


@dataclass(frozen=True, slots=True)
class PreemptionOutcome:
    ready: IntArray
    """READY victims (back to PENDING, nothing lost)."""
    running: IntArray
    """RUNNING victims (killed; their work so far is wasted)."""
    wasted: np.ndarray
    """Resource-seconds of the killed runs, per kind."""


@dataclass(frozen=True, slots=True)
class RoundOutcome:
    placed: IntArray
    unplaced: IntArray
    delays: np.ndarray
    """Queueing delay of each placed run (queued -> RUNNING), seconds."""
    wall_s: float


class Scheduler:
    def __init__(self, state: SimState, params: SchedulerParams,
                 clock: Callable[[], float] | None = None) -> None:
        self.state = state
        self.params = params
        self.tree = state.scenario.tree
        self.admission = AdmissionState()
        self._job_age: dict[int, int] = {}  # job index -> scans its chunks were blocked
        self.preemption = PreemptionState()
        self.entitlements: dict[str, PoolEntitlement] = {}
        self._clock = clock
        self._shapes: dict[int, tuple[str, Resources, str, int, Strategy, int]] = {}
        self._last_round: tuple[int, int] | None = None
        self._ent_key: tuple[bytes, bytes, int] | None = None
        self._ent_version = 0
        self._admit_key: tuple[int, bytes, bytes, int] | None = None

    # ------------------------------------------------------------------ entitlement
    def entitle(self) -> dict[str, PoolEntitlement]:
        """This cycle's entitlements; recomputed only when demand, allocation or the
        hosts that are up changed (the same inputs give the same result)."""
        st = self.state
        pools = st.pools
        key = (pools.pending.tobytes(), pools.holding.tobytes(), st.hosts.up_version)
        if key == self._ent_key:
            return self.entitlements
        self._ent_key = key
        self._ent_version += 1
        usage = {
            path: PoolUsage(demand=Resources(*pools.pending[i].tolist()),
                            allocation=Resources(*pools.holding[i].tolist()))
            for i, path in enumerate(pools.paths)
        }
        self.entitlements = compute_entitlements(self.tree, st.hosts.total_capacity(), usage)
        return self.entitlements

    def _views(self) -> dict[str, PoolAdmissionView]:
        pools = self.state.pools
        allocations = {
            path: PoolAllocation(nonslack=Resources(*pools.holding[i].tolist()),
                                 non_preemptible=Resources(*pools.holding_np[i].tolist()))
            for i, path in enumerate(pools.paths)
        }
        return admission_views(self.tree, self.entitlements, allocations)

    # ------------------------------------------------------------------------ queues
    def _queues(self) -> tuple[dict[str, list[Gang]], dict[str, tuple[SimJob, int, bool]]]:
        """Each pool's queue head as gangs, and what each gang id stands for."""
        st = self.state
        preemption = self.params.preemption
        queues: dict[str, list[Gang]] = {}
        meaning: dict[str, tuple[SimJob, int, bool]] = {}
        for p, queue in enumerate(st.queues):
            if not queue:
                continue
            path = st.pools.paths[p]
            jobs = sorted(queue.values(), key=lambda j: (-j.priority, j.seq))
            gangs: list[Gang] = []
            for job in jobs[: self.params.admission_window]:
                res = job.spec.resources
                preemptible = job.preemptible or not preemption
                if job.gang_rows:
                    gid = f"{job.index}{_GANG_SUFFIX}"
                    n = len(job.gang_rows)
                    gangs.append(Gang(gid, tuple(str(r) for r in job.gang_rows), path,
                                      job.priority, job.seq * 64, res.scale(n), preemptible,
                                      min_members=n))
                    meaning[gid] = (job, n, True)
                for i, size in enumerate(chunk_sizes(len(job.pending)), start=1):
                    gid = f"{job.index}#{i}"
                    gangs.append(Gang(gid, (f"{job.spec.name}[{size} tasks]",), path,
                                      job.priority, job.seq * 64 + i, res.scale(size),
                                      preemptible))
                    meaning[gid] = (job, size, False)
            queues[path] = gangs
        return queues, meaning

    # ---------------------------------------------------------------------- admission
    def admit(self, now: float) -> int:
        """Admit what fits; returns how many tasks became READY.

        Skipped when nothing changed since a scan that admitted nothing (same
        entitlements, allocations and queues), as the resource manager does; real gangs
        age only on scans that ran.
        """
        st = self.state
        key = (self._ent_version, st.pools.holding.tobytes(),
               st.pools.holding_np.tobytes(), st.queue_version)
        if key == self._admit_key:
            return 0
        queues, meaning = self._queues()
        if not queues:
            return 0
        ages = dict(self.admission.blocked_cycles)
        nexts = self._add_next_task_gangs(queues, meaning)
        ages.update({gid: self._job_age[j] for gid, j in nexts.items()})
        result = admit(self._views(), queues, AdmissionState(ages))
        blocked = result.state.blocked_cycles
        self.admission = AdmissionState({
            gid: age for gid, age in blocked.items() if gid.endswith(_GANG_SUFFIX)})
        job_age: dict[int, int] = {}
        for gid, age in blocked.items():
            if gid.endswith(_GANG_SUFFIX):
                continue
            j = meaning[gid][0].index
            # the next-task gang keeps its age when held back behind another reservation
            new = age if gid in nexts else self._job_age.get(j, 0) + 1
            job_age[j] = max(job_age.get(j, 0), new)
        self._job_age = job_age
        grants = [meaning[gang.gang_id] for gang in result.admitted
                  if gang.gang_id not in nexts]
        admitted = int(self.state.admit(grants, now).size)
        self._admit_key = key if admitted == 0 else None
        return admitted

    def _add_next_task_gangs(self, queues: dict[str, list[Gang]],
                             meaning: dict[str, tuple[SimJob, int, bool]]) -> dict[str, int]:
        """Behind the chunks of each job old enough to reserve this scan, one more gang of
        one task: the job's first task that does not fit, as the resource manager would
        scan it (the chunks admit exactly what fits, in any order of failures). If it
        fails at `max_skips` it reserves after what the job got; if it fits, the whole
        job fitted and it is dropped from the grants (it only held its one task's room in
        the rest of this scan). Returns its gang ids -> job index."""
        nexts: dict[str, int] = {}
        for path, gangs in queues.items():
            out: list[Gang] = []
            for i, gang in enumerate(gangs):
                out.append(gang)
                job, _, real = meaning[gang.gang_id]
                if real or self._job_age.get(job.index, 0) + 1 < _MAX_SKIPS:
                    continue
                after = gangs[i + 1] if i + 1 < len(gangs) else None
                if after is not None and meaning[after.gang_id][0] is job:
                    continue  # not the job's last chunk
                gid = f"{job.index}#next"
                out.append(Gang(gid, (f"{job.spec.name}[next task]",), path, job.priority,
                                job.seq * 64 + 63, job.spec.resources, gang.preemptible))
                meaning[gid] = (job, 1, False)
                nexts[gid] = job.index
            queues[path] = out
        return nexts

    # --------------------------------------------------------------------- preemption
    def preempt(self, now: float) -> PreemptionOutcome:
        st, t = self.state, self.state.tasks
        views = self._views()
        queues = self._queues()[0] if self.params.in_pool_preemption else {}
        n = t.size
        holding = np.flatnonzero(
            ((t.state[:n] == _READY) | (t.state[:n] == _RUNNING))
            & ~st.job_np[t.job[:n]]
        )
        pool_of = st.job_pool[t.job[holding]]
        prio = st.job_priority[t.job[holding]]
        tasks: list[TaskView] = []
        stage2: dict[str, list[Gang]] = {}
        for p, path in enumerate(st.pools.paths):
            mine = pool_of == p
            gangs = self._candidates(path, views[path], queues.get(path, []), mine, prio)
            rows = holding[mine]
            if gangs is None or rows.size == 0:
                continue
            tasks += self._task_views(rows, path)
            if gangs:
                low = int(prio[mine].min())
                stage2[path] = [g for g in gangs if g.priority > low]
        plan = plan_preemption(views, tasks, stage2, self.preemption,
                               sustained_cycles=self.params.sustained_cycles,
                               in_pool=self.params.in_pool_preemption)
        self.preemption = plan.state
        victims = np.array(sorted(int(v.task_id) for v in plan.victims), dtype=np.int64)
        ready = victims[t.state[victims] == _READY]
        running = victims[t.state[victims] == _RUNNING]
        st.unready(ready)
        spent = st.stop_running(running, (S.PREEMPTING, S.KILLED), now)
        for p in st.pool_of(victims).tolist():
            st.pools.preempted[p] += 1
        t.new_run(running)
        st.enqueue(running, now)
        return PreemptionOutcome(ready, running, spent.sum(axis=0))

    def _candidates(self, path: str, view: PoolAdmissionView, gangs: list[Gang],
                    mine: np.ndarray, prio: np.ndarray) -> list[Gang] | None:
        """Narrow `mine` (this pool's preemptible holding tasks) to the tasks the
        preemption core could choose, and return the pool's gangs for stage 2; None
        when it could choose none (see the module docstring).

        Stage 1 processes a pool only when it is over its entitlement for the
        `sustained_cycles`-th time in a row; stage 2 only takes tasks below a pending
        gang's priority, and only for a gang that does not fit the pool's free
        entitlement (if all of them fit together, none is short).
        """
        alloc = np.array(_vec(view.allocation.nonslack))
        ent = np.array(_vec(view.nonslack_entitlement))
        over = bool((alloc > ent).any())
        seen = self.preemption.over_cycles.get(path, 0)
        if over and seen + 1 >= self.params.sustained_cycles:
            return gangs
        if not gangs:
            return None
        mine &= prio < max(g.priority for g in gangs)
        if not mine.any():
            return None
        if not over:
            low = int(prio[mine].min())
            need = Resources()
            for g in gangs:
                if g.priority > low:
                    need = need + g.resources
            if need.fits_in(view.nonslack_entitlement - view.allocation.nonslack):
                return None
        return gangs

    def _task_views(self, rows: IntArray, path: str) -> list[TaskView]:
        st, t = self.state, self.state.tasks
        jobs = st.jobs
        out = []
        for r, j, s, seq in zip(rows.tolist(), t.job[rows].tolist(), t.state[rows].tolist(),
                                t.started_seq[rows].tolist(), strict=True):
            job = jobs[j]
            out.append(TaskView(str(r), path, _STATE_NAMES[s], job.priority,
                                job.spec.resources, True, False, seq))
        return out

    # ---------------------------------------------------------------------- placement
    def place(self, now: float) -> RoundOutcome | None:
        """One placement round over the READY tasks; None when skipped (no READY task,
        no host offered, or nothing changed since a round that placed nothing)."""
        st, t = self.state, self.state.tasks
        if not st.ready:
            return None
        key = (st.hosts.freed, st.admitted)
        if key == self._last_round:
            return None
        cap = self.params.max_round_tasks
        rows = np.fromiter(st.ready, dtype=np.int64, count=len(st.ready))
        if cap:
            rows = rows[:cap]
        table = st.hosts.offers(st.req(rows).min(axis=0))
        if table is None:
            self._last_round = key
            return None
        requests = self._requests(rows)
        start = self._clock() if self._clock else 0.0
        result = place(table, requests)
        wall = (self._clock() - start) if self._clock else 0.0
        placed = np.fromiter((int(p.task_id) for p in result.placements), dtype=np.int64,
                             count=len(result.placements))
        index = st.hosts.index
        hosts = np.fromiter((index[p.host] for p in result.placements), dtype=np.int64,
                            count=len(result.placements))
        unplaced = np.setdiff1d(rows, placed)
        delays = now - t.queued_at[placed]
        st.place(placed, hosts, unplaced, now)
        st.schedule_end(placed, now + t.duration[placed], self.params.cycle_s)
        self._last_round = key if placed.size == 0 else None
        return RoundOutcome(placed, unplaced, delays, wall)

    def _requests(self, rows: IntArray) -> list[TaskRequest]:
        st, t = self.state, self.state.tasks
        shapes = self._shapes
        out: list[TaskRequest] = []
        append = out.append
        for r, j, gang in zip(rows.tolist(), t.job[rows].tolist(), t.gang[rows].tolist(),
                              strict=True):
            shape = shapes.get(j)
            if shape is None:
                shape = shapes[j] = self._shape(st.jobs[j])
            name, res, gang_id, size, strategy, priority = shape
            append(TaskRequest(str(r), name, res, (), None, _NO_LABELS,
                               gang_id if gang else None, size if gang else 1, strategy,
                               False, priority))
        return out

    @staticmethod
    def _shape(job: SimJob) -> tuple[str, Resources, str, int, Strategy, int]:
        """What every task request of a job shares."""
        spec = job.spec
        return (spec.name, spec.resources, f"{spec.name}{_GANG_SUFFIX}", spec.instances,
                Strategy.SPREAD if spec.service else Strategy.PACK, job.priority)

    # ------------------------------------------------------------------------ timeouts
    def expire_ready(self, now: float) -> IntArray:
        """READY tasks not placed within `ready_timeout_s` go back to PENDING."""
        st = self.state
        if not st.ready or self.params.ready_timeout_s <= 0:
            return np.zeros(0, dtype=np.int64)
        rows = np.fromiter(st.ready, dtype=np.int64, count=len(st.ready))
        old = rows[st.tasks.ready_at[rows] < now - self.params.ready_timeout_s]
        st.unready(old)
        return old


def _vec(r: Resources) -> tuple[float, float, float, float]:
    return (r.cpu, r.memory, r.disk, r.gpu)


def entitlement_cpu(ents: Mapping[str, PoolEntitlement], paths: tuple[str, ...]) -> list[float]:
    return [ents[p].entitlement.cpu if p in ents else 0.0 for p in paths]
