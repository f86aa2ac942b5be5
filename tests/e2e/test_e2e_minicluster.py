"""End to end on the real minicluster: broker, etcd, every service, agents running real
processes. Each test submits its own jobs, so they share one cluster."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
import yaml
from confluent_kafka import Producer
from e2e_helpers import submit, wait_for, wait_job

from peloton.bus.codec import default_codec
from peloton.minicluster.cluster import Cluster, pid_alive
from peloton.model.jobfile import parse_job_file

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
TERMINAL = {"SUCCEEDED", "FAILED", "KILLED", "REJECTED"}


def peloton(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PELOTON_TOKEN": cluster.admin_token or ""}
    return subprocess.run([sys.executable, "-m", "peloton.cli.main", *args,
                           "--api", cluster.layout.api_url], capture_output=True, text=True,
                          env=env,
                          timeout=180, cwd=ROOT)


def job_yaml(name: str, command: str, instances: int = 3, cpu: float = 0.5,
             max_failures: int = 0) -> str:
    return f"""
name: {name}
instanceCount: {instances}
defaultConfig:
  resource: {{cpuLimit: {cpu}, memLimitMb: 32}}
  command: {{value: {json.dumps(command)}}}
  restartPolicy: {{maxFailures: {max_failures}}}
"""


def test_sample_job_succeeds_via_cli_and_api(minicluster: Cluster, api: httpx.Client) -> None:
    created = peloton(minicluster, "job", "create", str(ROOT / "examples/jobs/hello-batch.yaml"),
                      "--wait", "-o", "json")
    assert created.returncode == 0, created.stderr
    job_id = json.loads(created.stdout)["job_id"]
    got = peloton(minicluster, "job", "get", job_id, "-o", "json")
    assert got.returncode == 0, got.stderr
    job = json.loads(got.stdout)
    assert job["state"] == "SUCCEEDED"
    assert job["task_counts"] == {"SUCCEEDED": 20}
    assert api.get(f"/v1/jobs/{job_id}").json()["state"] == "SUCCEEDED"
    tasks = api.get(f"/v1/jobs/{job_id}/tasks").json()["tasks"]
    hosts = {t["host"] for t in tasks}
    assert hosts <= {"host-1", "host-2", "host-3"} and len(tasks) == 20
    first = next(t for t in tasks if t["instance"] == 0)
    states = [h["state"] for h in first["history"]]
    assert states[0] == "PENDING" and states[-1] == "SUCCEEDED" and "RUNNING" in states
    logs = peloton(minicluster, "task", "logs", job_id, "0")
    assert logs.returncode == 0, logs.stderr
    assert f"instance 0 of {job_id}" in logs.stdout


def test_failing_command_is_retried_then_fails(minicluster: Cluster, api: httpx.Client) -> None:
    job_id = submit(api, job_yaml("always-fails", "echo trying; exit 3", instances=2,
                                  max_failures=2))
    job = wait_job(api, job_id, TERMINAL)
    assert job["state"] == "FAILED"
    for task in api.get(f"/v1/jobs/{job_id}/tasks").json()["tasks"]:
        assert task["state"] == "FAILED"
        assert task["run"] == 3, "maxFailures 2 allows three runs in all"
        assert task["exit_code"] == 3
        failed_runs = {h["run"] for h in task["history"] if h["state"] == "FAILED"}
        assert failed_runs == {1, 2, 3}


def test_invalid_job_file_is_refused_with_field_reasons(api: httpx.Client) -> None:
    bad = job_yaml("bad", "true", cpu=0).replace("instanceCount: 3", "instanceCount: -1")
    resp = api.post("/v1/jobs", content=bad, headers={"content-type": "application/yaml"})
    assert resp.status_code == 400
    body = resp.json()
    assert "error" in body
    text = json.dumps(body["details"])
    assert "instanceCount" in text and "cpuLimit" in text


def test_independent_kafka_client_submits_and_invalid_event_is_rejected(
        minicluster: Cluster, api: httpx.Client) -> None:
    """A team publishes JobSubmitted with confluent-kafka (not our client library)."""
    codec = default_codec()
    now = int(time.time() * 1000)
    good_id = f"ck-{uuid.uuid4().hex[:8]}"
    good = parse_job_file(job_yaml("from-confluent", "echo hi"), good_id, now)
    bad_id = f"ck-bad-{uuid.uuid4().hex[:8]}"
    bad = parse_job_file(job_yaml("from-confluent-bad", "echo hi", max_failures=500),
                         bad_id, now)
    producer = Producer({"bootstrap.servers": minicluster.layout.bootstrap})
    for job_id, body in ((good_id, good), (bad_id, bad)):
        producer.produce("job-submitted", key=job_id, value=codec.encode("JobSubmitted", body))
    assert producer.flush(10) == 0
    assert wait_job(api, good_id, TERMINAL)["state"] == "SUCCEEDED"
    rejected = wait_job(api, bad_id, TERMINAL)
    assert rejected["state"] == "REJECTED"
    assert any("maxFailures" in r for r in rejected["rejection_reasons"])


def test_garbage_goes_to_dead_letters_and_services_keep_going(
        minicluster: Cluster, api: httpx.Client) -> None:
    marker = uuid.uuid4().hex.encode()
    producer = Producer({"bootstrap.servers": minicluster.layout.bootstrap})
    producer.produce("job-submitted", key=b"garbage", value=b"not avro " + marker)
    producer.produce("task-status-reported", key=b"garbage", value=b"\xc3\x01" + marker)
    assert producer.flush(10) == 0

    def letters() -> list[dict[str, object]]:
        rows = api.get("/v1/dead-letters").json()["dead_letters"]
        return [r for r in rows if r["source_topic"] in ("job-submitted", "task-status-reported")
                and r["service"] in ("jobmgr", "hostmgr")]

    found = wait_for(lambda: len({(r["source_topic"], r["service"]) for r in letters()}) >= 3
                     and letters(), what="dead letters from jobmgr and hostmgr")
    reasons = " ".join(str(r["reason"]) for r in found)
    assert "marker" in reasons and "fingerprint" in reasons
    job_id = submit(api, job_yaml("after-garbage", "true", instances=1))
    assert wait_job(api, job_id, TERMINAL)["state"] == "SUCCEEDED"


def test_kill_job_stops_its_processes(minicluster: Cluster, api: httpx.Client) -> None:
    job_id = submit(api, job_yaml("sleeper", "sleep 600", instances=3))
    wait_for(lambda: api.get(f"/v1/jobs/{job_id}").json()["task_counts"].get("RUNNING") == 3,
             what="3 running tasks")
    pids = _task_pids(minicluster, job_id)
    assert len(pids) == 3
    killed = peloton(minicluster, "job", "kill", job_id)
    assert killed.returncode == 0, killed.stderr
    job = wait_job(api, job_id, TERMINAL, timeout=60)
    assert job["state"] == "KILLED"
    wait_for(lambda: not any(pid_alive(p) for p in pids), timeout=20, what="processes gone")


def test_lost_agent_tasks_are_rescheduled(minicluster: Cluster, api: httpx.Client) -> None:
    job_id = submit(api, job_yaml("survivor", "sleep 6", instances=9, cpu=1.0))

    def running_on(host: str) -> list[int]:
        tasks = api.get(f"/v1/jobs/{job_id}/tasks").json()["tasks"]
        return [t["instance"] for t in tasks if t["host"] == host and t["state"] == "RUNNING"]

    victims = wait_for(lambda: running_on("host-1"), what="tasks running on host-1")
    minicluster.kill("agent-host-1")
    try:
        job = wait_job(api, job_id, TERMINAL, timeout=120)
        assert job["state"] == "SUCCEEDED"
        tasks = {t["instance"]: t for t in api.get(f"/v1/jobs/{job_id}/tasks").json()["tasks"]}
        for instance in victims:
            history = tasks[instance]["history"]
            assert any(h["state"] == "LOST" for h in history), history
            assert tasks[instance]["run"] >= 2 and tasks[instance]["host"] != "host-1"
        hosts = {h["host"]: h for h in api.get("/v1/hosts").json()["hosts"]}
        assert hosts["host-1"]["state"] == "LOST"
    finally:
        minicluster.start_service("agent-host-1")
        minicluster.wait_consuming(["agent-host-1"])


def test_restarted_job_manager_repeats_nothing(minicluster: Cluster, api: httpx.Client) -> None:
    """At-least-once: a restart replays the log; the state and the emitted facts stay."""
    job_id = submit(api, job_yaml("before-restart", "true", instances=4))
    assert wait_job(api, job_id, TERMINAL)["state"] == "SUCCEEDED"
    history_before = _history(api, job_id)
    minicluster.stop("jobmgr")
    minicluster.start_service("jobmgr")
    minicluster.wait_consuming(["jobmgr"])
    after = submit(api, job_yaml("after-restart", "true", instances=4))
    assert wait_job(api, after, TERMINAL)["state"] == "SUCCEEDED"
    assert _history(api, job_id) == history_before
    assert api.get(f"/v1/jobs/{job_id}").json()["state"] == "SUCCEEDED"


def _history(api: httpx.Client, job_id: str) -> list[tuple[int, int, str]]:
    tasks = api.get(f"/v1/jobs/{job_id}/tasks").json()["tasks"]
    return sorted((t["instance"], h["run"], h["state"]) for t in tasks for h in t["history"])


def _task_pids(cluster: Cluster, job_id: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if f"PELOTON_JOB_ID={job_id}".encode() in environ and cmdline.startswith(b"sleep"):
            pids.append(int(proc.name))
    return pids


def test_readme_kafka_snippet_submits_a_job(minicluster: Cluster, api: httpx.Client,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's 'submit with any Kafka client' example, run as written."""
    import re

    snippet = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert snippet is not None
    job_id = f"readme-{uuid.uuid4().hex[:8]}"
    code = (snippet.group(1).replace("127.0.0.1:19092", minicluster.layout.bootstrap)
            .replace("nightly-etl-42", job_id)
            .replace('"instance_count": 10', '"instance_count": 2'))
    monkeypatch.chdir(ROOT)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme_snippet"})
    job = wait_job(api, job_id, TERMINAL)
    # accepted and run: the example's `python3 etl.py` has no etl.py here, so it fails (exit 2)
    assert job["state"] == "FAILED", job
    task = api.get(f"/v1/jobs/{job_id}/tasks/0").json()
    assert task["exit_code"] == 2


