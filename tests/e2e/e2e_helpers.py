"""Helpers for end-to-end tests (import as `from e2e_helpers import ...`)."""

from __future__ import annotations

from typing import Any

import httpx
from polling import wait_for

from peloton.minicluster.cluster import Cluster

__all__ = ["wait_for", "job_state", "wait_job", "submit", "api_client"]


def api_client(cluster: Cluster) -> httpx.Client:
    """A client of the cluster's API sending its admin token (the one `up` made)."""
    return httpx.Client(base_url=cluster.layout.api_url, timeout=10,
                        headers=cluster.api_headers)


def job_state(client: httpx.Client, job_id: str) -> str | None:
    resp = client.get(f"/v1/jobs/{job_id}")
    return resp.json()["state"] if resp.status_code == 200 else None


def wait_job(client: httpx.Client, job_id: str, states: set[str], timeout: float = 90.0
             ) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        resp = client.get(f"/v1/jobs/{job_id}")
        if resp.status_code == 200 and resp.json()["state"] in states:
            return dict(resp.json())
        return None

    return dict(wait_for(check, timeout, what=f"job {job_id} in {sorted(states)}"))


def submit(client: httpx.Client, yaml_text: str, job_id: str | None = None) -> str:
    params = {"job_id": job_id} if job_id else {}
    resp = client.post("/v1/jobs", content=yaml_text, params=params,
                       headers={"content-type": "application/yaml"})
    assert resp.status_code == 202, resp.text
    return str(resp.json()["job_id"])
