"""Peloton's preemption system test on the real minicluster.

12 cpus over 3 agents (4 each); pools A and B, each cpu reservation 6 and limit 12,
created through the API. A 12-task preemptible 1-cpu job in A runs all 12 tasks (A
borrows B's idle reservation); the same job in B makes the resource manager take exactly
6 of A's tasks back, and both pools then run 6. The preempted runs end KILLED with reason
PREEMPTED and come back as new PENDING runs (not failures), recorded in the task history
and in /v1/preemptions.

This cluster runs a 1 s entitlement cycle and preempts after 2 cycles over entitlement.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e_helpers import api_client, submit, wait_for

from peloton.minicluster.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

POOL = (Path(__file__).resolve().parents[2] / "examples/respool/preemption-pool.yaml").read_text()
JOB = """\
name: preemptible-{pool}
owner: e2e
instanceCount: 12
respool: /{pool}
sla: {{priority: 1, preemptible: true}}
defaultConfig:
  resource: {{cpuLimit: 1, memLimitMb: 32, diskLimitMb: 16}}
  command: {{value: "sleep 600"}}
  killGracePeriodSeconds: 1
"""


@pytest.fixture(scope="module")
def cluster(minicluster_factory: Any) -> Iterator[Cluster]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PELOTON_RESMGR_PREEMPTION_CYCLES", "2")  # read by `serve resmgr`
        started = minicluster_factory(entitlement_cycle_s=1.0)
    yield started


@pytest.fixture(scope="module")
def client(cluster: Cluster) -> Iterator[httpx.Client]:
    with api_client(cluster) as c:
        yield c


def create_pool(client: httpx.Client, path: str) -> None:
    r = client.post(f"/v1/pools{path}", content=POOL,
                    headers={"content-type": "application/yaml"})
    assert r.status_code == 202, r.text
    rid = r.json()["request_id"]

    def answered() -> dict[str, Any] | None:
        resp = client.get(f"/v1/pool-requests/{rid}")
        if resp.status_code == 200 and resp.json()["state"] != "REQUESTED":
            return dict(resp.json())
        return None

    outcome = wait_for(answered, 30, what=f"the answer to creating {path}")
    assert outcome["state"] == "ACCEPTED", outcome


def running(client: httpx.Client, job_id: str) -> int:
    resp = client.get(f"/v1/jobs/{job_id}")
    if resp.status_code != 200:
        return 0
    job = resp.json()
    if job["state"] == "REJECTED":
        pytest.fail(f"job {job_id} rejected: {job['rejection_reasons']}")
    return int(job["task_counts"].get("RUNNING", 0))


def test_a_second_pool_preempts_exactly_its_reservation(cluster: Cluster,
                                                        client: httpx.Client) -> None:
    create_pool(client, "/A")
    create_pool(client, "/B")

    def pools_published() -> bool:
        pools = {p["pool"]: p for p in client.get("/v1/pools").json()["pools"]}
        return all(pools.get(p, {}).get("cycle", 0) > 0 for p in ("/A", "/B"))

    wait_for(pools_published, 30, what="pools A and B in an entitlement cycle")
    a = submit(client, JOB.format(pool="A"), job_id=f"pre-a-{os.getpid()}")
    wait_for(lambda: running(client, a) == 12, 60, what="all 12 tasks of A running")

    b = submit(client, JOB.format(pool="B"), job_id=f"pre-b-{os.getpid()}")
    wait_for(lambda: running(client, b) == 6 and running(client, a) == 6, 60,
             what="A and B running 6 each")
    time.sleep(4)  # several more cycles: nothing else moves
    assert (running(client, a), running(client, b)) == (6, 6)

    preempted = client.get("/v1/preemptions", params={"job_id": a}).json()["preemptions"]
    assert len(preempted) == 6 and {p["run"] for p in preempted} == {1}
    assert {p["pool"] for p in preempted} == {"/A"}
    assert {p["reason"] for p in preempted} == {"POOL_OVER_ENTITLEMENT"}
    assert client.get("/v1/preemptions", params={"job_id": b}).json()["preemptions"] == []

    tasks = client.get(f"/v1/jobs/{a}/tasks").json()["tasks"]
    requeued = [t for t in tasks if t["run"] == 2]
    assert len(requeued) == 6
    assert {t["instance"] for t in requeued} == {p["instance"] for p in preempted}
    for t in requeued:
        assert t["state"] == "PENDING" and t["failures"] == 0
        ended = [h for h in t["history"] if h["run"] == 1 and h["state"] == "KILLED"]
        assert len(ended) == 1 and ended[0]["reason"].startswith("PREEMPTED")
        assert ended[0]["previous_state"] == "PREEMPTING"
    assert client.get(f"/v1/jobs/{a}").json()["state"] == "RUNNING"

    pools = {p["pool"]: p for p in client.get("/v1/pools").json()["pools"]}
    assert pools["/A"]["entitlement"]["cpu"] == pytest.approx(6)
    assert pools["/B"]["entitlement"]["cpu"] == pytest.approx(6)
    assert pools["/A"]["allocation"]["cpu"] == pytest.approx(6)

    for job_id in (a, b):
        client.post(f"/v1/jobs/{job_id}/kill", json={})
    wait_for(lambda: all(client.get(f"/v1/jobs/{j}").json()["state"] == "KILLED"
                         for j in (a, b)), 60, what="both jobs killed")
