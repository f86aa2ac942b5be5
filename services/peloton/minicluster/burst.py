"""Burst benchmark: many small jobs at once over many simulated hosts.

A minicluster (broker, etcd, jobmgr, resmgr, placement, hostmgr; no API) runs `hosts`
simulated hosts of `cpu_per_host` cpus, served by `agent_processes` fleet processes
(minicluster/fleet.py: one AgentCore per host, routed by host, so each host behaves as its
own agent; one process per host would not fit on a 2-core machine). The client then
produces `jobs` JobSubmitted records straight to `job-submitted` as fast as it can, or at
`rate` jobs/s for a sustained load (sizes
drawn uniformly from [min_tasks, max_tasks] with `seed`), follows `job-events` and reports:

- tasks_per_s: tasks that ended / (last terminal TaskStateChanged.at - first submitted_at);
- p50/p99 submit -> RUNNING and submit -> terminal, per task (job, instance): from the
  job's JobSubmitted.submitted_at (client clock) to the TaskStateChanged.at the job manager
  stamped on the task's first RUNNING and on its newest run's terminal state (jobmgr's
  clock; both are this machine's wall clock);
- jobs_not_terminal: jobs with no terminal JobStateChanged (nor JobRejected) when the run
  stopped, with the latest state of their tasks counted (`stuck_task_states`), and where
  their runs were lost (`stuck_diagnosis`, only then: `minicluster/stuckreport.py`).

It always stops: when every job is terminal, when nothing new happened for `settle_s`
(`SETTLE_S` by default: longer than the job manager takes to ask an agent about a run with
no news, so a wave whose end report was lost still ends, and
`ends_recovered_by_reconciliation` counts those ends), or after `timeout_s` in all. The
cluster is torn down whatever happens.
"""

from __future__ import annotations

import asyncio
import functools
import random
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from peloton.bus import gcpolicy
from peloton.minicluster.cluster import Cluster, Layout, down, up
from peloton.minicluster.endtrail import end_trail_summary, read_end_trails
from peloton.minicluster.fleet import start_fleets
from peloton.minicluster.load import JobFollower, percentile, submit_jobs, wait_offers
from peloton.minicluster.stuckreport import diagnose
from peloton.model.taskstate import TERMINAL

__all__ = ["burst", "SETTLE_S", "job_sizes", "BurstOutcome", "run_burst", "burst_figures",
           "terminal_ats", "FleetCluster", "fleet_cluster", "stuck_diagnosis"]

Progress = Callable[[str, float], None]

#: how long a burst waits without progress before it stops: more than the job manager's
#: reconciliation takes (a run with no news for 60 s is asked about, at most 10 s later)
SETTLE_S = 90.0


def job_sizes(jobs: int, min_tasks: int, max_tasks: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(min_tasks, max_tasks) for _ in range(jobs)]


@dataclass
class BurstOutcome:
    """What one burst left: the jobs asked for (id -> tasks), when each was submitted (ms),
    the follower holding their job-events history, and how the wait for them ended."""

    wanted: dict[str, int]
    submitted: dict[str, int]
    follower: JobFollower
    submit_s: float
    wall_s: float
    stop_reason: str


@functools.cache
def client_gc() -> gcpolicy.GcPolicy | None:
    """The benchmark process's garbage collection (`peloton.bus.gcpolicy`), one policy for
    the process, configured at the first call and stepped then (its first step collects
    the whole heap: call it at a quiet moment, before anything is measured, as
    `fleet_cluster` does); each `run_burst` keeps it stepping."""
    policy = gcpolicy.configure()
    if policy is not None:
        policy.step()
    return policy


async def run_burst(bootstrap: str, sizes: list[int], duration_s: float, task_cpu: float,
                    settle_s: float, timeout_s: float, say: Progress, rate: float = 0.0,
                    from_end: bool = False) -> BurstOutcome:
    """Submit one job per size (all at once, or `rate` jobs/s) and follow job-events until
    every job is terminal, nothing changed for `settle_s`, or `timeout_s` passed.
    `from_end`: follow job-events from about its end (a later burst on the same cluster).
    The process collects garbage as the services do (`client_gc`): the follower holds
    every task's history of the wave."""
    policy = client_gc()
    keeper = (None if policy is None
              else asyncio.ensure_future(gcpolicy.keep(policy, now=False)))
    try:
        return await _run_burst(bootstrap, sizes, duration_s, task_cpu, settle_s,
                                timeout_s, say, rate, from_end)
    finally:
        if keeper is not None:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)


