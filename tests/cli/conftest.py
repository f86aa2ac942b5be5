"""CLI fixtures: a real uvicorn server of the API on a free port, in a thread, over a real
chdb store, with the test tokens of `api_tokens` (the CLI sends the admin's, env
PELOTON_TOKEN). Its publisher plays the cluster: a submitted job runs to its end at once
(through the real job manager core), so `job create --wait` has something to follow."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import typer
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "readmodel"))

from api_tokens import ADMIN, authenticator  # noqa: E402
from readmodel_scenario import Bus, full_scenario, run_job  # noqa: E402

from peloton.api.app import create_app  # noqa: E402
from peloton.api.publisher import MemoryPublisher  # noqa: E402
from peloton.cli import user_cmds  # noqa: E402
from peloton.jobmgr.domain.book import JobBook  # noqa: E402
from peloton.model.event import Event  # noqa: E402
from peloton.readmodel.store import Store  # noqa: E402


class ClusterPublisher(MemoryPublisher):
    """Keeps the events, and runs each submitted job to completion in the store; a job
    named `fails` has instance 0 fail on every run."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store
        self.hooks: list[Callable[[Event], None]] = []  # tests' own plays of other events

    async def publish(self, event: Event) -> None:
        await super().publish(event)
        for hook in self.hooks:
            hook(event)
        if event.type != "JobSubmitted":
            return
        bus, book, body = Bus(), JobBook(), event.body
        bus.add("JobSubmitted", event.key, body)
        bus.add_events(book.handle("JobSubmitted", body, body["submitted_at"] + 1))
        run_job(bus, book, event.key, body["instance_count"], t=body["submitted_at"] + 10,
                fail=0 if body["name"] == "fails" else None)
        self.store.insert(bus.rows())


def agent_logs(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/logs/job-ok-0-1/stdout":
        return httpx.Response(200, text="hello from 0\n")
    if request.url.path == "/logs/job-ok-1-1/stdout":
        return httpx.Response(200, text="".join(f"line {i}\n" for i in range(1, 6)))
    return httpx.Response(404)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ClusterPublisher]]:
    store = Store(f"chdb://{tmp_path_factory.mktemp('cli') / 'chdb'}")
    store.insert(full_scenario().rows())
    publisher = ClusterPublisher(store)
    agents = httpx.AsyncClient(transport=httpx.MockTransport(agent_logs))
    port = free_port()
    app = create_app(store, publisher, http_client=agents, authenticator=authenticator())
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}", publisher
    finally:
        server.should_exit = True
        thread.join(10)
        store.close()


@pytest.fixture
def api(served: tuple[str, ClusterPublisher]) -> str:
    return served[0]


@pytest.fixture(autouse=True)
def admin_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The CLI sends the test admin token (env PELOTON_TOKEN) and reads no user config."""
    monkeypatch.setenv("PELOTON_TOKEN", ADMIN)
    monkeypatch.setenv("PELOTON_CONFIG", str(tmp_path / "no-peloton-config.yaml"))
    return ADMIN


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    user_cmds.register(app)
    return app
