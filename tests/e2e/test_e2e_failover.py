"""Resource manager failover on the real minicluster (two resmgr instances, etcd election).

kill -9 the leader: the standby, which folded the same log all along, takes the etcd key
within a few seconds, reports the same pools, entitlements and allocations as its
predecessor did, and jobs keep being admitted and completing, in a pool that was created
through the API before the failover (so the new leader rebuilt the tree from the log).
The killed instance is started again afterwards (the cluster is shared).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import aetcd
import httpx
import pytest
from e2e_helpers import submit, wait_for, wait_job

from peloton.ha.election import parse_endpoint
from peloton.minicluster.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

LEADER_KEY = "/peloton/leader/resmgr"
POOL = """\
description: a pool that must survive the resmgr failover
resources:
  - {kind: cpu, reservation: 0, limit: 12}
  - {kind: memory, reservation: 0, limit: 12288}
  - {kind: disk, reservation: 0, limit: 30720}
"""
JOB = """\
name: failover-{name}
owner: e2e
instanceCount: {n}
respool: /failover
defaultConfig:
  resource: {{cpuLimit: 1, memLimitMb: 32, diskLimitMb: 16}}
  command: {{value: "sleep {sleep}"}}
"""


def leader(cluster: Cluster) -> str | None:
    async def read() -> str | None:
        host, port = parse_endpoint(cluster.layout.etcd)
        async with aetcd.Client(host=host, port=port) as client:
            kv = await client.get(LEADER_KEY.encode())
        return None if kv is None else bytes(kv.value).decode()

    return asyncio.run(read())


@pytest.fixture()
def restarts(minicluster: Cluster) -> Iterator[list[str]]:
    """Names of services the test killed; started again afterwards."""
    killed: list[str] = []
    yield killed
    for name in killed:
        if not minicluster.alive(name):
            minicluster.start_service(name)
    minicluster.wait_consuming(killed)


def pool_row(api: httpx.Client, path: str) -> dict[str, Any] | None:
    for p in api.get("/v1/pools").json()["pools"]:
        if p["pool"] == path:
            return dict(p)
    return None


def test_standby_takes_over_with_the_same_state_and_jobs_keep_completing(
        minicluster: Cluster, api: httpx.Client, restarts: list[str]) -> None:
    r = api.post("/v1/pools/failover", content=POOL,
                 headers={"content-type": "application/yaml"})
    assert r.status_code == 202, r.text
    rid = r.json()["request_id"]
    wait_for(lambda: api.get(f"/v1/pool-requests/{rid}").json().get("state") == "ACCEPTED",
             30, what="pool /failover accepted")
    wait_for(lambda: (pool_row(api, "/failover") or {}).get("cycle", 0) > 0, 30,
             what="pool /failover in an entitlement cycle")
    first = submit(api, JOB.format(name="before", n=3, sleep=0))
    wait_job(api, first, {"SUCCEEDED"}, 60)

    long = submit(api, JOB.format(name="across", n=3, sleep=12))
    wait_for(lambda: api.get(f"/v1/jobs/{long}").json()["task_counts"].get("RUNNING") == 3,
             60, what="3 tasks running across the failover")
    wait_for(lambda: (pool_row(api, "/failover") or {}).get("allocation", {}).get("cpu") == 3,
             30, what="the allocation published")
    before = pool_row(api, "/failover")
    assert before is not None

    old = leader(minicluster)
    assert old in ("resmgr-1", "resmgr-2"), old
    killed_at = time.monotonic()
    minicluster.kill(old)
    restarts.append(old)
    new = wait_for(lambda: (lambda who: who if who not in (None, old) else None)(
        leader(minicluster)), 15, interval=0.1, what="a new resmgr leader")
    took = time.monotonic() - killed_at
    assert took < 10, f"takeover took {took:.1f}s"

    # the new leader's first cycles describe the same pools, entitlement and allocation
    def after() -> dict[str, Any] | None:
        row = pool_row(api, "/failover")
        return row if row is not None and row["at"] > before["at"] + 500 else None

    row = wait_for(after, 30, what=f"an entitlement cycle from {new}")
    for field in ("parent", "reservation", "limit", "share", "entitlement", "allocation"):
        assert row[field] == before[field], field

    later = submit(api, JOB.format(name="after", n=6, sleep=0))
    wait_job(api, later, {"SUCCEEDED"}, 60)
    wait_job(api, long, {"SUCCEEDED"}, 60)
    assert leader(minicluster) == new
