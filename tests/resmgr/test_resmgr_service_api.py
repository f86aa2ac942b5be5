"""Pools through the HTTP API, the read model and `peloton respool ...`.

A real uvicorn server of the API over a real chdb store; its publisher plays the cluster:
pool requests go to a real resource manager core, whose facts and next entitlement cycle
are projected into the store at once (what the materializer does with the bus), so the
CLI's wait for the resource manager's answer has something to find.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
import uvicorn
from api_tokens import ADMIN, Http, authenticator
from typer.testing import CliRunner

from peloton.api.app import create_app
from peloton.api.publisher import MemoryPublisher
from peloton.bus.catalog import topic_for_event
from peloton.cli.user_cmds import register
from peloton.minicluster.servers import free_port
from peloton.model.event import Event
from peloton.readmodel.projector import SourcePos, project
from peloton.readmodel.store import Store
from peloton.resmgr.domain.cycle import ResourceManager

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "respool"
POOL = """\
resources:
  - {kind: cpu, reservation: 6, limit: 12, share: 2, type: STATIC}
  - {kind: memory, reservation: 1024, limit: 8192}
  - {kind: disk, reservation: 0, limit: 8192}
slackLimit: {maxPercent: 30}
"""
CAPACITY = {"cpu": 100.0, "memory": 100_000.0, "disk": 200_000.0, "gpu": 8.0}
runner = CliRunner()
http = Http(ADMIN)  # httpx's functions with the test admin token


class ResmgrPublisher(MemoryPublisher):
    """Keeps the events; answers pool requests with a real ResourceManager and stores the
    rows of its facts (and of the entitlement cycle that follows) in the read model."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store
        self.manager = ResourceManager(1_000, min_recompute_ms=0)
        self.offsets: dict[str, int] = defaultdict(int)
        self.now = 10_000
        self.project(Event("OfferReceived", "offers", {"at": self.now, "offers": [{
            "host": "h1", "incarnation": "i", "labels": {}, "generation": 1,
            "capacity": CAPACITY, "free": CAPACITY,
            "available": True, "port_range_begin": 1, "port_range_end": 2,
            "used_ports": [], "task_label_counts": {}}]}))
        self.tick()

    def project(self, ev: Event) -> None:
        if topic_for_event(ev.type).name in ("offer-received", "respool-events"):
            self.manager.fold(ev.type, ev.body)
        name = topic_for_event(ev.type).name
        self.store.insert(project(ev.type, ev.body, SourcePos(name, 0, self.offsets[name])))
        self.offsets[name] += 1

    def tick(self) -> None:
        self.now += 1_000
        for ev in self.manager.tick(self.now):
            self.project(ev)

    async def publish(self, event: Event) -> None:
        await super().publish(event)
        if not event.type.startswith("ResourcePool"):
            return
        self.project(event)
        self.now += 1
        for fact in self.manager.handle(event.type, event.body, self.now):
            self.project(fact)
        self.tick()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ResmgrPublisher]]:
    store = Store(f"chdb://{tmp_path_factory.mktemp('pools') / 'chdb'}")
    publisher = ResmgrPublisher(store)
    port = free_port()
    app = create_app(store, publisher, authenticator=authenticator())
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


@pytest.fixture(scope="module")
def api(served: tuple[str, ResmgrPublisher]) -> str:
    return served[0]


