"""Services, stateful and daemon jobs end to end on one minicluster (3 agents x 4 cpus,
real processes): an HTTP service passes its HTTP health check, an instance that exits is
restarted with backoff, one that fails its health check is restarted, a stateful
instance finds its volume again on the same host, a daemon runs once per host, and a
drained host loses its runs (a service's replacement runs before its old run stops)
while the daemon stops last, through a kill -9 of the job manager and of each resource
manager right after the drain began; a rolling update never has more than
--max-unavailable instances down (polled all along) through kill -9 of the job manager and
of each resource manager in turn, and a failing health check rolls an update back. The
restart backoff base is 1 s here (PELOTON_JOBMGR_RESTART_BACKOFF_S)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from e2e_helpers import api_client, submit, wait_for, wait_job

from peloton.minicluster.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def cluster(minicluster_factory: Any) -> Iterator[Cluster]:
    old = os.environ.get("PELOTON_JOBMGR_RESTART_BACKOFF_S")
    os.environ["PELOTON_JOBMGR_RESTART_BACKOFF_S"] = "1"
    try:
        yield minicluster_factory(agents=3, cpu=4.0)
    finally:
        if old is None:
            os.environ.pop("PELOTON_JOBMGR_RESTART_BACKOFF_S", None)
        else:
            os.environ["PELOTON_JOBMGR_RESTART_BACKOFF_S"] = old


@pytest.fixture()
def api(cluster: Cluster) -> Iterator[httpx.Client]:
    with api_client(cluster) as client:
        yield client


def tasks(api: httpx.Client, job_id: str) -> list[dict[str, Any]]:
    return list(api.get(f"/v1/jobs/{job_id}/tasks").json()["tasks"])


def service(name: str, command: str, *, n: int = 1, kind: str = "SERVICE",
            extra: str = "", cpu: float = 0.5, sla: str = "") -> str:
    return f"""
name: {name}
type: {kind}
instanceCount: {n}
sla: {{priority: 1{sla}}}
defaultConfig:
  resource: {{cpuLimit: {cpu}, memLimitMb: 32}}
  command: {{value: {json.dumps(command)}}}
{extra}"""


HTTP = """\
  ports: [{name: http}]
  healthCheck: {type: HTTP, httpCheck: {path: /, port: http}, initialIntervalSecs: 1,
                intervalSecs: 1, timeoutSecs: 2}
"""
CHECK_OK = """\
  healthCheck: {type: COMMAND, commandCheck: {command: 'true'}, initialIntervalSecs: 1,
                intervalSecs: 1, maxConsecutiveFailures: 1}
"""


def test_an_http_service_becomes_healthy(api: httpx.Client) -> None:
    job = submit(api, service("web", "exec python3 -m http.server $PORT_HTTP", n=2,
                              extra=HTTP))
    wait_job(api, job, {"RUNNING"}, 60)
    wait_for(lambda: [t["health"] for t in tasks(api, job)] == ["HEALTHY", "HEALTHY"], 60,
             what="both instances healthy")
    assert api.get(f"/v1/jobs/{job}").json()["state"] == "RUNNING"
    api.post(f"/v1/jobs/{job}/kill", json={})
    wait_job(api, job, {"KILLED"}, 60)


def test_an_instance_that_exits_is_restarted_with_backoff(api: httpx.Client) -> None:
    job = submit(api, service("crashy", "sleep 0.5; exit 3"))
    task = wait_for(lambda: next((t for t in tasks(api, job) if t["run"] >= 3), None), 90,
                    what="a third run")
    assert "backoff" in " ".join(
        h["reason"] for h in api.get(f"/v1/jobs/{job}/tasks/0").json()["history"])
    assert api.get(f"/v1/jobs/{job}").json()["state"] in ("RUNNING", "PENDING")
    assert task["failures"] >= 2
    api.post(f"/v1/jobs/{job}/kill", json={})
    wait_job(api, job, {"KILLED"}, 60)


def test_a_failing_health_check_restarts_the_instance(api: httpx.Client) -> None:
    check = """\
  healthCheck: {type: COMMAND, commandCheck: {command: "false"}, initialIntervalSecs: 1,
                intervalSecs: 1, maxConsecutiveFailures: 2}
