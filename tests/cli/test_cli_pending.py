"""Why pending in the CLI: `job create` prints submission warnings, `job create --wait`
stops (exit 1, the reason printed) when the job can never run as configured, `job get`
shows the queue position and reasons, `task list` the code.

A real API server over chdb (as conftest's), whose publisher plays a cluster that never
has room: a submitted job goes through the real job manager core, is admitted, and the
real placement engine fails it against the read model's host h1 (8 cpus, 2 free)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
import uvicorn
from api_tokens import authenticator
from readmodel_scenario import RES, Bus, _feed, full_scenario
from typer.testing import CliRunner

from peloton.api.app import create_app
from peloton.api.publisher import MemoryPublisher
from peloton.cli import user_cmds
from peloton.jobmgr.domain.book import JobBook
from peloton.model.event import Event
from peloton.model.resources import Resources
from peloton.placement.domain import HostView, TaskRequest, place
from peloton.readmodel.store import Store

runner = CliRunner()
# h1 as the placement engine sees it: 8 cpus, 2 of them free
H1 = HostView("h1", Resources.from_mapping(RES), Resources(cpu=2, memory=8192))
JOB = """\
name: {name}
owner: me
instanceCount: 1
respool: /prod/batch
defaultConfig:
  resource: {{cpuLimit: {cpu}, memLimitMb: 64}}
  command: {{value: "echo hi"}}
"""


class NoRoomPublisher(MemoryPublisher):
    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store

    async def publish(self, event: Event) -> None:
        await super().publish(event)
        if event.type != "JobSubmitted":
            return
        bus, book, body, at = Bus(), JobBook(), event.body, event.body["submitted_at"]
        _feed(bus, book, "JobSubmitted", event.key, body, at + 1)
        x = {"job_id": event.key, "instance": 0, "run": 1}
        _feed(bus, book, "TasksAdmitted", "/prod/batch",
              {"at": at + 2, "pool": "/prod/batch", "tasks": [x]}, at + 2)
        cpu = float(body["default_config"]["cpu_limit"])
        task = TaskRequest("t", event.key, Resources(cpu=cpu, memory=64))
        reason = place([H1], [task]).unplaced.get("t", "no host fits (test)")
        _feed(bus, book, "PlacementFailed", "round", {"at": at + 3, "round": 1, "tasks": [
            {**x, "reason": reason}]}, at + 3)
        self.store.insert(bus.rows())


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import socket

    store = Store(f"chdb://{tmp_path_factory.mktemp('clipending') / 'chdb'}")
    store.insert(full_scenario().rows())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    app = create_app(store, NoRoomPublisher(store), authenticator=authenticator())
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        store.close()


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    user_cmds.register(app)
    return app


def run(cli: typer.Typer, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def job_file(tmp_path: Path, name: str, cpu: float) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(JOB.format(name=name, cpu=cpu))
    return str(path)


def test_create_wait_stops_on_a_task_larger_than_any_host(cli: typer.Typer, api: str,
                                                          tmp_path: Path) -> None:
    code, _, err = run(cli, "job", "create", job_file(tmp_path, "huge", 64), "--wait",
                       "--job-id", "huge-1", "--timeout", "20", "--api", api)
    assert code == 1
    assert "warning: NO_HOST_FITS: instance(s) 0 need cpu 64" in err.replace("\n", " ")
    assert "can never run as configured" in err and "NO_HOST_FITS" in err
    assert "did not finish within" not in err  # it stopped on the reason, not the timeout


def test_job_get_and_task_list_show_why(cli: typer.Typer, api: str, tmp_path: Path) -> None:
    code, _, err = run(cli, "job", "create", job_file(tmp_path, "snug", 6), "--job-id",
                       "snug-1", "--api", api)
    assert code == 0 and "warning" not in err  # 6 cpus fit h1's 8 (once they are free)
    code, out, _ = run(cli, "job", "get", "snug-1", "--api", api)
    assert code == 0 and "NO_HOST_FITS" in out and "why" in out
    code, out, _ = run(cli, "task", "list", "snug-1", "--api", api)
    assert code == 0 and "NO_HOST_FITS" in out
    code, out, _ = run(cli, "job", "get", "snug-1", "-o", "json", "--api", api)
    pending = json.loads(out)["pending"]
    assert pending["by_code"] == {"NO_HOST_FITS": 1} and pending["permanent"] is False