async def _run_burst(bootstrap: str, sizes: list[int], duration_s: float, task_cpu: float,
                     settle_s: float, timeout_s: float, say: Progress, rate: float,
                     from_end: bool) -> BurstOutcome:
    tag = uuid.uuid4().hex[:6]
    wanted = {f"burst-{tag}-{j}": n for j, n in enumerate(sizes)}
    total = sum(sizes)
    follower = JobFollower(bootstrap)
    follower.want(wanted)
    await follower.start(from_end=from_end)
    try:
        say(f"submitting {len(wanted):,} jobs ({total:,} tasks)", 0.0)
        started = time.monotonic()
        submitted = await submit_jobs(bootstrap, wanted.items(), duration_s, task_cpu, rate)
        submit_s = time.monotonic() - started
        last_change = time.monotonic()
        stop_reason = "all jobs terminal"
        while follower.pending_jobs():
            now = time.monotonic()
            if now - started > timeout_s:
                stop_reason = f"timeout ({timeout_s:.0f}s)"
                break
            if now - last_change > settle_s:
                stop_reason = f"no progress for {settle_s:.0f}s"
                break
            if await follower.poll():
                last_change = time.monotonic()
            done = len(wanted) - len(follower.pending_jobs())
            say(f"jobs terminal {done:,}/{len(wanted):,}", done / len(wanted))
        wall_s = time.monotonic() - started
    finally:
        await follower.stop()
    return BurstOutcome(wanted, submitted, follower, submit_s, wall_s, stop_reason)


def terminal_ats(follower: JobFollower) -> list[int]:
    """The `at` of every terminal TaskStateChanged the follower saw."""
    return [at for hist in follower.runs.values() for at, s, _h in hist.changes
            if s in TERMINAL]


def stage_figures(stages: dict[str, list[int]]) -> str:
    """`READY 120/340, PLACED ...`: p50/p99 ms from submit to each state (the states no task
    reached are left out)."""
    return ", ".join(f"{s} {percentile(v, 50):.0f}/{percentile(v, 99):.0f}"
                     for s, v in stages.items() if v) or "-"


def burst_figures(out: BurstOutcome, rate: float = 0.0) -> dict[str, Any]:
    """The burst's figures (module docstring) from what it left."""
    follower, submitted = out.follower, out.submitted
    to_run, to_end = follower.task_latencies(submitted)
    ends = terminal_ats(follower)
    span_s = (max(ends) - min(submitted.values())) / 1000 if ends else 0.0
    pending = follower.pending_jobs()
    stuck = follower.stuck_task_states()

    def ms(v: float | None) -> float | None:
        return None if v is None else round(v, 1)

    return {
        "jobs": len(out.wanted), "tasks": sum(out.wanted.values()),
        "submit_rate_jobs_per_s": rate or "as fast as possible",
        "submit_s": round(out.submit_s, 2),
        "tasks_per_s": round(len(to_end) / span_s, 1) if span_s > 0 else 0.0,
        "p50_submit_to_running_ms": ms(percentile(to_run, 50)),
        "p99_submit_to_running_ms": ms(percentile(to_run, 99)),
        "p50_submit_to_terminal_ms": ms(percentile(to_end, 50)),
        "p99_submit_to_terminal_ms": ms(percentile(to_end, 99)),
        "p50_p99_ms_to_each_state": stage_figures(follower.stage_latencies(submitted)),
        "tasks_running_seen": len(to_run), "tasks_terminal_seen": len(to_end),
        "jobs_rejected": len(follower.rejected),
        "jobs_not_terminal": len(pending),
        "ends_recovered_by_reconciliation": follower.recovered,
        "stuck_task_states": ", ".join(f"{k}={v}" for k, v in sorted(stuck.items())) or "-",
        "stopped_because": out.stop_reason, "wall_s": round(out.wall_s, 2),
        "latency_clock": "TaskStateChanged.at (jobmgr) - JobSubmitted.submitted_at (client)",
    }


@dataclass
class FleetCluster:
    """A running minicluster with simulated hosts, and the seconds from the fleets' start
    until the host manager offered every host."""

    cluster: Cluster
    hosts: int
    offered_s: float


