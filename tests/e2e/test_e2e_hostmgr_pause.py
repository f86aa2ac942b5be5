"""A host manager paused for longer than the heartbeat timeout (SIGSTOP: a long pause of the
process, as a VM freeze or a stop-the-world stall would) must not declare its hosts lost when
it resumes: its first tick finds every host silent, though their heartbeats sit unread in
the log. Real processes, real broker: 12 simulated hosts in one fleet, tasks running on
them, hostmgr stopped for 8 s (timeout 5 s). Without the mass-silence guard
(hostmgr/domain/silence.py) its first tick declared all 12 lost and every run LOST; the
stall rule (HostBook._stall: no tick for longer than the timeout) now keeps them too, also
on clusters too small for the guard (tests/runner/test_runner_hostmgr_stall.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from peloton.bus.codec import default_codec
from peloton.minicluster.cluster import Cluster
from peloton.minicluster.fleet import start_fleets
from peloton.minicluster.load import JobFollower, read_to_end, submit_jobs, wait_offers

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

HOSTS = 12


async def _host_losses(bootstrap: str) -> list[dict[str, Any]]:
    codec = default_codec()
    out = []
    async with aclosing(read_to_end(bootstrap, ["offer-received"])) as records:
        async for rec in records:
            etype, body = codec.decode(rec.value)
            if etype == "HostLost":
                out.append(body)
    return out


async def _run(cluster: Cluster) -> tuple[JobFollower, list[dict[str, Any]]]:
    boot = cluster.layout.bootstrap
    follower = JobFollower(boot)
    jobs = {f"pause-{j}": 3 for j in range(8)}
    follower.want(jobs)
    await follower.start()
    try:
        await submit_jobs(boot, jobs.items(), duration_s=15.0, cpu=0.5)
        started = time.monotonic()
        while sum(h.state == "RUNNING" for h in follower.runs.values()) < 20:
            assert time.monotonic() - started < 60, follower.stuck_task_states()
            await follower.poll(200)
        pid = cluster.procs["hostmgr"].pid
        os.kill(pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(8.0)
        finally:
            os.kill(pid, signal.SIGCONT)
        started = time.monotonic()
        while follower.pending_jobs() and time.monotonic() - started < 90:
            await follower.poll(200)
    finally:
        await follower.stop()
    return follower, await _host_losses(boot)


def test_a_paused_host_manager_loses_no_host(minicluster_factory: Any) -> None:
    cluster: Cluster = minicluster_factory(agents=0, simulated=True, with_api=False)
    _procs, hosts = start_fleets(cluster, HOSTS, 1, cpu=8.0)
    asyncio.run(wait_offers(cluster.layout.bootstrap, set(hosts), 90.0))

    follower, losses = asyncio.run(_run(cluster))

    assert losses == []
    assert not follower.pending_jobs(), follower.stuck_task_states()
    assert set(follower.job_state.values()) == {"SUCCEEDED"}
    states = {h.state for h in follower.runs.values()}
    assert "LOST" not in states
    log = Path(cluster.procs["hostmgr"].log).read_text()
    assert "this host manager was stalled" in log  # the stall rule kept them