@pytest.fixture(autouse=True)
def admin_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The CLI sends the test admin token and reads no user config."""
    monkeypatch.setenv("PELOTON_TOKEN", ADMIN)
    monkeypatch.setenv("PELOTON_CONFIG", str(tmp_path / "no-peloton-config.yaml"))


@pytest.fixture(scope="module")
def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def run(cli: typer.Typer, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def pool_file(tmp_path: Path, text: str = POOL, name: str = "pool.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ---- HTTP ------------------------------------------------------------------------------
def test_create_publishes_a_normalized_request_and_reads_back_config_and_entitlement(
        api: str, served: tuple[str, ResmgrPublisher]) -> None:
    r = http.post(f"{api}/v1/pools/http-a", content=POOL,
                   headers={"content-type": "application/yaml"})
    assert r.status_code == 202, r.text
    accepted = r.json()
    assert accepted["path"] == "/http-a" and accepted["operation"] == "CREATE"
    request = next(e for e in served[1].events if e.type == "ResourcePoolCreateRequested"
                   and e.body["path"] == "/http-a")
    assert request.key == "/http-a"
    assert served[1].records[served[1].events.index(request)][0] == "respool-requested"
    assert [x["kind"] for x in request.body["config"]["resources"]] == [
        "cpu", "memory", "disk", "gpu"]
    outcome = http.get(f"{api}/v1/pool-requests/{accepted['request_id']}").json()
    assert (outcome["state"], outcome["reasons"]) == ("ACCEPTED", [])
    pool = http.get(f"{api}/v1/pools/http-a").json()
    assert pool["parent"] == "/" and pool["cycle"] > 0
    assert pool["reservation"]["cpu"] == 6 and pool["limit"]["cpu"] == 12
    assert pool["share"]["cpu"] == 2 and pool["config"]["resources"][0]["type"] == "STATIC"
    assert pool["config"]["slack_limit_percent"] == 30
    listed = {p["pool"]: p for p in http.get(f"{api}/v1/pools").json()["pools"]}
    assert {"/", "/default", "/http-a"} <= set(listed)
    assert listed["/http-a"]["entitlement"]["cpu"] >= 6  # STATIC: its reservation, at least


def test_peloton_style_create_with_name_and_parent_in_the_body(api: str) -> None:
    body = {"name": "http-p", "parent": "/", "resources": [
        {"kind": "cpu", "reservation": 0, "limit": 2}]}
    r = http.post(f"{api}/v1/pools", json=body)
    assert r.status_code == 202 and r.json()["path"] == "/http-p"


@pytest.mark.parametrize("text, field, message", [
    ("resources: [{kind: tpu}]", "resources[0].kind",
     "unknown kind 'tpu' (known: cpu, memory, disk, gpu)"),
    ("resources: [{kind: cpu, reservation: 4, limit: 2}]", "resources.cpu.limit",
     "2 is below reservation 4"),
    ("resources: [{kind: cpu, limit: lots}]", "resources[0].limit",
     "must be a number, got 'lots'"),
    ("name: other", "name", "'other' does not match the path's name 'http-x'"),
    ("parent: /elsewhere", "parent", "/elsewhere is not the path's parent /"),
    ("resources: [", "body", None),
    ("- a list", "body", "must be a mapping, got list"),
])
def test_invalid_configs_are_400_with_the_field(api: str, text: str, field: str,
                                                message: str | None) -> None:
    r = http.post(f"{api}/v1/pools/http-x", content=text,
                   headers={"content-type": "application/yaml"})
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["error"] == "invalid pool config"
    assert body["details"][0]["field"] == field
    if message is not None:
        assert body["details"][0]["message"] == message


def test_the_resource_managers_refusal_is_visible_with_its_reasons(api: str) -> None:
    r = http.post(f"{api}/v1/pools/http-ghost/child", content=POOL,
                   headers={"content-type": "application/yaml"})
    assert r.status_code == 202
    outcome = http.get(f"{api}/v1/pool-requests/{r.json()['request_id']}").json()
    assert outcome["state"] == "REJECTED"
    assert outcome["reasons"] == ["/http-ghost/child: parent: no pool at /http-ghost"]
    assert http.get(f"{api}/v1/pools/http-ghost/child").status_code == 404
    assert http.get(f"{api}/v1/pool-requests/nope").status_code == 404


def test_update_move_and_delete(api: str) -> None:
    for path in ("http-m", "http-n"):
        assert http.post(f"{api}/v1/pools/{path}", content=POOL.replace("6,", "1,"),
                          headers={"content-type": "text/yaml"}).status_code == 202
    child = "resources: [{kind: cpu, reservation: 0, limit: 4}]"
    http.post(f"{api}/v1/pools/http-m/c", content=child)
    r = http.put(f"{api}/v1/pools/http-m/c", content=child + "\nparent: /http-n")
    assert r.status_code == 202 and r.json()["operation"] == "UPDATE"
    assert http.get(f"{api}/v1/pool-requests/{r.json()['request_id']}").json()["state"] == (
        "ACCEPTED")
    assert http.get(f"{api}/v1/pools/http-n/c").json()["parent"] == "/http-n"
    assert http.get(f"{api}/v1/pools/http-m/c").status_code == 404
    r = http.delete(f"{api}/v1/pools/http-n")
    outcome = http.get(f"{api}/v1/pool-requests/{r.json()['request_id']}").json()
    assert outcome["reasons"] == ["/http-n: children: pool has child pools (/http-n/c)"]
    r = http.delete(f"{api}/v1/pools/http-n/c")
    assert http.get(f"{api}/v1/pool-requests/{r.json()['request_id']}").json()["state"] == (
        "ACCEPTED")
    assert http.get(f"{api}/v1/pools/http-n/c").status_code == 404


def test_preemptions_are_recorded_and_listed(api: str,
                                             served: tuple[str, ResmgrPublisher]) -> None:
    served[1].project(Event("TasksPreempted", "/A", {"at": 5, "pool": "/A", "tasks": [
        {"job_id": "j", "instance": 3, "run": 1, "reason": "POOL_OVER_ENTITLEMENT",
         "detail": "pool /A over entitlement for 2 cycles: cpu 12/6"}]}))
    found = http.get(f"{api}/v1/preemptions", params={"job_id": "j"}).json()["preemptions"]
    assert found == [{"job_id": "j", "instance": 3, "run": 1, "at": 5, "pool": "/A",
                      "reason": "POOL_OVER_ENTITLEMENT",
                      "detail": "pool /A over entitlement for 2 cycles: cpu 12/6"}]
    assert http.get(f"{api}/v1/preemptions", params={"pool": "/B"}).json() == {
        "preemptions": []}


def test_openapi_lists_the_pool_routes(api: str) -> None:
    paths = http.get(f"{api}/openapi.json").json()["paths"]
    for path in ("/v1/pools", "/v1/pools/{path}", "/v1/pool-requests/{request_id}",
                 "/v1/preemptions"):
        assert path in paths, path
    assert {"get", "post", "put", "delete"} <= set(paths["/v1/pools/{path}"])


# ---- CLI -------------------------------------------------------------------------------
def test_cli_create_get_list_update_delete(cli: typer.Typer, api: str, tmp_path: Path) -> None:
    code, out, err = run(cli, "respool", "create", "/cli-a", pool_file(tmp_path), "--api", api)
    assert (code, err) == (0, "") and "pool /cli-a created" in out
    code, out, _ = run(cli, "respool", "get", "/cli-a", "--api", api)
    assert code == 0 and "STATIC" in out and "cpu" in out
    rows = [line.replace("│", " ").split() for line in out.splitlines()]
    cpu = next(r for r in rows if r and r[0] == "cpu")
    assert cpu[1:5] == ["6", "12", "2", "STATIC"]
    code, out, _ = run(cli, "respool", "get", "/cli-a", "-o", "json", "--api", api)
    assert json.loads(out) == http.get(f"{api}/v1/pools/cli-a").json()
    child = EXAMPLES / "team-a-batch.yaml"
    code, _, err = run(cli, "respool", "create", "/cli-a/batch", str(child), "--api", api)
    assert code == 1 and "rejected" in err  # its cpu reservation 4 fits, its limits do not
    assert "/cli-a/batch: resources.memory.limit: 12288 exceeds parent /cli-a limit 8192" in err
    small = "resources: [{kind: cpu, reservation: 1, limit: 2}]"
    code, out, _ = run(cli, "respool", "create", "/cli-a/b", pool_file(tmp_path, small, "s"),
                       "-o", "json", "--api", api)
    assert code == 0 and json.loads(out)["state"] == "ACCEPTED"
    code, out, _ = run(cli, "respool", "list", "--api", api)
    lines = out.splitlines()
    parent = next(line for line in lines if "/cli-a " in line)
    kid = next(line for line in lines if "/cli-a/b " in line)
    assert kid.index("/cli-a/b") > parent.index("/cli-a") and "share cpu 2" in parent
    code, out, _ = run(cli, "respool", "update", "/cli-a/b",
                       pool_file(tmp_path, small.replace("2}", "3}"), "u"), "--api", api)
    assert code == 0 and "updated" in out
    assert http.get(f"{api}/v1/pools/cli-a/b").json()["limit"]["cpu"] == 3
    code, _, err = run(cli, "respool", "delete", "/cli-a", "--api", api)
    assert code == 1 and "/cli-a: children: pool has child pools (/cli-a/b)" in err
    code, out, _ = run(cli, "respool", "delete", "/cli-a/b", "--api", api)
    assert code == 0 and "deleted" in out


def test_cli_checks_files_locally_and_exits_2(cli: typer.Typer, tmp_path: Path) -> None:
    bad = pool_file(tmp_path, "resources: [{kind: cpu, reservation: 5, limit: 1}]\nname: z")
    code, out, err = run(cli, "respool", "create", "/y", bad, "--api", "http://127.0.0.1:9")
    assert code == 2 and out == ""
    assert "resources.cpu.limit: 1 is below reservation 5" in err
    assert "name: 'z' does not match the path's name 'y'" in err
    code, _, err = run(cli, "respool", "create", "/y", str(tmp_path / "missing.yaml"))
    assert code == 2 and "cannot read" in err
    code, _, err = run(cli, "respool", "create", "/y", pool_file(tmp_path, "a: [", "broken"))
    assert code == 2 and "not valid YAML" in err
    code, _, err = run(cli, "respool", "create", "y", pool_file(tmp_path))
    assert code == 2 and "starts with '/'" in err


def test_cli_no_wait_and_unknown_pool(cli: typer.Typer, api: str, tmp_path: Path) -> None:
    code, out, _ = run(cli, "respool", "create", "/cli-nw", pool_file(tmp_path), "--no-wait",
                       "-o", "json", "--api", api)
    assert code == 0 and json.loads(out)["operation"] == "CREATE"
    code, _, err = run(cli, "respool", "get", "/cli-ghost", "--api", api)
    assert code == 1 and "pool /cli-ghost not found" in err


def test_shipped_examples_are_valid_pool_configs(cli: typer.Typer, api: str) -> None:
    for name, path in (("team-a.yaml", "/team-a"), ("preemption-pool.yaml", "/ex-pool"),
                       ("default_respool.yaml", "/DefaultResPool")):
        code, _, err = run(cli, "respool", "create", path, str(EXAMPLES / name), "--api", api)
        assert code == 0, (name, err)
    code, _, err = run(cli, "respool", "create", "/team-a/batch",
                       str(EXAMPLES / "team-a-batch.yaml"), "--api", api)
    assert code == 0, err
