"""The usual cluster on a `MemoryRunner`, and the JobSubmitted body of a simple batch job."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from peloton.bus.catalog import topic
from peloton.bus.routing import Route, RouterCore, check_copartitioned
from peloton.bus.service import ServiceCore
from peloton.hostmgr.service import HostManagerCore
from peloton.hostmgr.shard import HOST_ROUTE, HostShardCore
from peloton.jobmgr.service import JobManagerCore
from peloton.jobmgr.shard import JOB_ROUTE, JobShardCore
from peloton.placement.service import PlacementCore
from peloton.placement.shard import PLACEMENT_ROUTE, PlacementShardCore
from peloton.resmgr.service import ResourceManagerCore
from peloton.runner.groups import Group, Shard, add_group
from peloton.runner.memory import MemoryRunner

__all__ = ["SERVICES", "PARTITIONED", "cluster", "batch_job", "partitioned"]

#: The scheduling services as `peloton serve` builds them (default settings).
SERVICES: dict[str, Callable[[], ServiceCore]] = {
    "jobmgr": JobManagerCore,
    "resmgr": ResourceManagerCore,
    "placement": PlacementCore,
    "hostmgr": HostManagerCore,
}


def cluster(seed: int = 0, hosts: int = 20, cpu: float = 64.0, memory: float = 65536.0,
            services: dict[str, Callable[[], ServiceCore]] | None = None,
            jobmgr_instances: int = 0, hostmgr_instances: int = 0,
            placement_instances: int = 0, **runner_options: Any) -> MemoryRunner:
    """A runner with the four scheduling services and `hosts` simulated agents named
    host-1..host-N, each with `cpu` cpus and `memory` MB. `jobmgr_instances` (or
    `hostmgr_instances`, `placement_instances`) > 0 runs that service partitioned over
    that many instances (`partitioned`); its group is `runner.groups[name]`."""
    runner = MemoryRunner(seed, **runner_options)
    instances = {"jobmgr": jobmgr_instances, "hostmgr": hostmgr_instances,
                 "placement": placement_instances}
    for name, factory in (services or SERVICES).items():
        if instances.get(name):
            partitioned(runner, name, instances[name])
            continue
        runner.add_service(name, factory)
    for i in range(1, hosts + 1):
        runner.add_agent(f"host-{i}", cpu=cpu, memory=memory)
    return runner


#: the services that run partitioned: their route and the core of partition p
PARTITIONED: dict[str, tuple[Route, Callable[[int], ServiceCore]]] = {
    "jobmgr": (JOB_ROUTE, lambda p: JobShardCore(partition=p)),
    "hostmgr": (HOST_ROUTE, HostShardCore),
    "placement": (PLACEMENT_ROUTE, PlacementShardCore),
}


def partitioned(runner: MemoryRunner, name: str, instances: int,
                session_timeout_ms: int = 3_000) -> Group:
    """The service as `instances` members of one consumer group: a shard core per
    partition of its own topics (`<name>-p<k>`) and a router per partition of the routed
    topics (`<name>-router-p<k>`), both spread over the members, as the Kafka shell
    (`peloton.bus.partitioned`) runs them."""
    route, factory = PARTITIONED[name]
    check_copartitioned(route)
    n = route.partitions
    routed = max((topic(t).partitions for t in route.topics), default=0)
    shards = [Shard(f"{name}-p{k}", partial(factory, k), route.sharded, k, n)
              for k in range(n)]
    shards += [Shard(f"{name}-router-p{k}", partial(RouterCore, route), route.topics,
                     k, routed) for k in range(routed)]
    group = add_group(runner, name, instances, shards, session_timeout_ms)
    runner.groups[name] = group
    return group


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
