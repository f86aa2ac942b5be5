"""Placement end to end on a dedicated minicluster (3 agents x 4 cpus, zones a/b/c):
anti-affinity lands one instance per agent, and a gang that does not fit waits whole,
with the placement engine's reason in the API, then starts whole once room is freed.

The cluster is this module's own: the gang test must know exactly what is free.

Known gap (not in placement): the read model shows a waiting task's placement reason only
when its PlacementFailed is stamped no earlier than the task's last transition, but the
two come from different services' clocks (placement's round vs jobmgr's READY), and
placement reports a reason once per run. When the round wins the race the API shows
jobmgr's "admitted" for good. The tests then end XFAIL (after every other check has
passed) instead of failing on it; see `engine_reason`.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from e2e_helpers import api_client, submit, wait_job

from peloton.minicluster.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

TERMINAL = {"SUCCEEDED", "FAILED", "KILLED", "REJECTED"}
WAITING = {"PENDING", "READY"}
AGENTS = ["host-1", "host-2", "host-3"]


@pytest.fixture(scope="module")
def cluster(minicluster_factory: Any) -> Cluster:
    started: Cluster = minicluster_factory(agents=3, cpu=4.0)
    return started


@pytest.fixture(scope="module")
def client(cluster: Cluster) -> Iterator[httpx.Client]:
    with api_client(cluster) as c:
        yield c


def job_yaml(name: str, instances: int, cpu: float, command: str, *,
             constraint: Any = None, gang: bool = False) -> str:
    doc: dict[str, Any] = {
        "name": name, "owner": "e2e", "instanceCount": instances,
        "sla": {"minimumRunningInstances": instances if gang else 1},
        "defaultConfig": {
            "resource": {"cpuLimit": cpu, "memLimitMb": 32},
            "command": {"value": command},
            "killGracePeriodSeconds": 1,
        },
    }
    if constraint is not None:
        doc["defaultConfig"]["constraint"] = constraint
    return json.dumps(doc)  # JSON is YAML


def tasks(client: httpx.Client, job_id: str) -> list[dict[str, Any]]:
    """The job's tasks; none yet while the read model has not seen the job."""
    resp = client.get(f"/v1/jobs/{job_id}/tasks")
    return list(resp.json()["tasks"]) if resp.status_code == 200 else []


def wait_tasks(client: httpx.Client, job_id: str,
               check: Callable[[list[dict[str, Any]]], bool], what: str,
               timeout: float = 90.0) -> list[dict[str, Any]]:
    """Poll the job's tasks until ``check`` holds; fail showing where each task stands."""
    deadline = time.monotonic() + timeout
    ts: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        ts = tasks(client, job_id)
        if check(ts):
            return ts
        time.sleep(0.3)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; tasks: "
                f"{[(t['instance'], t['state'], t['host'], t['reason']) for t in ts]}")


def in_state(ts: list[dict[str, Any]], states: set[str]) -> list[dict[str, Any]]:
    return [t for t in ts if t["state"] in states]


def ever_ran(task: dict[str, Any]) -> bool:
    return any(h["state"] in ("PLACED", "LAUNCHING", "LAUNCHED", "RUNNING")
               for h in task["history"])


GAP = ("known gap: the placement reason was published (PlacementFailed) but the read model "
       "hides it because placement's round time preceded jobmgr's READY transition time")


def engine_reason(client: httpx.Client, job_id: str, needle: str, instances: set[int],
                  timeout: float = 20.0) -> list[str]:
    """Wait until every task in ``instances`` shows the engine's reason (containing
    ``needle``) while waiting: [] then. Otherwise the reasons they show at the end, which
    must not be another placement reason; none at all is the known gap above."""
    deadline = time.monotonic() + timeout
    shown: list[str] = []
    while time.monotonic() < deadline:
        ts = [t for t in tasks(client, job_id) if t["instance"] in instances]
        shown = [str(t["reason"]) for t in ts if t["state"] in WAITING]
        if len(shown) == len(instances) and all(needle in r for r in shown):
            assert all(r.startswith("waiting for placement: ") for r in shown), shown
            return []
        time.sleep(0.3)
    assert not any(r.startswith("waiting for placement: ") for r in shown), shown
    return shown


