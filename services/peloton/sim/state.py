"""The simulator's books and the only operations that change them.

`SimState` holds the tasks (`TaskTable`), jobs, hosts (`HostBook`), per-pool totals and
the queues. Every change of a task's state goes through one method here, which moves
the task through the state machine and keeps every book consistent with it:

- pool `pending`: PENDING tasks (demand the resource manager has not admitted);
- pool `holding`: READY and RUNNING tasks (what the resource manager counts as
  allocation), `holding_np` the non-preemptible part of it;
- pool `running` and host `allocated`: RUNNING tasks (what is on hosts); `used` what
  they actually use;
- a job's `pending` list (FIFO, instance order) and its pool's queue of such jobs;
- `ready`: READY tasks in admission order (the next placement round's input).

All methods take arrays of task rows and are vectorised; none reads a clock or draws a
random number (`now` is passed in).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from peloton.jobmgr.domain.states import TaskState
from peloton.model.resources import Resources

from .hostbook import HostBook
from .scenario import Scenario
from .tasktable import CODE, TaskTable
from .workload import JobSpec

__all__ = ["SimJob", "PoolBook", "SimState", "SIZE_BUCKETS", "size_bucket"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
S = TaskState
_READY = CODE[S.READY]
_PENDING = CODE[S.PENDING]
_RUNNING = CODE[S.RUNNING]

#: Job-size buckets for queueing-delay figures: (label, largest task count in it).
SIZE_BUCKETS: tuple[tuple[str, float], ...] = (
    ("1", 1), ("2-10", 10), ("11-100", 100), ("101-1000", 1000), (">1000", float("inf")),
)


def size_bucket(instances: int) -> int:
    return next(i for i, (_, top) in enumerate(SIZE_BUCKETS) if instances <= top)


@dataclass(slots=True, eq=False)
class SimJob:
    index: int
    spec: JobSpec
    pool: int
    seq: int
    first: int
    priority: int
    preemptible: bool
    pending: list[int] = field(default_factory=list)
    gang_rows: list[int] | None = None
    """The first run's gang members while they wait to be admitted together."""

    @property
    def pending_count(self) -> int:
        return len(self.pending) + (len(self.gang_rows) if self.gang_rows else 0)


