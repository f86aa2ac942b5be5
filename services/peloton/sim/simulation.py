"""The discrete-event simulation: the event loop and what each event does.

`Simulation(scenario, rng, clock=None)` is deterministic for a given scenario and
Generator: events are ordered by (time, kind, sequence) (`events.py`), the workload and
host failures draw from streams spawned from `rng`, and every iteration order is fixed.
Simulated time only; `clock` (e.g. `time.perf_counter`, passed in by the shell) is read
only to report wall-time figures and never influences a decision.

Events:
- JOB_SUBMITTED: a job's tasks are created and queued (INITIALIZED -> PENDING); a batch
  arrival also schedules the next one.
- CYCLE k (every `cycle_s`): tasks whose run ended in the last cycle finish (RUNNING ->
  SUCCEEDED), READY tasks past their timeout are requeued, then one scheduling cycle
  (`scheduler.py`: entitlement, preemption every entitlement cycle, admission,
  placement) and the metrics of the cycle.
- JOB_ENDED: a service job is stopped; its tasks are killed (RUNNING -> KILLING ->
  KILLED, waiting ones -> KILLED).
- HOST_FAILED / HOST_RETURNED: a failed host's running tasks are LOST and start a new
  run (PENDING); the host returns after its repair time.

`run(progress)` runs to `duration_s` and returns `SimResult`; `step()` runs one event
(tests use it to check invariants after every event).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from peloton.jobmgr.domain.states import TaskState

from .events import BATCH_STREAM, Event, EventQueue, Kind, schedule_start
from .metrics import Recorder
from .scenario import Scenario
from .scheduler import Scheduler, entitlement_cpu
from .state import SimState
from .tasktable import CODE, IntArray
from .workload import JobSpec, Workload

__all__ = ["Simulation", "SimResult"]

S = TaskState
_PENDING, _READY = CODE[S.PENDING], CODE[S.READY]


@dataclass
class SimResult:
    """Metrics of one run. `summary` and `series` are pure functions of scenario and
    seed; `performance` holds the wall-clock figures (empty without a clock)."""

    summary: dict[str, Any]
    series: dict[str, Any]
    performance: dict[str, float] = field(default_factory=dict)
    delays: dict[str, np.ndarray] = field(default_factory=dict)
    """Queueing delay of every started run, by priority tier (for CDF plots)."""


class Simulation:
    def __init__(self, scenario: Scenario, rng: np.random.Generator,
                 clock: Callable[[], float] | None = None) -> None:
        workload_rng, failure_rng = rng.spawn(2)
        self.scenario = scenario
        self.params = scenario.scheduler
        self.state = SimState(scenario)
        self.workload = Workload(scenario, workload_rng)
        self._failures = failure_rng
        self.scheduler = Scheduler(self.state, self.params, clock)
        self.metrics = Recorder(self.state.pools.paths, [t.name for t in scenario.tiers])
        self.events = EventQueue()
        self.now = 0.0
        self.processed = 0
        self._clock = clock
        self._place_wall = 0.0
        self._initial: list[JobSpec] = self.workload.initial_jobs()
        self._ent_every = max(1, round(self.params.entitlement_cycle_s / self.params.cycle_s))
        self._sample_every = max(1, round(self.params.sample_s / self.params.cycle_s))
        self._schedule_start()

    # ---------------------------------------------------------------------- schedule
    def _schedule_start(self) -> None:
        schedule_start(self.events, self.scenario.duration_s,
                       [spec.submit_s for spec in self._initial],
                       self.workload.first_batch_arrival(),
                       self.scenario.failures.host_mtbf_s, len(self.state.hosts), self._failures)

    # -------------------------------------------------------------------------- loop
    def step(self) -> Event | None:
        """Run the next event at or before the end; None when there is none."""
        if self.events.peek_time() > self.scenario.duration_s:
            return None
        event = self.events.pop()
        self.now = event.time
        self.processed += 1
        handler = self._handlers[event.kind]
        handler(self, event)
        return event

    def run(self, progress: Callable[[float, float], None] | None = None) -> SimResult:
        """Run to the end; `progress(now, end)` is called after every cycle."""
        start = self._clock() if self._clock else 0.0
        end = self.scenario.duration_s
        while True:
            event = self.step()
            if event is None:
                break
            if progress is not None and event.kind is Kind.CYCLE:
                progress(self.now, end)
        wall = (self._clock() - start) if self._clock else 0.0
        return self.result(wall)

    def result(self, wall_s: float = 0.0) -> SimResult:
        summary = self._summary()
        perf: dict[str, float] = {}
        if self._clock is not None:
            events = summary["events"]
            placements = summary["placements"]
            perf = {
                "wall_s": round(wall_s, 3),
                "events_per_s": round(events / wall_s, 1) if wall_s > 0 else 0.0,
                "placements_per_s": round(placements / wall_s, 1) if wall_s > 0 else 0.0,
                "placement_wall_s": round(self._place_wall, 3),
                "placements_per_placement_s": round(placements / self._place_wall, 1)
                if self._place_wall > 0 else 0.0,
            }
        delays, tiers, _ = self.metrics.delays()
        by_tier = {name: delays[tiers == i] for i, name in enumerate(self.metrics.tiers)}
        return SimResult(summary, self.metrics.series(), perf, by_tier)

    # ---------------------------------------------------------------------- handlers
    def _on_submit(self, event: Event) -> None:
        if event.payload == BATCH_STREAM:
            spec, nxt = self.workload.next_batch(event.time)
            if nxt is not None:
                self.events.push(nxt, Kind.JOB_SUBMITTED, BATCH_STREAM)
        else:
            spec = self._initial[event.payload]
        job = self.state.add_job(spec, self.now)
        self.metrics.demand_appeared(job.pool, self.now)
        if spec.service and spec.end_s <= self.scenario.duration_s:
            self.events.push(max(spec.end_s, self.now), Kind.JOB_ENDED, job.index)

    def _on_job_end(self, event: Event) -> None:
        st = self.state
        rows = st.job_rows(st.jobs[event.payload])
        states = st.tasks.state[rows]
        waiting = rows[(states == _PENDING) | (states == _READY)]
        running = rows[states == CODE[S.RUNNING]]
        st.kill_waiting(waiting)
        st.stop_running(running, (S.KILLING, S.KILLED), self.now)
        self.metrics.killed += int(waiting.size + running.size)

    def _on_host_failed(self, event: Event) -> None:
        st = self.state
        h = event.payload
        rows = st.rows_on_host(h)
        t = st.tasks
        done = rows[t.started_at[rows] + t.duration[rows] <= self.now]
        lost = rows[t.started_at[rows] + t.duration[rows] > self.now]
        self._finish(done)
        spent = st.stop_running(lost, (S.LOST,), self.now)
        self.metrics.lost += int(lost.size)
        self.metrics.wasted += spent.sum(axis=0)
        self.metrics.host_failures += 1
        self._requeue(lost)
        st.hosts.set_up(h, False)
        repair = float(self._failures.exponential(self.scenario.failures.repair_s))
        self.events.push(self.now + repair, Kind.HOST_RETURNED, h)

    def _on_host_returned(self, event: Event) -> None:
        self.state.hosts.set_up(event.payload, True)
        mtbf = self.scenario.failures.host_mtbf_s
        nxt = self.now + float(self._failures.exponential(mtbf))
        if nxt <= self.scenario.duration_s:
            self.events.push(nxt, Kind.HOST_FAILED, event.payload)

    def _on_cycle(self, event: Event) -> None:
        k = event.payload
        now = self.now
        st, sch = self.state, self.scheduler
        self._finish(st.take_due(k))
        self._requeued_demand(sch.expire_ready(now))
        sch.entitle()
        if self.params.preemption and k % self._ent_every == 0:
            out = sch.preempt(now)
            if out.ready.size or out.running.size:
                self.metrics.preempted_ready += int(out.ready.size)
                self.metrics.preempted_running += int(out.running.size)
                self.metrics.wasted += out.wasted
                self._requeued_demand(out.ready)
                self._requeued_demand(out.running)
                sch.entitle()
        sch.admit(now)
        round_ = sch.place(now)
        if round_ is not None:
            self._place_wall += round_.wall_s
            placed = round_.placed
            jobs = st.tasks.job[placed]
            self.metrics.started(round_.delays, st.job_tier[jobs], st.job_size[jobs])
        self._cycle_metrics(k)
        nxt = (k + 1) * self.params.cycle_s
        if nxt <= self.scenario.duration_s:
            self.events.push(nxt, Kind.CYCLE, k + 1)

    _handlers: dict[Kind, Callable[[Simulation, Event], None]] = {
        Kind.JOB_SUBMITTED: _on_submit,
        Kind.JOB_ENDED: _on_job_end,
        Kind.HOST_FAILED: _on_host_failed,
        Kind.HOST_RETURNED: _on_host_returned,
        Kind.CYCLE: _on_cycle,
    }

    # ----------------------------------------------------------------------- helpers
    def _finish(self, rows: IntArray) -> None:
        self.state.stop_running(rows, (S.SUCCEEDED,), self.now)
        self.metrics.completed += int(rows.size)

    def _requeue(self, rows: IntArray) -> None:
        """Finished runs (lost, preempted) start again: a new run, PENDING."""
        self.state.tasks.new_run(rows)
        self.state.enqueue(rows, self.now)
        self._requeued_demand(rows)

    def _requeued_demand(self, rows: IntArray) -> None:
        for p in np.unique(self.state.pool_of(rows)).tolist():
            self.metrics.demand_appeared(p, self.now)

    def _cycle_metrics(self, k: int) -> None:
        st = self.state
        pools = st.pools
        ents = entitlement_cpu(self.scheduler.entitlements, pools.paths)
        entitled = np.array(ents)
        running = pools.running[:, 0].copy()
        demand = (pools.pending[:, 0] + pools.holding[:, 0]).copy()
        self.metrics.cycle_end(self.now, entitled, running, demand, self._tolerance())
        if k % self._sample_every == 0:
            hosts = st.hosts
            capacity = hosts.capacity[hosts.up].sum(axis=0)
            allocated = pools.running.sum(axis=0)
            used = pools.used.sum(axis=0)
            self.metrics.sample(self.now, capacity, allocated, used, entitled, running, demand)

    def _tolerance(self) -> np.ndarray:
        """Per pool: cpu of the smallest task it waits for (queued or READY)."""
        st = self.state
        tol = np.full(len(st.pools), np.inf)
        for p, queue in enumerate(st.queues):
            if queue:
                tol[p] = min(float(st.job_req[j, 0]) for j in queue)
        if st.ready:
            rows = np.fromiter(st.ready, dtype=np.int64, count=len(st.ready))
            np.minimum.at(tol, st.pool_of(rows), st.req(rows)[:, 0])
        return np.where(np.isinf(tol), 0.0, tol)

    def _summary(self) -> dict[str, Any]:
        st = self.state
        m = self.metrics.summary()
        counts = st.tasks.counts()
        ended = self.metrics.completed + m["preempted_running"] + m["lost"] + m["killed"]
        out: dict[str, Any] = {
            "engine": "fast",
            "scenario": self.scenario.name,
            "seed": self.scenario.seed,
            "hosts": len(st.hosts),
            "tasks": int(st.tasks.size),
            "jobs": len(st.jobs),
            "simulated_s": self.scenario.duration_s,
            "cycles": int(self.scenario.duration_s // self.params.cycle_s) + 1,
            "events": self.processed + m["placements"] + ended,
            "transitions": st.tasks.transitions,
        }
        out.update(m)
        out["final_states"] = counts
        out["queued_at_end"] = counts.get("PENDING", 0) + counts.get("READY", 0)
        out["running_at_end"] = counts.get("RUNNING", 0)
        pools = self.metrics.pool_summary()
        for i, path in enumerate(st.pools.paths):
            pools[path].update({
                "reservation_cpu": self.scenario.tree.config(path).reservation.cpu,
                "placements": int(st.pools.placements[i]),
                "preempted": int(st.pools.preempted[i]),
            })
        out["pools"] = pools
        return out