def first(task: dict[str, Any], state: str) -> int | None:
    """When the task first entered ``state`` (None if its history lacks it: an agent
    may report a short task's end together with its start)."""
    return min((h["at"] for h in task["history"] if h["state"] == state), default=None)


def kill(client: httpx.Client, job_id: str) -> None:
    assert client.post(f"/v1/jobs/{job_id}/kill").status_code == 202
    assert wait_job(client, job_id, TERMINAL, timeout=60)["state"] == "KILLED"


def test_anti_affinity_lands_one_instance_per_agent(client: httpx.Client) -> None:
    # Peloton's form: at most 0 other tasks labelled with this job's id on the host.
    # (Without it, PACK would put three half-cpu tasks on one agent.)
    job_id = f"one-per-host-{uuid.uuid4().hex[:6]}"
    per_host = {"labelConstraint": {
        "kind": "TASK", "condition": "CONDITION_LESS_THAN",
        "label": {"key": "peloton.job_id", "value": job_id}, "requirement": 1}}
    submit(client, job_yaml("one-per-host", 3, 0.5, "sleep 2", constraint=per_host), job_id)
    assert wait_job(client, job_id, TERMINAL)["state"] == "SUCCEEDED"
    assert sorted(t["host"] for t in tasks(client, job_id)) == AGENTS

    # The simple form, one instance more than agents: three run, one per agent, and the
    # fourth waits with the engine's reason in the API.
    crowd = submit(client, job_yaml("crowd", 4, 0.5, "sleep 600",
                                    constraint={"maxPerHost": 1}))
    ts = wait_tasks(client, crowd, lambda ts: len(in_state(ts, {"RUNNING"})) == 3
                    and len(in_state(ts, WAITING)) == 1, "three running, one waiting")
    assert sorted(t["host"] for t in in_state(ts, {"RUNNING"})) == AGENTS
    (left,) = in_state(ts, WAITING)
    hidden = engine_reason(client, crowd, "at most 1 task(s) of the job per host",
                           {left["instance"]})
    kill(client, crowd)
    if hidden:
        pytest.xfail(f"{GAP}; shown: {hidden}")


def test_gang_waits_whole_then_starts_whole(client: httpx.Client) -> None:
    # 2.5 cpus on each agent leaves 1.5 free on each: 4.5 cpus in all, enough for the
    # pool's budget, but room for only three of the gang's four 1-cpu tasks.
    sleeper = submit(client, job_yaml("sleeper", 3, 2.5, "sleep 600"))
    ts = wait_tasks(client, sleeper, lambda ts: len(in_state(ts, {"RUNNING"})) == 3,
                    "the sleeper on every agent")
    assert sorted(t["host"] for t in ts) == AGENTS
    gang = submit(client, job_yaml("gang", 4, 1.0, "sleep 3", gang=True))

    wait_tasks(client, gang, lambda ts: len(in_state(ts, WAITING)) == 4,
               "the gang's four tasks waiting", timeout=60)
    hidden = engine_reason(client, gang, "needs 4 tasks, 3 fit", {0, 1, 2, 3}, timeout=30)
    time.sleep(2)  # rounds keep refusing it: still nothing placed, let alone running
    assert not any(ever_ran(t) for t in tasks(client, gang))

    freeing = int(time.time() * 1000)
    kill(client, sleeper)
    assert wait_job(client, gang, TERMINAL)["state"] == "SUCCEEDED"
    done = tasks(client, gang)
    assert all(t["run"] == 1 for t in done), "no member was placed, refused and retried"
    placed = [at for t in done if (at := first(t, "PLACED")) is not None]
    assert len(placed) == 4 and max(placed) - min(placed) < 1000, done  # in one round
    assert min(placed) >= freeing, (placed, freeing)  # only once the sleeper went
    running = [at for t in done if (at := first(t, "RUNNING")) is not None]
    assert running and max(running) - min(running) < 3000, running  # started together
    if hidden:
        pytest.xfail(f"{GAP}; shown: {hidden}")
