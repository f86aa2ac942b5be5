"""`peloton bench workloads`: long-running jobs at scale on the production cores (the
in-memory runner, simulated agents and time), so their decision paths are measured
without a broker: a daemon on every host plus a big SERVICE with health checks come up,
the service is rolled to a new version in batches, then a tenth of the hosts drain.

Each phase reports simulated seconds (how long the cluster took, with the services'
own ticks and timeouts) and wall seconds (what the cores cost on this machine), plus the
largest number of service instances seen down at once against the SLA (not serving: an
instance whose old run still serves during a drain's handover is up), checked at every
simulated step. Shapes: many hosts (daemon instances = hosts), many instances.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from peloton.jobmgr.domain.handover import serving
from peloton.model.event import Event
from peloton.model.jobfile import parse_job_file
from peloton.runner.cluster import cluster
from peloton.runner.memory import MemoryRunner

__all__ = ["run_workloads"]

SERVICE = """\
name: bench-web
type: SERVICE
instanceCount: {n}
placementStrategy: SPREAD_JOB
sla: {{maximumUnavailableInstances: {budget}}}
defaultConfig:
  resource: {{cpuLimit: 0.5, memLimitMb: 64}}
  command: {{value: "sleep 1000000 {version}"}}
  healthCheck: {{type: COMMAND, commandCheck: {{command: check}}, initialIntervalSecs: 1,
                intervalSecs: 5}}
"""
DAEMON = """\
name: bench-daemon
type: DAEMON
defaultConfig:
  resource: {cpuLimit: 0.1, memLimitMb: 16}
  command: {value: sleep 1000000}
"""


def _book(runner: MemoryRunner) -> Any:
    return runner.core("jobmgr").book


def _runs_healthily(task: Any) -> bool:
    return bool(task.state.value == "RUNNING" and task.health == "HEALTHY")


def _healthy(runner: MemoryRunner, version: int | None = None) -> int:
    """Service instances running healthily (at `version`, if given)."""
    return sum(1 for t in _book(runner).jobs["web"].tasks
               if _runs_healthily(t) and version in (None, t.config_version))


def _serving(runner: MemoryRunner) -> int:
    """Service instances that serve: running healthily, or whose old run still serves on
    a draining host while its replacement starts (jobmgr/domain/handover.py)."""
    return sum(1 for t in _book(runner).jobs["web"].tasks if _runs_healthily(t) or serving(t))


def _phase(runner: MemoryRunner, done: Callable[[], bool], max_s: float, n: int,
           progress: Callable[[str, float], None], what: str) -> dict[str, Any]:
    """Step until `done`; the worst count of service instances down (once all were up)."""
    sim0, wall0 = runner.now, time.perf_counter()
    worst = 0
    while runner.now - sim0 < max_s * 1000:
        runner.run_for(500)
        if _book(runner).jobs.get("web") is not None and what != "up":
            worst = max(worst, n - _serving(runner))
        if done():
            break
        progress(f"{what}: {(runner.now - sim0) / 1000:.0f}s simulated", 0.0)
    return {"ok": done(), "sim_s": round((runner.now - sim0) / 1000, 1),
            "wall_s": round(time.perf_counter() - wall0, 2), "worst_down": worst}


def run_workloads(hosts: int, instances: int, progress: Callable[[str, float], None],
                  seed: int = 1) -> dict[str, Any]:
    budget = max(1, instances // 10)
    runner = cluster(seed=seed, hosts=hosts, cpu=32.0, memory=65536.0)
    started = time.perf_counter()
    runner.submit([parse_job_file(DAEMON, "daemon", runner.now),
                   parse_job_file(SERVICE.format(n=instances, budget=budget, version=1),
                                  "web", runner.now)])
    book = _book  # noqa: N806 - read as a verb below
    up = _phase(runner, lambda: _healthy(runner, 1) == instances and sum(
        1 for t in book(runner).jobs["daemon"].tasks if t.state.value == "RUNNING") == hosts,
        600, instances, progress, "up")
    before = [t.host for t in book(runner).jobs["web"].tasks]
    config = parse_job_file(SERVICE.format(n=instances, budget=budget, version=2), "web",
                            runner.now)
    runner.publish([Event("JobUpdateRequested", "web", {
        "job_id": "web", "update_id": "bench", "at": runner.now, "requested_by": "bench",
        "config": config, "settings": {"batch_size": budget}, "instances": []})])
    update = _phase(runner, lambda: _healthy(runner, 2) == instances, 1800, instances,
                    progress, "update")
    in_place = sum(1 for t, host in zip(book(runner).jobs["web"].tasks, before, strict=True)
                   if t.host == host)
    drained = sorted(h for h in book(runner).hosts.views)[: max(1, hosts // 10)]
    for h in drained:
        runner.publish([Event("HostMaintenanceRequested", h, {
            "host": h, "command": "start_maintenance", "deadline_ms": None,
            "requested_by": "bench", "at": runner.now})])
    drain = _phase(runner, lambda: all(book(runner).hosts.views[h].state.value == "DOWN"
                                       for h in drained) and _healthy(runner) == instances,
                   1800, instances, progress, "drain")
    return {
        "hosts": hosts, "service instances": instances,
        "daemon instances": hosts, "maximumUnavailableInstances": budget,
        "up: simulated s": up["sim_s"], "up: wall s": up["wall_s"], "up: ok": up["ok"],
        "update (batch = budget): simulated s": update["sim_s"],
        "update: wall s": update["wall_s"], "update: ok": update["ok"],
        "update: most instances down at once": update["worst_down"],
        "update: instances updated in place (same host)": in_place,
        f"drain of {len(drained)} hosts: simulated s": drain["sim_s"],
        "drain: wall s": drain["wall_s"], "drain: ok": drain["ok"],
        "drain: most instances down at once": drain["worst_down"],
        "drain: replacements started before the old run stopped": runner.watch.handovers,
        "wall s in all": round(time.perf_counter() - started, 2),
        "tasks run twice at once": len(runner.watch.violations),
        "dead letters": runner.dead_letters(),
    }