@contextmanager
def fleet_cluster(hosts: int, agent_processes: int, cpu_per_host: float, say: Progress,
                  run_dir: Path | None = None, offer_timeout_s: float = 90.0,
                  heartbeat_s: float = 1.0, **layout: Any) -> Iterator[FleetCluster]:
    """A minicluster (no API, no agent processes of its own; `layout`: more Layout.local
    keywords) with `hosts` simulated hosts host-1..N served by `agent_processes` fleet
    processes, once the host manager offers every host; torn down on exit. Logs go to
    `run_dir` when given, else to a temporary directory. Hosts heartbeat every
    `heartbeat_s` seconds; the host manager declares a host lost after 3 of them (at
    least its default 5 s)."""
    with tempfile.TemporaryDirectory(prefix="peloton-burst-") as tmp:
        where = run_dir or Path(tmp)
        lay = Layout.local(where, agents=0, free=True, detach=False, simulated=True,
                           with_api=False, **{"resmgr_instances": 1,
                                              "heartbeat_timeout_s": max(5.0, 3 * heartbeat_s),
                                              **layout})
        say("starting minicluster", 0.0)
        try:
            cluster = up(lay)
            say(f"starting {hosts:,} simulated hosts in {agent_processes} processes", 0.0)
            started = time.monotonic()
            start_fleets(cluster, hosts, agent_processes, cpu_per_host,
                         heartbeat_s=heartbeat_s)
            asyncio.run(wait_offers(lay.bootstrap, {f"host-{i + 1}" for i in range(hosts)},
                                    offer_timeout_s))
            client_gc()  # a quiet moment: before anything is measured
            yield FleetCluster(cluster, hosts, time.monotonic() - started)
        finally:
            down(lay.run_dir)


def burst(jobs: int = 5_000, hosts: int = 50, agent_processes: int = 2, min_tasks: int = 1,
          max_tasks: int = 8, seed: int = 7, cpu_per_host: float = 64.0,
          task_cpu: float = 0.1, duration_s: float = 0.1, settle_s: float = SETTLE_S,
          timeout_s: float = 900.0, run_dir: Path | None = None,
          progress: Progress | None = None, rate: float = 0.0) -> dict[str, Any]:
    """Run the burst (module docstring); `run_dir` keeps logs there instead of a temp dir."""
    say: Progress = progress or (lambda _m, _f: None)
    sizes = job_sizes(jobs, min_tasks, max_tasks, seed)
    with fleet_cluster(hosts, agent_processes, cpu_per_host, say, run_dir) as fleet:
        boot = fleet.cluster.layout.bootstrap
        out = asyncio.run(run_burst(boot, sizes, duration_s, task_cpu, settle_s, timeout_s,
                                    say, rate))
        stuck = asyncio.run(stuck_diagnosis(boot, out, say))
    return {"hosts": hosts, "agent_processes": min(agent_processes, hosts), "seed": seed,
            **burst_figures(out, rate), **stuck}


async def stuck_diagnosis(bootstrap: str, out: BurstOutcome, say: Progress) -> dict[str, Any]:
    """`{"stuck_diagnosis": ...}` (`stuckreport.diagnose`) when jobs of the burst did not
    end, and `{"recovered_ends_trail": ...}` (`endtrail`) when ends came back by
    reconciliation, each said as progress too; `{}` when every job ended unaided. Call it
    before the teardown."""
    found: dict[str, Any] = {}
    if recovered := out.follower.recovered_runs:
        ends = found["recovered_ends_trail"] = end_trail_summary(
            await read_end_trails(bootstrap, recovered), recovered)
        say(f"ends recovered by reconciliation: {len(recovered):,}, first reports "
            f"{ends['by_step']}, of which committed past {ends['committed_past']}"
            + (f", inbox offsets {ends['inbox_offsets']}" if ends["inbox_offsets"] else ""),
            0.0)
    if not out.follower.pending_jobs():
        return found
    stuck = await diagnose(bootstrap, out.follower)
    trail = stuck.get("not_launched_trail")
    say(f"stuck runs: {stuck['stuck_runs']:,} on {stuck['hosts']:,} hosts, "
        f"{stuck['by_class']}" + (f"; not launched: {trail['by_step']}, of which the host "
                                  f"manager committed past {trail['committed_past']}"
                                  if trail else ""), 0.0)
    return {**found, "stuck_diagnosis": stuck}
