"""API fixtures: a real chdb store, the shipped in-memory publisher, an ASGI client.

The agent log servers are faked with httpx.MockTransport (the API's outbound I/O seam).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "readmodel"))

from api_tokens import ADMIN, authenticator, client_as  # noqa: E402
from readmodel_scenario import full_scenario  # noqa: E402

from peloton.api.app import create_app  # noqa: E402
from peloton.api.publisher import MemoryPublisher  # noqa: E402
from peloton.readmodel.store import Store  # noqa: E402

LOGS = {"job-ok-0-1/stdout": "hello from 0\n", "job-bad-1-2/stderr": "boom\n",
        "job-bad-1-1/stderr": "first boom\n"}


def agent_logs(request: httpx.Request) -> httpx.Response:
    """A fake agent: GET /logs/{run_id}/{stream} on h1; h2 is down."""
    if request.url.host == "h2.agents":
        raise httpx.ConnectError("connection refused", request=request)
    key = request.url.path.removeprefix("/logs/")
    if key in LOGS:
        return httpx.Response(200, text=LOGS[key], headers={"content-type": "text/plain"})
    return httpx.Response(404, json={"error": "no such log"})


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"chdb://{tmp_path / 'chdb'}")
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def loaded(store: Store) -> Store:
    store.insert(full_scenario().rows())
    return store


@pytest.fixture
def publisher() -> MemoryPublisher:
    return MemoryPublisher()


@pytest.fixture
async def app(store: Store, publisher: MemoryPublisher) -> AsyncIterator[FastAPI]:
    """The API with the test tokens of `api_tokens` (tests/model)."""
    agents = httpx.AsyncClient(transport=httpx.MockTransport(agent_logs))
    yield create_app(store, publisher, http_client=agents, clock=lambda: 123_456,
                     status=lambda: {"materializer": {"records": 0}},
                     authenticator=authenticator())
    await agents.aclose()


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An admin's client (see `client_as` for other users, or none)."""
    async with client_as(app, ADMIN) as c:
        yield c
