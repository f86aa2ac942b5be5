"""History and time travel over HTTP (peloton.api.history): a pool's series, the state of
a job, a pool and the cluster as of a past instant, over a real chdb read model.

The strong check: for several instants t, the full store's `?at=t` answers equal the live
answers of the same API over a second store holding only the facts up to t."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_tokens import ADMIN, authenticator, client_as
from history_scenario import history_scenario, rows_until

from peloton.api.app import create_app
from peloton.api.publisher import MemoryPublisher
from peloton.readmodel.store import Store

NOW = 123_456  # the app fixture's clock: after every fact of the scenario


@pytest.fixture
async def hist(store: Store, client: httpx.AsyncClient) -> httpx.AsyncClient:
    store.insert(history_scenario().rows())
    return client


async def _get(c: httpx.AsyncClient, url: str, **params: Any) -> httpx.Response:
    return await c.get(url, params=params)


async def test_pool_history_every_cycle_and_sampled(hist: httpx.AsyncClient) -> None:
    r = await _get(hist, "/v1/pools/prod/batch/history", **{"from": "0", "to": "20000"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["pool"] == "/prod/batch" and body["from"] == 0 and body["to"] == 20_000
    assert body["step_ms"] is None and body["sampling"] == "every cycle"
    points = body["points"]
    assert len(points) == body["cycles"] >= 10
    assert [p["at"] for p in points] == sorted(p["at"] for p in points)
    assert {p["entitlement"]["cpu"] for p in points} >= {4.0, 5.0}  # it moved
    assert {p["allocation"]["cpu"] for p in points} >= {0.0, 2.0}
    assert all(set(p) >= {"entitlement", "allocation", "demand", "cycle"} for p in points)
    # ISO 8601 and relative bounds name the same range
    iso = await _get(hist, "/v1/pools/prod/batch/history",
                     **{"from": "1970-01-01T00:00:00Z", "to": "1970-01-01T00:00:20"})
    assert iso.json()["points"] == points
    rel = await _get(hist, "/v1/pools/prod/batch/history", **{"from": "-2m"})
    assert rel.json()["from"] == NOW - 120_000 and rel.json()["to"] == NOW
    sampled = (await _get(hist, "/v1/pools/prod/batch/history",
                          **{"from": "0", "to": "19999", "step": "5000"})).json()
    assert sampled["step_ms"] == 5_000 and "last cycle" in sampled["sampling"]
    assert len(sampled["points"]) <= 4
    assert sum(p["cycles"] for p in sampled["points"]) == body["cycles"]


@pytest.mark.parametrize("params, field", [
    ({"from": "yesterday"}, "from"), ({"to": "12:99"}, "to"),
    ({"from": "5000", "to": "10"}, "from"), ({"from": str(NOW + 1)}, "from"),
    ({"from": "0", "to": "100000000", "step": "1"}, "step"),
])
async def test_pool_history_bad_input(hist: httpx.AsyncClient, params: dict[str, str],
                                      field: str) -> None:
    r = await _get(hist, "/v1/pools/prod/batch/history", **params)
    assert r.status_code == 400, r.text
    assert r.json()["details"][0]["field"] == field


async def test_pool_history_strict_query_and_unknown_pool(hist: httpx.AsyncClient) -> None:
    r = await _get(hist, "/v1/pools/prod/batch/history", since="0")
    assert r.status_code == 400 and r.json()["error"] == "unknown query parameter"
    r = await _get(hist, "/v1/pools/prod/batch/history", step="0")
    assert r.status_code == 400
    r = await _get(hist, "/v1/pools/nope/history", **{"from": "0"})
    assert r.status_code == 200 and r.json()["points"] == []
    assert (await _get(hist, "/v1/pools/prod/batch")).status_code == 200  # still routed


async def test_job_at(hist: httpx.AsyncClient) -> None:
    live = (await _get(hist, "/v1/jobs/job-bad")).json()
    assert live["state"] == "FAILED"
    early = (await _get(hist, "/v1/jobs/job-bad", at="4001")).json()
    assert early["state"] == "PENDING" and early["task_counts"] == {"PENDING": 2}
    assert early["name"] == "bad" and early["created_at"] == 4_001
    mid = (await _get(hist, "/v1/jobs/job-bad", at="5040")).json()
    assert mid["state"] == "RUNNING"
    r = await _get(hist, "/v1/jobs/job-bad", at="3999")
    assert r.status_code == 404 and "did not exist at 3999" in r.json()["error"]
    assert "first seen at 4000" in r.json()["error"]
    r = await _get(hist, "/v1/jobs/no-such-job", at="3999")
    assert r.status_code == 404 and "not found" in r.json()["error"]
    for bad in (str(NOW + 1), "+1h", "soon", "-1y"):
        r = await _get(hist, "/v1/jobs/job-bad", at=bad)
        assert r.status_code == 400 and r.json()["details"][0]["field"] == "at", bad
    assert (await _get(hist, "/v1/jobs/job-bad", at="now")).json()["state"] == "FAILED"


async def test_pool_and_cluster_at(hist: httpx.AsyncClient) -> None:
    r = await _get(hist, "/v1/pools/prod/batch", at="3500")
    assert r.status_code == 200 and r.json()["cycle"] == 4 and r.json()["at"] == 3_000
    assert r.json()["allocation"]["cpu"] == 2.0
    r = await _get(hist, "/v1/pools/prod/batch", at="500")
    assert r.status_code == 404 and "no entitlement cycle" in r.json()["error"]
    c = (await _get(hist, "/v1/cluster", at="4001")).json()
    assert c["at"] == 4_001 and c["jobs"] == {"PENDING": 1, "SUCCEEDED": 1}
    assert c["job_count"] == 2 and c["host_states"] == {"LOST": 1, "UP": 1}
    assert {p["pool"] for p in c["pools"]} >= {"/", "/prod/batch"}
    now = (await _get(hist, "/v1/cluster")).json()
    assert now["at"] == NOW and now["job_count"] == 5
    assert (await _get(hist, "/v1/cluster", at="tomorrow")).status_code == 400
    assert (await _get(hist, "/v1/cluster", at=str(NOW + 1))).status_code == 400
    async with client_as(hist._transport.app, None) as anon:  # type: ignore[attr-defined]
        assert (await anon.get("/v1/cluster")).status_code == 401


@pytest.fixture
async def prefix_api(tmp_path: Path) -> AsyncIterator[tuple[Store, httpx.AsyncClient]]:
    """A second store (another database in the same chdb directory) and its API."""
    prefix = Store(f"chdb://{tmp_path / 'chdb'}", database="prefix")
    app = create_app(prefix, MemoryPublisher(), clock=lambda: NOW,
                     authenticator=authenticator())
    async with client_as(app, ADMIN) as c:
        yield prefix, c
    prefix.close()


async def test_at_equals_the_live_api_of_the_prefix(
        hist: httpx.AsyncClient, prefix_api: tuple[Store, httpx.AsyncClient]) -> None:
    prefix, live = prefix_api
    bus = history_scenario()
    for t in (1_000, 2_001, 3_030, 4_100, 5_045, 6_500, 7_001, 9_030, 12_522):
        prefix.insert(rows_until(bus, t))  # idempotent: rows already there collapse
        for job in ("job-ok", "job-bad", "job-wait", "job-rej", "job-svc"):
            was = await _get(live, f"/v1/jobs/{job}")
            past = await _get(hist, f"/v1/jobs/{job}", at=str(t))
            assert past.status_code == was.status_code, (job, t)
            if was.status_code == 200:
                a, b = was.json(), past.json()
                for k in ("state", "previous_state", "task_counts", "submitted_at",
                          "created_at", "rejection_reasons", "kill_request", "updated_at"):
                    assert a[k] == b[k], (job, t, k)
        was_pools = (await _get(live, "/v1/pools")).json()["pools"]
        for p in was_pools:
            if p["cycle"] == 0:
                continue  # configured, no cycle yet: not history
            past = (await _get(hist, f"/v1/pools{p['pool']}", at=str(t))).json()
            for k in ("cycle", "at", "entitlement", "allocation", "demand"):
                assert past[k] == p[k], (p["pool"], t, k)


async def test_job_projected_before_job_history(store: Store, hist: httpx.AsyncClient) -> None:
    """A job whose facts were read before `job_events` existed: 404 that says so."""
    from readmodel_scenario import Bus, submit

    from peloton.jobmgr.domain.book import JobBook

    bus = Bus()
    submit(bus, JobBook(), "job-old", 1, t=2_000)
    store.insert([r for r in bus.rows() if r.table != "job_events"])
    assert (await _get(hist, "/v1/jobs/job-old")).status_code == 200
    r = await _get(hist, "/v1/jobs/job-old", at="5000")
    assert r.status_code == 404 and "no state history" in r.json()["error"]