def test_the_printed_admin_token_works_and_no_token_is_refused(
        minicluster: Cluster, tmp_path: Path) -> None:
    """`peloton cluster up` on the running cluster prints its admin token and points the CLI
    config at it: `peloton job create` then works with no token or --api given; the API
    answers 401 without a token or with a wrong one."""
    config = tmp_path / "config.yaml"
    config.write_text("editor: vim\n")  # an unrelated key the rewrite keeps
    env = {k: v for k, v in os.environ.items() if k not in ("PELOTON_TOKEN", "PELOTON_API")}
    env["PELOTON_CONFIG"] = str(config)
    up = subprocess.run([sys.executable, "-m", "peloton.cli.main", "cluster", "up",
                         "--run-dir", str(minicluster.layout.run_dir)], env=env,
                        capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert up.returncode == 0, up.stderr
    printed = re.search(r"admin token: (\S+)", up.stderr)
    assert printed is not None, up.stderr
    token = printed.group(1)
    assert token == minicluster.admin_token
    written = yaml.safe_load(config.read_text())
    assert written == {"editor": "vim", "api": minicluster.layout.api_url, "token": token}

    created = subprocess.run([sys.executable, "-m", "peloton.cli.main", "job", "create",
                              str(ROOT / "examples/jobs/hello-batch.yaml"), "-o", "json"],
                             env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert created.returncode == 0, created.stderr
    job_id = json.loads(created.stdout)["job_id"]
    url = minicluster.layout.api_url
    assert httpx.get(f"{url}/v1/jobs/{job_id}").status_code == 401
    wrong = httpx.get(f"{url}/v1/jobs", headers={"Authorization": "Bearer " + "x" * 30})
    assert wrong.status_code == 401 and "Bearer" in wrong.headers["www-authenticate"]
    killed = httpx.post(f"{url}/v1/jobs/{job_id}/kill", json={})
    assert killed.status_code == 401
    assert httpx.get(f"{url}/healthz").status_code == 200  # probes need no token
    ok = httpx.post(f"{url}/v1/jobs/{job_id}/kill", json={},
                    headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 202, ok.text
