"""Host maintenance end to end (minicluster, 2 agents x 2 cpus): a host with a run goes
DRAINING, gets no new task, becomes DRAINED then DOWN once it runs nothing, stays DOWN
through a crash of the host manager, and after `complete` is UP and gets tasks again."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from e2e_helpers import api_client, submit, wait_for, wait_job

from peloton.minicluster.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def job_yaml(name: str, command: str, instances: int, cpu: float) -> str:
    return f"""
name: {name}
instanceCount: {instances}
defaultConfig:
  resource: {{cpuLimit: {cpu}, memLimitMb: 32}}
  command: {{value: {json.dumps(command)}}}
"""


def hosts(api: httpx.Client) -> dict[str, dict[str, Any]]:
    return {h["host"]: h for h in api.get("/v1/hosts").json()["hosts"]}


def maint(api: httpx.Client, host: str) -> str:
    return str(hosts(api)[host]["maintenance_state"])


def task_hosts(api: httpx.Client, job_id: str) -> set[str]:
    return {t["host"] for t in api.get(f"/v1/jobs/{job_id}/tasks").json()["tasks"]}


@pytest.fixture(scope="module")
def small(minicluster_factory: Any) -> Cluster:
    cluster: Cluster = minicluster_factory(agents=2, cpu=2.0)
    return cluster


def test_drain_down_complete(small: Cluster) -> None:
    with api_client(small) as api:
        wait_for(lambda: len(hosts(api)) == 2 and all(
            h["maintenance_state"] == "UP" for h in hosts(api).values()), 30,
            what="both hosts announced UP")
        # a run fills one host
        first = submit(api, job_yaml("fill", "sleep 4", 1, 2.0))
        wait_job(api, first, {"RUNNING"}, 60)
        (busy,) = task_hosts(api, first)
        other = next(h for h in hosts(api) if h != busy)
        r = api.post(f"/v1/hosts/{busy}/maintenance", json={"action": "start",
                                                             "deadline": "1m"})
        assert r.status_code == 202, r.text
        wait_for(lambda: maint(api, busy) in ("DRAINING", "DRAINED", "DOWN"), 15,
                 what=f"{busy} in maintenance")
        # no new work on it: these land on the other host
        second = submit(api, job_yaml("elsewhere", "sleep 0.2", 2, 0.5))
        wait_job(api, second, {"SUCCEEDED"}, 60)
        assert task_hosts(api, second) == {other}
        # its run is over (ended or drained): DRAINED, then DOWN
        wait_for(lambda: maint(api, busy) == "DOWN", 30, what=f"{busy} DOWN")
        again = api.post(f"/v1/hosts/{busy}/maintenance", json={"action": "start"})
        assert again.status_code == 409
        # a crash of the host manager forgets nothing: still DOWN, still no work there
        small.kill("hostmgr")
        small.start_service("hostmgr")
        small.wait_consuming(["hostmgr"])
        after = submit(api, job_yaml("after-crash", "sleep 0.2", 2, 0.5))
        wait_job(api, after, {"SUCCEEDED"}, 60)
        assert task_hosts(api, after) == {other}
        events = api.get(f"/v1/hosts/{busy}").json()["events"]  # newest first
        assert [e["state"] for e in events if e["kind"] == "STATE_CHANGED"] == [
            "DOWN", "DRAINED", "DRAINING", "UP"]  # nothing repeated after the crash
        r = api.post(f"/v1/hosts/{busy}/maintenance", json={"action": "complete"})
        assert r.status_code == 202, r.text
        wait_for(lambda: maint(api, busy) == "UP", 15, what=f"{busy} UP again")
        # both hosts take work again: two runs of 2 cpus need both
        third = submit(api, job_yaml("both", "sleep 0.5", 2, 2.0))
        wait_job(api, third, {"SUCCEEDED"}, 60)
        assert task_hosts(api, third) == {busy, other}