"""
    job = submit(api, service("sick", "sleep 600", extra=check))
    wait_for(lambda: tasks(api, job)[0]["run"] >= 2, 60, what="a restart")
    history = api.get(f"/v1/jobs/{job}/tasks/0").json()["history"]
    assert any("health check failed" in h["reason"] for h in history), history
    api.post(f"/v1/jobs/{job}/kill", json={})
    wait_job(api, job, {"KILLED"}, 60)


def test_a_stateful_instance_keeps_its_volume_and_its_host(api: httpx.Client,
                                                          cluster: Cluster) -> None:
    command = ('n=$(cat "$PELOTON_VOLUME/count" 2>/dev/null || echo 0); '
               'echo $((n+1)) > "$PELOTON_VOLUME/count"; sleep 0.5; exit 1')
    job = submit(api, service("db", command, kind="STATEFUL",
                              extra="  volume: {containerPath: /data, sizeMB: 10}\n"))
    wait_for(lambda: tasks(api, job)[0]["run"] >= 4, 90, what="three runs ended")
    history = api.get(f"/v1/jobs/{job}/tasks/0").json()["history"]
    hosts = {h["host"] for h in history if h["host"]}
    assert len(hosts) == 1, history  # every run on the volume's host
    (host,) = hosts
    api.post(f"/v1/jobs/{job}/kill", json={})
    wait_job(api, job, {"KILLED"}, 60)
    volumes = list(cluster.layout.sandbox_dir.rglob(f"volumes/{job}/0/count"))
    assert volumes, "no volume directory"
    assert int(volumes[0].read_text()) >= 3  # each run saw the count the one before left
    assert host in str(volumes[0])


def test_a_daemon_runs_once_per_host_and_a_drain_moves_work_off_a_host(
        api: httpx.Client, cluster: Cluster) -> None:
    daemon = submit(api, """
name: node-agent
type: DAEMON
defaultConfig:
  resource: {cpuLimit: 0.2, memLimitMb: 16}
  command: {value: "sleep 600"}
