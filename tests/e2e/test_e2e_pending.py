"""Why pending on a real minicluster started as `peloton cluster up` starts it
(reserve_default): /default reserves the cluster so a first non-preemptible job runs; a
job with a task larger than any host is warned about at submission, and
`peloton job create --wait` stops with the reason instead of waiting forever."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from e2e_helpers import api_client, submit, wait_for, wait_job

from peloton.minicluster.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
JOB = """\
name: {name}
sla: {{preemptible: {preemptible}}}
instanceCount: 1
defaultConfig:
  resource: {{cpuLimit: {cpu}, memLimitMb: 32}}
  command: {{value: "echo hi"}}
"""


@pytest.fixture(scope="module")
def cluster(minicluster_factory: object) -> Cluster:
    return minicluster_factory(reserve_default=True)  # type: ignore[operator, no-any-return]


def test_the_default_pool_reserves_the_cluster_so_non_preemptible_work_runs(
        cluster: Cluster) -> None:
    with api_client(cluster) as api:
        def reserved() -> bool:
            pool = api.get("/v1/pools/default").json()
            return bool(pool["reservation"].get("cpu") == 12.0)
        wait_for(reserved, 60, what="/default reserving 12 cpus")
        job_id = submit(api, JOB.format(name="first", preemptible="false", cpu=0.5))
        assert wait_job(api, job_id, {"SUCCEEDED", "FAILED"}, 120)["state"] == "SUCCEEDED"


def test_a_task_larger_than_any_host_is_warned_and_wait_stops(cluster: Cluster,
                                                              tmp_path: Path) -> None:
    text = JOB.format(name="huge", preemptible="true", cpu=64)
    with api_client(cluster) as api:
        r = api.post("/v1/jobs", content=text, headers={"content-type": "application/yaml"})
        assert r.status_code == 202
        assert [w["code"] for w in r.json()["warnings"]] == ["NO_HOST_FITS"]
        _kill(api, r.json()["job_id"])
    path = tmp_path / "huge.yaml"
    path.write_text(text)
    env = {**os.environ, "PELOTON_TOKEN": cluster.admin_token or ""}
    done = subprocess.run(
        [sys.executable, "-m", "peloton.cli.main", "job", "create", str(path), "--wait",
         "--job-id", "huge-wait", "--timeout", "150", "--api", cluster.layout.api_url],
        capture_output=True, text=True, env=env, timeout=200, cwd=ROOT)
    err = " ".join(done.stderr.split())
    assert done.returncode == 1, done.stderr
    assert "warning: NO_HOST_FITS" in err
    assert "can never run as configured" in err and "did not finish within" not in err
    with api_client(cluster) as api:
        job = api.get("/v1/jobs/huge-wait").json()
        assert job["pending"]["permanent"] and "NO_HOST_FITS" in job["pending"]["by_code"]
        _kill(api, "huge-wait")


def _kill(api: httpx.Client, job_id: str) -> None:
    def known() -> bool:
        return api.post(f"/v1/jobs/{job_id}/kill").status_code == 202
    wait_for(known, 30, what=f"job {job_id} to be known")
