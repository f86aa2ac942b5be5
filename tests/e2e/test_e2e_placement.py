"""Placement end to end on a dedicated minicluster (3 agents x 4 cpus, zones a/b/c):
anti-affinity lands one instance per agent, and a gang that does not fit waits whole,
with the placement engine's reason in the API, then starts whole once room is freed.

The cluster is this module's own: the gang test must know exactly what is free.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from e2e_helpers import submit, wait_for, wait_job

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
    with httpx.Client(base_url=cluster.layout.api_url, timeout=10) as c:
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
    return list(client.get(f"/v1/jobs/{job_id}/tasks").json()["tasks"])


def by_state(client: httpx.Client, job_id: str, states: set[str]) -> list[dict[str, Any]]:
    return [t for t in tasks(client, job_id) if t["state"] in states]


def ever_ran(task: dict[str, Any]) -> bool:
    return any(h["state"] in ("PLACED", "LAUNCHING", "LAUNCHED", "RUNNING")
               for h in task["history"])


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
    running = wait_for(lambda: len(r := by_state(client, crowd, {"RUNNING"})) == 3 and r,
                       120, what="three running instances")
    assert sorted(t["host"] for t in running) == AGENTS

    def waiting_with_reason() -> dict[str, Any] | None:
        (left,) = by_state(client, crowd, WAITING)
        return left if "at most 1 task(s) of the job per host" in left["reason"] else None

    left = wait_for(waiting_with_reason, 20, what="the fourth instance's placement reason")
    assert left["reason"].startswith("waiting for placement: "), left["reason"]
    kill(client, crowd)


def _dump(job_id: str) -> None:
    from confluent_kafka import Consumer
    from peloton.bus.codec import default_codec
    codec = default_codec()
    c = Consumer({"bootstrap.servers": BOOT[0], "group.id": "dbg-" + uuid.uuid4().hex,
                  "auto.offset.reset": "earliest"})
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition
    c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in ("job-events", "tasks-admitted",
              "placement-made") for p in range(4)])
    end = time.monotonic() + 15
    while time.monotonic() < end:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        et, body = codec.decode(m.value())
        if job_id in json.dumps(body):
            print("DBG", m.topic(), et, json.dumps(body)[:600])
    c.close()


BOOT: list[str] = []


def test_gang_waits_whole_then_starts_whole(client: httpx.Client, cluster: Cluster) -> None:
    BOOT[:] = [cluster.layout.bootstrap]
    # 2.5 cpus on each agent leaves 1.5 free on each: 4.5 cpus in all, enough for the
    # pool's budget, but room for only three of the gang's four 1-cpu tasks.
    sleeper = submit(client, job_yaml("sleeper", 3, 2.5, "sleep 600"))
    running = wait_for(lambda: len(r := by_state(client, sleeper, {"RUNNING"})) == 3 and r,
                       120, what="the sleeper on every agent")
    assert sorted(t["host"] for t in running) == AGENTS
    gang = submit(client, job_yaml("gang", 4, 1.0, "sleep 3", gang=True))

    seen: list[Any] = []

    def waiting_whole() -> list[dict[str, Any]] | None:
        ts = tasks(client, gang)
        seen[:] = [(t["instance"], t["state"], t["reason"]) for t in ts]
        if len(ts) == 4 and all(t["state"] in WAITING and "gang" in t["reason"] for t in ts):
            return ts
        return None

    try:
        waiting = wait_for(waiting_whole, 30, what="the whole gang waiting with a reason")
    except pytest.fail.Exception:
        _dump(gang)
        pytest.fail(f"the gang did not wait whole with the engine's reason: {seen}")
    reasons = {t["reason"] for t in waiting}
    assert any("needs 4 tasks, 3 fit" in r for r in reasons), reasons
    time.sleep(2)  # rounds keep refusing it: still nothing placed, let alone running
    assert not any(ever_ran(t) for t in tasks(client, gang))

    kill(client, sleeper)
    freed_at = int(time.time() * 1000)
    assert wait_job(client, gang, TERMINAL)["state"] == "SUCCEEDED"
    done = tasks(client, gang)
    assert all(t["run"] == 1 for t in done), "no member was placed, refused and retried"
    started = [min(h["at"] for h in t["history"] if h["state"] == "RUNNING") for t in done]
    assert max(started) - min(started) < 3000, started  # one round placed them all
    assert min(started) >= freed_at - 5000, (started, freed_at)