""")
    running = wait_for(lambda: [t for t in tasks(api, daemon) if t["state"] == "RUNNING"]
                       if len([t for t in tasks(api, daemon) if t["state"] == "RUNNING"]) == 3
                       else None, 60, what="a daemon instance on each of 3 hosts")
    assert len({t["host"] for t in running}) == 3
    web = submit(api, service("api", "sleep 600", n=2, sla=", maximumUnavailableInstances: 1"))
    wait_job(api, web, {"RUNNING"}, 60)
    wait_for(lambda: all(t["state"] == "RUNNING" for t in tasks(api, web)), 60)
    target = tasks(api, web)[0]["host"]
    r = api.post(f"/v1/hosts/{target}/maintenance", json={"action": "start"})
    assert r.status_code == 202, r.text
    # kill -9 of the drainer right after the drain began, then of each resource manager
    # in turn (so the leader among them), which admits the replacements
    for name in ("jobmgr", "resmgr-1", "resmgr-2"):
        cluster.kill(name)
        cluster.start_service(name)

    def drained() -> bool:
        hosts = {h["host"]: h for h in api.get("/v1/hosts").json()["hosts"]}
        return hosts[target]["maintenance_state"] in ("DRAINED", "DOWN")
    wait_for(drained, 90, what=f"{target} drained")
    on_target = [t for t in tasks(api, web) + tasks(api, daemon)
                 if t["host"] == target and t["state"] in ("RUNNING", "LAUNCHED", "STARTING")]
    assert on_target == []
    wait_for(lambda: all(t["state"] == "RUNNING" and t["host"] != target
                         for t in tasks(api, web)), 60, what="the service back at 2")
    # replacement first: each service run on the host ended only after its replacement
    # was RUNNING elsewhere (event times from the task history)
    replaced = 0
    for t in tasks(api, web):
        old_runs = {h["run"] for h in t["history"] if h["host"] == target}
        for run in old_runs:
            ended = [h["at"] for h in t["history"] if h["run"] == run and h["state"] in (
                "KILLED", "FAILED", "LOST")]
            started = [h["at"] for h in t["history"] if h["run"] > run
                       and h["state"] == "RUNNING"]
            if ended:
                assert started and min(started) <= min(ended), t["history"]
                replaced += 1
    assert replaced >= 1
    hosts = {h["host"]: h for h in api.get("/v1/hosts").json()["hosts"]}
    action = "complete" if hosts[target]["maintenance_state"] == "DOWN" else "cancel"
    assert api.post(f"/v1/hosts/{target}/maintenance",
                    json={"action": action}).status_code == 202
    for job in (web, daemon):
        api.post(f"/v1/jobs/{job}/kill", json={})
        wait_job(api, job, {"KILLED"}, 60)


def _update(api: httpx.Client, job: str, yaml_text: str, **params: Any) -> str:
    r = api.post(f"/v1/jobs/{job}/update", content=yaml_text, params=params,
                 headers={"content-type": "application/yaml"})
    assert r.status_code == 202, r.text
    return str(r.json()["update_id"])


def _update_state(api: httpx.Client, update_id: str) -> str | None:
    r = api.get(f"/v1/updates/{update_id}")
    return str(r.json()["state"]) if r.status_code == 200 else None


def test_a_rolling_update_survives_a_jobmgr_crash_and_keeps_max_unavailable(
        api: httpx.Client, cluster: Cluster) -> None:
    sla = ", maximumUnavailableInstances: 1"
    job = submit(api, service("roll", "sleep 600", n=4, extra=CHECK_OK, sla=sla))
    wait_for(lambda: [t["health"] for t in tasks(api, job)] == ["HEALTHY"] * 4, 60,
             what="4 healthy instances")
    update_id = _update(api, job, service("roll", "sleep 601", n=4, extra=CHECK_OK, sla=sla),
                        batch_size=2, max_unavailable=1)
    worst = 0
    killed = False
    while (state := _update_state(api, update_id)) not in ("SUCCEEDED", "FAILED",
                                                           "ROLLED_BACK", "ABORTED"):
        now = tasks(api, job)
        down = sum(1 for t in now if t["state"] != "RUNNING" or t["health"] != "HEALTHY")
        worst = max(worst, down)
        if not killed and any(t.get("config_version") == 2 for t in now):
            # kill -9 in the middle of the update: the job manager (which drives it), then
            # each resource manager in turn (so the leader among them) while it goes on
            for name in ("jobmgr", "resmgr-1", "resmgr-2"):
                cluster.kill(name)
                cluster.start_service(name)
            killed = True
        time.sleep(0.2)
    assert state == "SUCCEEDED" and killed
    assert worst <= 1, worst  # checked all along, through the crash
    assert {t["config_version"] for t in tasks(api, job)} == {2}
    api.post(f"/v1/jobs/{job}/kill", json={})
    wait_job(api, job, {"KILLED"}, 60)


def test_a_failing_health_check_rolls_the_update_back(api: httpx.Client) -> None:
    good = CHECK_OK
    job = submit(api, service("canary", "sleep 600", n=2, extra=good))
    wait_for(lambda: [t["health"] for t in tasks(api, job)] == ["HEALTHY"] * 2, 60)
    bad = service("canary", "sleep 600", n=2, extra=good.replace("'true'", "'false'"))
    update_id = _update(api, job, bad, batch_size=1, max_failures=1,
                        max_instance_retries=1, rollback_on_failure="true")
    wait_for(lambda: _update_state(api, update_id) == "ROLLED_BACK", 120,
             what="the update rolled back")
    wait_for(lambda: [(t["config_version"], t["health"]) for t in tasks(api, job)]
             == [(1, "HEALTHY")] * 2, 60, what="both instances back on version 1")
    r = api.post(f"/v1/jobs/{job}/update", content=bad, params={"batch_size": -1},
                 headers={"content-type": "application/yaml"})
    assert r.status_code == 400, r.text
    api.post(f"/v1/jobs/{job}/kill", json={})
    wait_job(api, job, {"KILLED"}, 60)


def test_stopped_instances_start_again(api: httpx.Client) -> None:
    job = submit(api, service("stopstart", "sleep 600", n=2))
    wait_for(lambda: [t["state"] for t in tasks(api, job)] == ["RUNNING"] * 2, 60)
    api.post(f"/v1/jobs/{job}/stop", params={"instances": "1"})
    wait_for(lambda: tasks(api, job)[1]["state"] == "KILLED", 60)
    assert tasks(api, job)[0]["state"] == "RUNNING"
    assert api.post(f"/v1/jobs/{job}/start", params={"instances": "1"}).status_code == 202
    wait_for(lambda: [(t["state"], t["run"]) for t in tasks(api, job)]
             == [("RUNNING", 1), ("RUNNING", 2)], 60, what="instance 1 running again")
    assert api.post(f"/v1/jobs/{job}/stop").status_code == 202  # the whole job: STOPPED
    wait_job(api, job, {"STOPPED"}, 60)
    assert [t["state"] for t in tasks(api, job)] == ["KILLED"] * 2
    assert api.post(f"/v1/jobs/{job}/start").status_code == 202  # runs again, whole
    wait_for(lambda: [(t["state"], t["run"]) for t in tasks(api, job)]
             == [("RUNNING", 2), ("RUNNING", 3)], 60, what="the stopped job running again")
    wait_job(api, job, {"RUNNING"}, 30)
    assert api.post(f"/v1/jobs/{job}/kill", json={}).status_code == 202  # a kill ends it
    wait_job(api, job, {"KILLED"}, 60)
    r = api.post(f"/v1/jobs/{job}/start")
    assert r.status_code == 409 and "submit it again" in r.text
