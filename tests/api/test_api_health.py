"""The API's /healthz, /readyz and /metrics (peloton.api.health): no token needed,
readiness from the store, the publisher and the process's checks."""

from __future__ import annotations

from pathlib import Path

from api_tokens import client_as
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from peloton.api.app import create_app
from peloton.api.publisher import MemoryPublisher
from peloton.bus.metrics import EVENTS_CONSUMED
from peloton.readmodel.store import Store


async def test_open_without_a_token(app: FastAPI) -> None:
    async with client_as(app, None) as anonymous:
        health = await anonymous.get("/healthz")
        assert (health.status_code, health.json()) == (
            200, {"ok": True, "materializer": {"records": 0}})
        ready = await anonymous.get("/readyz")
        assert (ready.status_code, ready.json()) == (
            200, {"ready": True, "checks": {"store": True, "publisher": True}})
        assert (await anonymous.get("/metrics")).status_code == 200
        assert (await anonymous.get("/v1/jobs")).status_code == 401  # the rest is not open


async def test_not_ready_while_the_publisher_fails_or_not_consuming(
        store: Store) -> None:
    publisher = MemoryPublisher()
    consuming = [False]
    app = create_app(store, publisher, checks=lambda: {"consuming": consuming[0]})
    async with client_as(app, None) as c:
        r = await c.get("/readyz")
        assert r.status_code == 503
        assert r.json() == {"error": "not ready: consuming",
                            "details": [{"check": "consuming", "message": "consuming: not yet"}],
                            "ready": False,
                            "checks": {"store": True, "publisher": True, "consuming": False}}
        consuming[0] = True
        assert (await c.get("/readyz")).status_code == 200
        publisher.fail = "broker down"
        r = await c.get("/readyz")
        assert (r.status_code, r.json()["error"]) == (503, "not ready: publisher")
        assert (await c.get("/healthz")).status_code == 200  # unready, not dead


async def test_not_ready_when_the_store_is_gone(tmp_path: Path, store: Store) -> None:
    app = create_app(store, MemoryPublisher())
    store.close()
    async with client_as(app, None) as c:
        r = await c.get("/readyz")
        body = r.json()
        assert r.status_code == 503 and body["checks"]["store"] is False
        assert body["details"][0]["check"] == "store"
        assert "Traceback" not in r.text and str(tmp_path) not in r.text  # nothing leaked
        assert (await c.get("/healthz")).status_code == 200


async def test_metrics_scrape(app: FastAPI) -> None:
    EVENTS_CONSUMED.labels("readmodel", "job-events").inc()
    async with client_as(app, None) as c:
        r = await c.get("/metrics")
        assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        families = {f.name: f for f in text_string_to_metric_families(r.text)}
        consumed = families["peloton_events_consumed"].samples
        assert any(s.labels == {"service": "readmodel", "topic": "job-events"}
                   and s.value >= 1 for s in consumed)
        bad = await c.get("/metrics", params={"name[]": "'; DROP"})
        assert 200 <= bad.status_code < 500  # a malformed scrape is never a server error
        assert (await c.post("/metrics")).status_code == 405


async def test_the_three_are_in_the_openapi_without_security(app: FastAPI) -> None:
    async with client_as(app, None) as c:
        spec = (await c.get("/openapi.json")).json()
    for path in ("/healthz", "/readyz", "/metrics"):
        op = spec["paths"][path]["get"]
        assert op.get("security") in (None, []), path
    assert "503" in spec["paths"]["/readyz"]["get"]["responses"]
