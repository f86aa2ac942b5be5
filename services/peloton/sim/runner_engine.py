"""`peloton sim run --engine runner`: a scenario on the production services end to end.

`RunnerSimulation(scenario, rng, clock=None, step_ms=100)` runs the four scheduling
services (job manager, resource manager, placement engine, host manager) and one
simulated agent per host in the in-memory runner (`peloton.runner.MemoryRunner`) under
simulated time, and feeds it the scenario as clients and hosts would:

- pools: one ResourcePoolCreateRequested per pool (parents first), then the cluster runs
  until every agent has registered (the scenario's t = 0);
- jobs: the SAME workload as the fast engine (`Workload` on the same spawned Generator
  streams, so the same jobs at the same times): each job is a JobSubmitted of a BATCH job
  (a gang job: minimumRunningInstances = instances; each task `sleep <its duration>`,
  per-instance overrides) or a SERVICE job (SPREAD_JOB), in its pool, priority and
  preemptibility of its tier; a service whose lifetime ends in the run gets a
  JobKillRequested at that time;
- host failures: the SAME failure schedule (the fast engine's draws in the same order):
  a failure is a kill -9 of the host's agent (the host manager finds the host lost when
  its heartbeats stop, the job manager reruns what ran there), a return is a new agent
  incarnation on the host;
- the resource manager runs with the scenario's `entitlement_cycle_s`,
  `sustained_cycles`, `preemption` and `in_pool_preemption`; the services' other
  settings are their production defaults (admission and placement run on their own
  ticks, not every `cycle_s`).

Figures: every `cycle_s` the ledger (`runner_ledger.py`) folds the log and the fast
engine's `Recorder` takes the same inputs (per leaf pool allocation, entitlement from
the resource manager's newest EntitlementUpdated, demand; utilization over the capacity
of the hosts up), so `SimResult`, metrics.json, the plots and the table are the fast
engine's. Deterministic for a scenario and seed (the runner's interleavings are seeded
by the scenario's seed). `events` counts the records appended to the log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from peloton.hostmgr.service import HostManagerCore
from peloton.jobmgr.service import JobManagerCore
from peloton.model.event import Event as BusEvent
from peloton.placement.service import PlacementCore
from peloton.resmgr.domain.poolbook import config_record
from peloton.resmgr.service import ResourceManagerCore
from peloton.runner.memory import MemoryRunner

from .events import BATCH_STREAM, Event, EventQueue, Kind, schedule_start
from .hostbook import HostBook
from .metrics import Recorder
from .runner_ledger import JobInfo, LogLedger
from .scenario import Scenario
from .simulation import SimResult
from .state import size_bucket
from .workload import JobSpec, Workload

__all__ = ["RunnerSimulation", "job_submitted"]

_SERVICE_SLEEP_S = 10**9  # a service task runs until its job is stopped
_SETUP_MAX_MS = 60_000


def _sleep(seconds: float) -> str:
    return f"sleep {seconds:.3f}"


def job_submitted(spec: JobSpec, at_ms: int) -> dict[str, Any]:
    """The JobSubmitted body of a simulated job (see the module doc)."""
    r = spec.resources
    n = spec.instances
    default = _sleep(_SERVICE_SLEEP_S) if spec.service else _sleep(float(spec.durations[0]))
    task = {"cpu_limit": r.cpu, "mem_limit_mb": r.memory, "disk_limit_mb": r.disk,
            "gpu_limit": r.gpu or None, "command": default, "env": None,
            "constraint_json": None, "max_failures": 0, "labels": None, "ports": None,
            "kill_grace_period_s": None}
    overrides: dict[str, dict[str, Any]] = {}
    if not spec.service:
        for i, d in enumerate(spec.durations.tolist()):
            command = _sleep(d)
            if command != default:
                overrides[str(i)] = {"command": command}
    return {"job_id": spec.name, "submitted_at": at_ms, "name": spec.name, "owner": "sim",
            "description": "", "type": "SERVICE" if spec.service else "BATCH",
            "labels": {}, "instance_count": n, "respool": spec.pool,
            "sla": {"priority": spec.tier.priority, "preemptible": spec.tier.preemptible,
                    "revocable": False,
                    "minimum_running_instances": n if spec.gang else 1,
                    "maximum_running_instances": 0},
            "default_config": task, "instance_config": overrides,
            "placement_strategy": "SPREAD_JOB" if spec.service else "PACK_HOST"}


class RunnerSimulation:
    def __init__(self, scenario: Scenario, rng: np.random.Generator,
                 clock: Callable[[], float] | None = None, step_ms: int = 500) -> None:
        workload_rng, failure_rng = rng.spawn(2)
        self.scenario = scenario
        self.params = p = scenario.scheduler
        self.workload = Workload(scenario, workload_rng)
        self._failures = failure_rng
        self._clock = clock
        self.hosts = HostBook(scenario.hosts)
        self.paths = tuple(scenario.tree.leaves())
        self.tiers = [t.name for t in scenario.tiers]
        self.metrics = Recorder(self.paths, self.tiers)
        self.runner = runner = MemoryRunner(scenario.seed, step_ms=step_ms,
                                            snapshot_interval_ms=None)
        runner.add_service("jobmgr", JobManagerCore)
        runner.add_service("resmgr", lambda: ResourceManagerCore(
            entitlement_cycle_s=p.entitlement_cycle_s, preemption_cycles=p.sustained_cycles,
            preemption=p.preemption, in_pool_preemption=p.in_pool_preemption,
            tick_interval=p.cycle_s))
        runner.add_service("placement", PlacementCore)
        runner.add_service("hostmgr", HostManagerCore)
        for i, name in enumerate(self.hosts.names):
            cpu, mem, disk, gpu = self.hosts.capacity[i].tolist()
            runner.add_agent(name, cpu=cpu, memory=mem, disk=disk, gpu=gpu,
                             labels=self.hosts.labels(i))
        self.ledger = LogLedger(runner, self.paths)
        self.events = EventQueue()
        self._initial = self.workload.initial_jobs()
        self.processed = 0
        self.host_failures = 0
        self._stops: list[str] = []  # services stopped by JOB_ENDED (payload: index)
        self._setup()
        self.t0 = runner.now
        self._schedule_start()

    # ------------------------------------------------------------------------ setup
    def _setup(self) -> None:
        """Pools (parents first), then run until every host is offered to placement."""
        runner = self.runner
        paths = [(f"{parent.rstrip('/')}/{config.name}", config)
                 for parent, config in self.scenario.pools]
        for i, (path, config) in enumerate(sorted(paths, key=lambda x: x[0].count("/"))):
            runner.publish([BusEvent("ResourcePoolCreateRequested", path, {
                "request_id": f"sim-{i}", "at": runner.now, "path": path,
                "config": config_record(config)})])
        hosts = len(self.hosts)
        runner.run_until(lambda: len(runner.core("hostmgr").book.hosts) >= hosts
                         and bool(runner.core("resmgr").manager.cycle), _SETUP_MAX_MS)
        runner.run_for(1000)

    def _schedule_start(self) -> None:
        schedule_start(self.events, self.scenario.duration_s,
                       [spec.submit_s for spec in self._initial],
                       self.workload.first_batch_arrival(),
                       self.scenario.failures.host_mtbf_s, len(self.hosts), self._failures)

    # ------------------------------------------------------------------------- loop
    @property
    def now(self) -> float:
        """Simulated seconds since the scenario's start."""
        return (self.runner.now - self.t0) / 1000

    def run(self, progress: Callable[[float, float], None] | None = None) -> SimResult:
        start = self._clock() if self._clock else 0.0
        end = self.scenario.duration_s
        while self.events.peek_time() <= end:
            event = self.events.pop()
            ahead = round(event.time * 1000) - (self.runner.now - self.t0)
            if ahead > 0:
                self.runner.run_for(ahead)
            self.processed += 1
            self._handlers[event.kind](self, event)
            if progress is not None and event.kind is Kind.CYCLE:
                progress(event.time, end)
        wall = (self._clock() - start) if self._clock else 0.0
        return self.result(wall)

    # --------------------------------------------------------------------- handlers
    def _on_submit(self, event: Event) -> None:
        if event.payload == BATCH_STREAM:
            spec, nxt = self.workload.next_batch(event.time)
            if nxt is not None:
                self.events.push(nxt, Kind.JOB_SUBMITTED, BATCH_STREAM)
        else:
            spec = self._initial[event.payload]
        r = spec.resources
        tier = self.tiers.index(spec.tier.name) if spec.tier.name in self.tiers else 0
        self.ledger.submitted(spec.name, JobInfo(
            self.paths.index(spec.pool), (r.cpu, r.memory, r.disk, r.gpu), spec.usage, tier,
            size_bucket(spec.instances), self.runner.now))
        self.runner.submit([job_submitted(spec, self.runner.now)])
        if spec.service and spec.end_s <= self.scenario.duration_s:
            self._stops.append(spec.name)
            self.events.push(max(spec.end_s, event.time), Kind.JOB_ENDED,
                             len(self._stops) - 1)

    def _on_job_end(self, event: Event) -> None:
        job_id = self._stops[event.payload]
        self.ledger.stopped.add(job_id)
        self.runner.publish([BusEvent("JobKillRequested", job_id, {
            "job_id": job_id, "at": self.runner.now, "instances": [],
            "reason": "the simulated service's lifetime ended"})])

    def _on_host_failed(self, event: Event) -> None:
        h = event.payload
        self.runner.kill(f"agent-{self.hosts.names[h]}")
        self.hosts.set_up(h, False)
        self.host_failures += 1
        repair = float(self._failures.exponential(self.scenario.failures.repair_s))
        self.events.push(event.time + repair, Kind.HOST_RETURNED, h)

    def _on_host_returned(self, event: Event) -> None:
        h = event.payload
        self.runner.start(f"agent-{self.hosts.names[h]}")
        self.hosts.set_up(h, True)
        mtbf = self.scenario.failures.host_mtbf_s
        nxt = event.time + float(self._failures.exponential(mtbf))
        if nxt <= self.scenario.duration_s:
            self.events.push(nxt, Kind.HOST_FAILED, h)

    def _on_cycle(self, event: Event) -> None:
        """The figures of one cycle_s: what the cores published so far."""
        k = event.payload
        led, m = self.ledger, self.metrics
        led.catch_up()
        for pool in led.take_appeared():
            m.demand_appeared(pool, event.time)
        delays, tiers, sizes = led.take_delays()
        if delays.size:
            m.started(delays, tiers, sizes)
        running = led.running[:, 0].copy()
        demand = np.maximum(led.demand, 0.0)
        m.cycle_end(event.time, led.entitled.copy(), running, demand, led.tolerance())
        every = max(1, round(self.params.sample_s / self.params.cycle_s))
        if k % every == 0:
            hosts = self.hosts
            capacity = hosts.capacity[hosts.up].sum(axis=0)
            m.sample(event.time, capacity, led.running.sum(axis=0), led.used.sum(axis=0),
                     led.entitled.copy(), running, demand)
        nxt = (k + 1) * self.params.cycle_s
        if nxt <= self.scenario.duration_s:
            self.events.push(nxt, Kind.CYCLE, k + 1)

    _handlers: dict[Kind, Callable[[RunnerSimulation, Event], None]] = {
        Kind.JOB_SUBMITTED: _on_submit,
        Kind.JOB_ENDED: _on_job_end,
        Kind.HOST_FAILED: _on_host_failed,
        Kind.HOST_RETURNED: _on_host_returned,
        Kind.CYCLE: _on_cycle,
    }

    # ---------------------------------------------------------------------- results
    def result(self, wall_s: float = 0.0) -> SimResult:
        led, m = self.ledger, self.metrics
        m.placements = 0
        m.completed = led.counts["completed"]
        m.preempted_running = led.counts["preempted_running"]
        m.preempted_ready = led.counts["preempted_ready"]
        m.lost = led.counts["lost"]
        m.killed = led.counts["killed"]
        m.host_failures = self.host_failures
        m.wasted = led.wasted.copy()
        delays, tiers, _ = m.delays()
        m.placements = int(delays.size)
        summary = self._summary()
        perf: dict[str, float] = {}
        if self._clock is not None:
            perf = {
                "wall_s": round(wall_s, 3),
                "events_per_s": round(summary["events"] / wall_s, 1) if wall_s > 0 else 0.0,
                "placements_per_s": round(summary["placements"] / wall_s, 1)
                if wall_s > 0 else 0.0,
            }
        by_tier = {name: delays[tiers == i] for i, name in enumerate(self.tiers)}
        return SimResult(summary, m.series(), perf, by_tier)

    def _summary(self) -> dict[str, Any]:
        led, runner = self.ledger, self.runner
        m = self.metrics.summary()
        counts = led.final_states()
        tasks = sum(1 for _ in led.state)
        out: dict[str, Any] = {
            "engine": "runner",
            "scenario": self.scenario.name,
            "seed": self.scenario.seed,
            "hosts": len(self.hosts),
            "tasks": tasks,
            "jobs": len(led.jobs),
            "simulated_s": self.scenario.duration_s,
            "cycles": int(self.scenario.duration_s // self.params.cycle_s) + 1,
            "events": sum(len(log) for log in runner.logs.values()),
            "transitions": led.transitions,
        }
        out.update(m)
        out["final_states"] = counts
        waiting = ("INITIALIZED", "PENDING", "READY", "PLACING", "PLACED")
        out["queued_at_end"] = sum(counts.get(s, 0) for s in waiting)
        out["running_at_end"] = counts.get("RUNNING", 0)
        pools = self.metrics.pool_summary()
        for i, path in enumerate(self.paths):
            pools[path].update({
                "reservation_cpu": self.scenario.tree.config(path).reservation.cpu,
                "placements": int(led.pool_placements[i]),
                "preempted": int(led.pool_preempted[i]),
            })
        out["pools"] = pools
        out["jobs_rejected"] = dict(sorted(led.rejected.items()))
        out["tasks_run_twice_at_once"] = len(runner.watch.violations)
        out["dead_letters"] = runner.dead_letters()
        return out
