"""The job manager, the host manager and placement, each partitioned over two instances of
one consumer group, on the real broker (bus/partitioned.py, jobmgr/shard.py,
hostmgr/shard.py, placement/shard.py): bursts of small jobs while one instance of each is
killed -9 and restarted (on the dev broker a restart rejoins as the dead member and takes
its partitions back from their snapshots), then while one of each leaves cleanly
(SIGTERM: the other takes every partition) and joins again. Every job ends, no task runs
twice at once (as the job manager recorded it and as the agents reported it), and each
instance says which partitions it owns."""

from __future__ import annotations

import asyncio
import random
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from peloton.minicluster.cluster import Cluster
from peloton.minicluster.fleet import start_fleets
from peloton.minicluster.load import (
    JobFollower,
    agent_runs,
    on_host_overlaps,
    submit_jobs,
    wait_offers,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

HOSTS = 8
JOBS = 40
WAVE_TIMEOUT_S = 90.0
SERVICES = ("jobmgr", "hostmgr", "placement")
KILLED = ("jobmgr-2", "hostmgr-1", "placement-2")  # kill -9, then the same instance again
LEAVING = ("jobmgr-1", "hostmgr-2", "placement-1")  # SIGTERM, later started again
STAYING = ("jobmgr-2", "hostmgr-1", "placement-2")


def owns(cluster: Cluster, name: str) -> list[int] | None:
    """The partitions the instance said last it owns (its log)."""
    text = Path(cluster.procs[name].log).read_text(errors="replace")
    found = re.findall(rf"{name}: owns partitions \[([0-9, ]*)\]", text)
    return None if not found else [int(p) for p in found[-1].split(",") if p.strip()]


def wait_owning(cluster: Cluster, want: dict[str, int], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = {n: len(owns(cluster, n) or []) for n in want}
        if got == want:
            return
        time.sleep(0.2)
    raise TimeoutError(f"partitions owned: { {n: owns(cluster, n) for n in want} }")


async def wave(cluster: Cluster, follower: JobFollower, rng: random.Random, name: str,
               action: Any) -> None:
    jobs = {f"{name}-{j}": rng.randint(1, 6) for j in range(JOBS)}
    follower.want(jobs)
    await submit_jobs(cluster.layout.bootstrap, jobs.items(), duration_s=0.5, cpu=0.5)
    await asyncio.sleep(rng.uniform(0.1, 0.8))
    await asyncio.to_thread(action)
    started = time.monotonic()
    while set(jobs) & follower.pending_jobs() and time.monotonic() - started < WAVE_TIMEOUT_S:
        await follower.poll(200)


def test_two_instances_of_each_partitioned_service_kill_and_leave_mid_burst(
        minicluster_factory: Any) -> None:
    cluster: Cluster = minicluster_factory(agents=0, simulated=True, resmgr_instances=1,
                                           with_api=False, jobmgr_instances=2,
                                           hostmgr_instances=2, placement_instances=2)
    _procs, hosts = start_fleets(cluster, HOSTS, 1, cpu=16.0)
    asyncio.run(wait_offers(cluster.layout.bootstrap, set(hosts), 90.0))
    wait_owning(cluster, {f"{s}-{i}": 2 for s in SERVICES for i in (1, 2)})
    rng = random.Random(3)

    def kill_and_restart() -> None:
        for name in KILLED:
            argv = cluster.procs[name].argv
            cluster.kill(name)
            cluster.spawn(name, argv)
        cluster.wait_consuming(list(KILLED), timeout=90)

    def leave() -> None:
        for name in LEAVING:
            cluster.stop(name, signal.SIGTERM)

    def join() -> None:
        for name in LEAVING:
            cluster.spawn(name, cluster.procs[name].argv)
        cluster.wait_consuming(list(LEAVING), timeout=90)

    async def run() -> JobFollower:
        follower = JobFollower(cluster.layout.bootstrap)
        await follower.start()
        try:
            await wave(cluster, follower, rng, "kill", kill_and_restart)
            await wave(cluster, follower, rng, "leave", leave)
            await asyncio.to_thread(wait_owning, cluster, {n: 4 for n in STAYING})
            await wave(cluster, follower, rng, "join", join)
        finally:
            await follower.stop()
        return follower

    follower = asyncio.run(run())
    pending = follower.pending_jobs()
    assert not pending, f"{len(pending)} jobs not terminal: {follower.stuck_task_states()}"
    assert not follower.rejected, follower.rejected
    assert on_host_overlaps(follower.runs) == []
    reported = asyncio.run(agent_runs(cluster.layout.bootstrap, follower.wanted))
    assert {(j, i) for j, i, _r in reported} == {
        (j, i) for j in follower.wanted for i in range(follower.instances[j])}
    assert on_host_overlaps(reported) == []
    wait_owning(cluster, {f"{s}-{i}": 2 for s in SERVICES for i in (1, 2)})
