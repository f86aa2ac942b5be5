"""Soak: waves of small jobs while scheduling services are killed -9 and started again.

A minicluster with two resmgr instances and 8 simulated hosts (one fleet process, see
minicluster/fleet.py) takes WAVES waves of small jobs, submitted straight to job-submitted.
Right after each wave is submitted (after a seeded pause of up to a second, so its tasks
are in flight) one service is killed -9 and started again: jobmgr, the resmgr leader
(read from etcd), placement, hostmgr, in a seeded order. Then, for every job of every
wave, read from job-events:
- it ends terminal (JobStateChanged to SUCCEEDED/FAILED/KILLED, or JobRejected);
- no task ran twice at once: two runs of one instance are never both on a host (from a
  run's first ON_HOST TaskStateChanged to its first terminal one) at the same time, as
  the job manager recorded it (job-events) and as the agents reported it
  (task-status-reported: every task ran, and no two runs of one overlap there either).
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import aetcd
import pytest

from peloton.ha.election import parse_endpoint
from peloton.minicluster.cluster import Cluster
from peloton.minicluster.fleet import start_fleets
from peloton.minicluster.load import (
    JobFollower,
    agent_runs,
    on_host_overlaps,
    submit_jobs,
    wait_offers,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SEED = 8
WAVES = 4
JOBS_PER_WAVE = 25
HOSTS = 8
WAVE_TIMEOUT_S = 75.0
VICTIMS = ("jobmgr", "resmgr-leader", "placement", "hostmgr")


async def _resmgr_leader(cluster: Cluster) -> str:
    host, port = parse_endpoint(cluster.layout.etcd)
    async with aetcd.Client(host=host, port=port) as client:
        kv = await client.get(b"/peloton/leader/resmgr")
    assert kv is not None, "no resmgr leader in etcd"
    return bytes(kv.value).decode()


def _kill_and_restart(cluster: Cluster, name: str) -> None:
    argv = cluster.procs[name].argv
    cluster.kill(name)
    cluster.spawn(name, argv)
    cluster.wait_consuming([name], timeout=90)


async def _soak(cluster: Cluster) -> tuple[JobFollower, list[str], dict[str, Any]]:
    rng = random.Random(SEED)
    boot = cluster.layout.bootstrap
    follower = JobFollower(boot)
    await follower.start()
    killed: list[str] = []
    waits: dict[str, Any] = {}
    try:
        for wave, victim in enumerate(rng.sample(VICTIMS, k=len(VICTIMS))[:WAVES]):
            jobs = {f"soak-{wave}-{j}": rng.randint(1, 6) for j in range(JOBS_PER_WAVE)}
            follower.want(jobs)
            duration = round(rng.uniform(0.2, 2.0), 2)
            await submit_jobs(boot, jobs.items(), duration_s=duration, cpu=0.5)
            await asyncio.sleep(rng.uniform(0.0, 1.0))
            name = await _resmgr_leader(cluster) if victim == "resmgr-leader" else victim
            await asyncio.to_thread(_kill_and_restart, cluster, name)
            killed.append(name)
            started = time.monotonic()
            while set(jobs) & follower.pending_jobs():
                if time.monotonic() - started > WAVE_TIMEOUT_S:
                    break
                await follower.poll(200)
            waits[f"wave {wave} after {name}"] = round(time.monotonic() - started, 1)
    finally:
        await follower.stop()
    return follower, killed, waits


def test_waves_with_kills_every_job_terminal_no_task_twice(minicluster_factory: Any) -> None:
    cluster: Cluster = minicluster_factory(agents=0, simulated=True, resmgr_instances=2,
                                           with_api=False)
    _procs, hosts = start_fleets(cluster, HOSTS, 1, cpu=16.0)
    asyncio.run(wait_offers(cluster.layout.bootstrap, set(hosts), 90.0))

    follower, killed, waits = asyncio.run(_soak(cluster))

    assert len(killed) == WAVES
    assert len(follower.wanted) == WAVES * JOBS_PER_WAVE
    pending = follower.pending_jobs()
    assert not pending, (f"{len(pending)} jobs not terminal (kills {killed}, waits {waits}); "
                         f"their tasks: {follower.stuck_task_states()}")
    assert on_host_overlaps(follower.runs) == []
    reported = asyncio.run(agent_runs(cluster.layout.bootstrap, follower.wanted))
    assert {(j, i) for j, i, _r in reported} == {
        (j, i) for j in follower.wanted for i in range(follower.instances[j])}
    assert on_host_overlaps(reported) == []
    assert not follower.rejected, follower.rejected
