"""The usual cluster on a `MemoryRunner`, and the JobSubmitted body of a simple batch job."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from peloton.bus.service import ServiceCore
from peloton.hostmgr.service import HostManagerCore
from peloton.jobmgr.service import JobManagerCore
from peloton.placement.service import PlacementCore
from peloton.resmgr.service import ResourceManagerCore
from peloton.runner.memory import MemoryRunner

__all__ = ["SERVICES", "cluster", "batch_job"]

#: The scheduling services as `peloton serve` builds them (default settings).
SERVICES: dict[str, Callable[[], ServiceCore]] = {
    "jobmgr": JobManagerCore,
    "resmgr": ResourceManagerCore,
    "placement": PlacementCore,
    "hostmgr": HostManagerCore,
}


def cluster(seed: int = 0, hosts: int = 20, cpu: float = 64.0, memory: float = 65536.0,
            services: dict[str, Callable[[], ServiceCore]] | None = None,
            **runner_options: Any) -> MemoryRunner:
    """A runner with the four scheduling services and `hosts` simulated agents named
    host-1..host-N, each with `cpu` cpus and `memory` MB."""
    runner = MemoryRunner(seed, **runner_options)
    for name, factory in (services or SERVICES).items():
        runner.add_service(name, factory)
    for i in range(1, hosts + 1):
        runner.add_agent(f"host-{i}", cpu=cpu, memory=memory)
    return runner


def batch_job(job_id: str, instances: int, cpu: float = 0.1, memory_mb: float = 16.0,
              duration_s: float = 1.0, pool: str = "/default", priority: int = 0,
              max_failures: int = 0, submitted_at: int = 0) -> dict[str, Any]:
    """A JobSubmitted body: `instances` tasks that each run `duration_s` simulated seconds
    and exit 0 on a simulated agent."""
    task = {"cpu_limit": cpu, "mem_limit_mb": memory_mb, "disk_limit_mb": 1.0,
            "gpu_limit": None, "command": f"sleep {duration_s:g}", "env": None,
            "constraint_json": None, "max_failures": max_failures, "labels": None,
            "ports": None, "kill_grace_period_s": None}
    return {"job_id": job_id, "submitted_at": submitted_at, "name": job_id, "owner": "runner",
            "description": "", "type": "BATCH", "labels": {}, "instance_count": instances,
            "respool": pool,
            "sla": {"priority": priority, "preemptible": True, "revocable": False,
                    "minimum_running_instances": 1, "maximum_running_instances": 0},
            "default_config": task, "instance_config": {}, "placement_strategy": None}