class PoolBook:
    """Per leaf pool totals, [pool, kind]."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths: tuple[str, ...] = tuple(paths)
        self.index = {p: i for i, p in enumerate(self.paths)}
        n = len(self.paths)
        self.pending = np.zeros((n, 4))
        self.holding = np.zeros((n, 4))
        self.holding_np = np.zeros((n, 4))
        self.running = np.zeros((n, 4))
        self.used = np.zeros((n, 4))
        self.placements = np.zeros(n, dtype=np.int64)
        self.preempted = np.zeros(n, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.paths)


def _rows_of(rows: Iterable[int]) -> IntArray:
    return np.fromiter(rows, dtype=np.int64)


class SimState:
    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.tasks = TaskTable()
        self.hosts = HostBook(scenario.hosts)
        self.pools = PoolBook(scenario.tree.leaves())
        self.tiers = {t.name: i for i, t in enumerate(scenario.tiers)}
        self.jobs: list[SimJob] = []
        self.queues: list[dict[int, SimJob]] = [{} for _ in range(len(self.pools))]
        self.ready: dict[int, None] = {}
        self.due: dict[int, list[tuple[IntArray, npt.NDArray[np.int32]]]] = {}
        self.started_seq = 0
        self.admitted = 0
        """Bumped whenever tasks become READY (new work for the placement round)."""
        self.queue_version = 0
        """Bumped whenever a pool's queue changes."""
        # per-job columns for vectorised lookups (grown with the job list)
        self.job_req = np.zeros((0, 4))
        self.job_pool = np.zeros(0, np.int64)
        self.job_tier = np.zeros(0, np.int64)
        self.job_size = np.zeros(0, np.int64)
        self.job_np = np.zeros(0, np.bool_)
        self.job_priority = np.zeros(0, np.int64)

    # ------------------------------------------------------------------------- lookups
    def req(self, rows: IntArray) -> FloatArray:
        """Each row's request, [row, kind]."""
        return self.job_req[self.tasks.job[rows]]

    def pool_of(self, rows: IntArray) -> IntArray:
        return self.job_pool[self.tasks.job[rows]]

    # ---------------------------------------------------------------------------- jobs
    def add_job(self, spec: JobSpec, now: float) -> SimJob:
        """Create the job's tasks (INITIALIZED) and queue them (PENDING)."""
        j = len(self.jobs)
        if j >= self.job_req.shape[0]:
            grow = max(64, 2 * self.job_req.shape[0])
            self.job_req = np.resize(self.job_req, (grow, 4))
            for name in ("job_pool", "job_tier", "job_size", "job_np", "job_priority"):
                setattr(self, name, np.resize(getattr(self, name), grow))
        tier = spec.tier
        r = spec.resources
        self.job_req[j] = (r.cpu, r.memory, r.disk, r.gpu)
        pool = self.pools.index[spec.pool]
        self.job_pool[j] = pool
        self.job_tier[j] = self.tiers[tier.name]
        self.job_size[j] = size_bucket(spec.instances)
        self.job_np[j] = not tier.preemptible
        self.job_priority[j] = tier.priority
        rows = self.tasks.add(j, spec.durations, spec.usage, spec.gang)
        job = SimJob(j, spec, pool, j, int(rows[0]), tier.priority, tier.preemptible)
        self.jobs.append(job)
        self.enqueue(rows, now)
        return job

    # ------------------------------------------------------------------ state changes
    def enqueue(self, rows: IntArray, now: float) -> None:
        """INITIALIZED -> PENDING: the rows' runs wait for admission."""
        if rows.size == 0:
            return
        t = self.tasks
        t.move(rows, S.PENDING)
        t.queued_at[rows] = now
        self._add_pending(rows, front=False)

    def _add_pending(self, rows: IntArray, front: bool) -> None:
        t = self.tasks
        self.queue_version += 1
        jobs = t.job[rows]
        req = self.job_req[jobs]
        pools = self.job_pool[jobs]
        if jobs[0] == jobs[-1] and (jobs == jobs[0]).all():  # one job: the common case
            self.pools.pending[pools[0]] += req.sum(axis=0)
            self._queue(self.jobs[int(jobs[0])], rows, front)
            return
        np.add.at(self.pools.pending, pools, req)
        order = np.argsort(jobs, kind="stable")
        rows, jobs = rows[order], jobs[order]
        cut = np.flatnonzero(np.diff(jobs)) + 1
        for chunk in np.split(rows, cut):
            self._queue(self.jobs[int(t.job[chunk[0]])], chunk, front)

    def _queue(self, job: SimJob, rows: IntArray, front: bool) -> None:
        members = rows.tolist()
        if self.tasks.gang[rows[0]] and job.gang_rows is None and not job.pending and \
                len(members) == job.spec.instances:
            job.gang_rows = members
        elif front:
            job.pending[:0] = members
        else:
            job.pending.extend(members)
        self.queues[job.pool][job.index] = job

    def admit(self, grants: Iterable[tuple[SimJob, int, bool]], now: float) -> IntArray:
        """PENDING -> READY for each (job, count, gang): the job's gang (gang=True) or
        its first `count` pending tasks. They now hold allocation in their pool."""
        taken: list[int] = []
        for job, count, gang in grants:
            if gang:
                assert job.gang_rows is not None
                taken += job.gang_rows
                job.gang_rows = None
            else:
                taken += job.pending[:count]
                del job.pending[:count]
            if job.pending_count == 0:
                self.queues[job.pool].pop(job.index, None)
        rows = np.array(taken, dtype=np.int64)
        if rows.size == 0:
            return rows
        self.queue_version += 1
        t = self.tasks
        t.move(rows, S.READY)
        t.ready_at[rows] = now
        jobs = t.job[rows]
        pools, req = self.job_pool[jobs], self.job_req[jobs]
        np.subtract.at(self.pools.pending, pools, req)
        np.add.at(self.pools.holding, pools, req)
        nonpre = self.job_np[jobs]
        if nonpre.any():
            np.add.at(self.pools.holding_np, pools[nonpre], req[nonpre])
        self.ready.update(dict.fromkeys(taken))
        self.admitted += 1
        return rows

    def _release_holding(self, rows: IntArray) -> None:
        pools, req = self.pool_of(rows), self.req(rows)
        np.subtract.at(self.pools.holding, pools, req)
        nonpre = self.job_np[self.tasks.job[rows]]
        if nonpre.any():
            np.subtract.at(self.pools.holding_np, pools[nonpre], req[nonpre])

    def unready(self, rows: IntArray) -> None:
        """READY -> PENDING (preempted before placement, or not placed in time): the
        allocation is released and the tasks queue again, at the front of their job."""
        if rows.size == 0:
            return
        self.tasks.move(rows, S.PENDING)
        self._release_holding(rows)
        for r in rows.tolist():
            del self.ready[r]
        self._ungang(rows)
        self._add_pending(rows, front=True)

    def _ungang(self, rows: IntArray) -> None:
        """Gang members leaving READY (already moved to PENDING): a gang leaving whole
        queues again as a gang; one that lost only some members can no longer start
        whole, so all its members continue as independent tasks."""
        t = self.tasks
        gang = rows[t.gang[rows]]
        for j in np.unique(t.job[gang]).tolist():
            job = self.jobs[j]
            span = self.job_rows(job)
            if (t.gang[span] & (t.state[span] == _READY)).any():
                t.gang[span] = False

    def place(self, placed: IntArray, hosts: IntArray, unplaced: IntArray, now: float) -> None:
        """A placement round's outcome: READY -> PLACING, then PLACED -> LAUNCHING ->
        RUNNING for the placed rows (on `hosts`) and back to READY for the others."""
        t = self.tasks
        t.move(np.concatenate((placed, unplaced)), S.PLACING)
        t.move(unplaced, S.READY)
        if placed.size == 0:
            return
        for state in (S.PLACED, S.LAUNCHING, S.RUNNING):
            t.move(placed, state)
        for r in placed.tolist():
            del self.ready[r]
        req = self.req(placed)
        pools = self.pool_of(placed)
        self.hosts.allocate(hosts, req)
        np.add.at(self.pools.running, pools, req)
        np.add.at(self.pools.used, pools, req * t.usage[placed, None])
        np.add.at(self.pools.placements, pools, 1)
        t.host[placed] = hosts
        t.started_at[placed] = now
        t.started_seq[placed] = np.arange(self.started_seq + 1, self.started_seq + 1 + placed.size)
        self.started_seq += int(placed.size)

    def stop_running(
        self, rows: IntArray, via: tuple[TaskState, ...], now: float
    ) -> FloatArray:
        """RUNNING -> via... (e.g. (SUCCEEDED,) or (PREEMPTING, KILLED)): frees the host
        and the pool. Returns each row's resource-seconds of this run, [row, kind]."""
        t = self.tasks
        for state in via:
            t.move(rows, state)
        if rows.size == 0:
            return np.zeros((0, 4))
        req = self.req(rows)
        pools = self.pool_of(rows)
        self.hosts.release(t.host[rows].astype(np.int64), req)
        np.subtract.at(self.pools.running, pools, req)
        np.subtract.at(self.pools.used, pools, req * t.usage[rows, None])
        self._release_holding(rows)
        return req * np.maximum(now - t.started_at[rows], 0.0)[:, None]

    def kill_waiting(self, rows: IntArray) -> None:
        """PENDING or READY -> KILLED (their job was stopped)."""
        if rows.size == 0:
            return
        t = self.tasks
        ready = rows[t.state[rows] == _READY]
        pending = rows[t.state[rows] == _PENDING]
        t.move(rows, S.KILLED)
        if ready.size:
            self._release_holding(ready)
            for r in ready.tolist():
                del self.ready[r]
        if pending.size:
            self.queue_version += 1
            np.subtract.at(self.pools.pending, self.pool_of(pending), self.req(pending))
            gone = set(pending.tolist())
            for j in np.unique(t.job[pending]).tolist():
                job = self.jobs[j]
                job.pending = [r for r in job.pending if r not in gone]
                if job.gang_rows is not None and gone.intersection(job.gang_rows):
                    job.gang_rows = None
                if job.pending_count == 0:
                    self.queues[job.pool].pop(job.index, None)

    def schedule_end(self, rows: IntArray, at: FloatArray, cycle_s: float) -> None:
        """Remember to finish `rows` (this run) in the cycle at or after `at`."""
        finite = np.isfinite(at)
        rows, at = rows[finite], at[finite]
        if rows.size == 0:
            return
        cycles = np.ceil(at / cycle_s - 1e-9).astype(np.int64)
        order = np.argsort(cycles, kind="stable")
        rows, cycles = rows[order], cycles[order]
        runs = self.tasks.run[rows]
        cut = np.flatnonzero(np.diff(cycles)) + 1
        for part_rows, part_runs, c in zip(np.split(rows, cut), np.split(runs, cut),
                                           cycles[np.r_[0, cut]].tolist(), strict=True):
            self.due.setdefault(int(c), []).append((part_rows, part_runs))

    def take_due(self, cycle: int) -> IntArray:
        """Rows whose run is due to end by `cycle` and still RUNNING that run."""
        parts = self.due.pop(cycle, [])
        if not parts:
            return np.zeros(0, dtype=np.int64)
        rows = np.concatenate([r for r, _ in parts])
        runs = np.concatenate([u for _, u in parts])
        t = self.tasks
        live = (t.state[rows] == _RUNNING) & (t.run[rows] == runs)
        return np.sort(rows[live])

    # ------------------------------------------------------------------------- views
    def rows_on_host(self, host: int) -> IntArray:
        t = self.tasks
        n = t.size
        return np.flatnonzero((t.host[:n] == host) & (t.state[:n] == _RUNNING)).astype(np.int64)

    def job_rows(self, job: SimJob) -> IntArray:
        return np.arange(job.first, job.first + job.spec.instances, dtype=np.int64)

    def resources(self, j: int, count: int = 1) -> Resources:
        return Resources(*(self.job_req[j] * count).tolist())


