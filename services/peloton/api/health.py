"""The API process's /healthz, /readyz and /metrics, on the API's own port.

These three answer without a token (peloton.api.auth's OPEN_PATHS): probes and Prometheus
scrapes carry none. Never move them behind authentication.

Contract:
- `GET /healthz`: 200 `{"ok": true, ...status()}` whenever the API's event loop answers
  (this handler runs on it; the read-model materializer shares the loop). It does not
  touch the store or the broker: a ClickHouse or Kafka outage makes the API unready, not
  dead, so Kubernetes does not restart it for someone else's failure.
- `GET /readyz`: 200 `{"ready": true, "checks": {...}}` when the read model's store
  answers a ping (within `STORE_TIMEOUT_S`), the publisher reaches the broker (its
  `connected()`, where it has one) and every extra check of the process (`checks()`:
  the materializer's "consuming", its partitions assigned) passes. Otherwise 503 with the
  API's error shape plus the same fields: `{"error", "details": [{"check", "message"}],
  "ready": false, "checks"}`; the details say why without internals (exception types only).
- `GET /metrics`: the process's Prometheus registry (peloton.bus.metrics: the
  materializer's consumed records and lag, the API's published records, process
  metrics) in the text format 0.0.4.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import REGISTRY, generate_latest
from pydantic import BaseModel

from peloton.api.errors import ErrorBody
from peloton.bus.health import METRICS_CONTENT_TYPE
from peloton.readmodel.store import Store

__all__ = ["health_router", "Readiness", "STORE_TIMEOUT_S"]

STORE_TIMEOUT_S = 2.0


class Readiness(BaseModel):
    ready: bool
    checks: dict[str, bool]


def health_router(store: Store, publisher: Any,
                  status: Callable[[], dict[str, Any]] | None = None,
                  checks: Callable[[], dict[str, bool]] | None = None) -> APIRouter:
    router = APIRouter(tags=["cluster"])

    @router.get("/healthz")
    async def healthz() -> dict[str, Any]:
        """Liveness: the API's event loop answers."""
        return {"ok": True, **(status() if status is not None else {})}

    @router.get("/readyz", response_model=Readiness,
                responses={503: {"model": ErrorBody}})
    async def readyz() -> Any:
        """Readiness: store reachable, publisher connected, materializer consuming."""
        problems: dict[str, str] = {}
        results: dict[str, bool] = {}
        results["store"] = await _passes(_ping(store), "store", problems)
        connected = getattr(publisher, "connected", None)
        results["publisher"] = (await _passes(connected(), "publisher", problems)
                                if callable(connected) else True)
        for name, ok in (checks() if checks is not None else {}).items():
            results[name] = ok
            if not ok:
                problems[name] = f"{name}: not yet"
        if not problems:
            return {"ready": True, "checks": results}
        return JSONResponse(status_code=503, content={
            "error": "not ready: " + ", ".join(sorted(problems)),
            "details": [{"check": k, "message": v} for k, v in sorted(problems.items())],
            "ready": False, "checks": results})

    @router.get("/metrics", response_class=Response,
                responses={200: {"content": {"text/plain": {}},
                                 "description": "Prometheus text format 0.0.4"}})
    async def metrics() -> Response:
        """Prometheus metrics of the API process."""
        data = await asyncio.to_thread(generate_latest, REGISTRY)
        return Response(content=data, media_type=None,
                        headers={"Content-Type": METRICS_CONTENT_TYPE})

    return router


async def _ping(store: Store) -> bool:
    await asyncio.wait_for(asyncio.to_thread(store.ping), STORE_TIMEOUT_S)
    return True


async def _passes(check: Awaitable[Any], name: str, problems: dict[str, str]) -> bool:
    """Await a check; a False result, a timeout or an error is a problem named `name`."""
    try:
        ok = bool(await check)
    except TimeoutError:
        problems[name] = f"{name}: no answer within {STORE_TIMEOUT_S:g}s"
        return False
    except Exception as exc:  # any failure of a dependency means "not ready", by type
        problems[name] = f"{name}: unavailable ({type(exc).__name__})"
        return False
    if not ok:
        problems[name] = f"{name}: unavailable"
    return ok
