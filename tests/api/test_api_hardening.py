"""Bad input at the API's edges: oversize bodies, unknown query parameters, jobs for
unknown pools, forged ids, undecodable text, and an OpenAPI that says what is sent."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from api_tokens import ADMIN, authenticator, headers
from fastapi import FastAPI

from peloton.api.app import POOL_IN_FLIGHT_MS, create_app
from peloton.api.bodylimit import DEFAULT_MAX_BODY_BYTES, ENV, max_body_bytes
from peloton.api.publisher import MemoryPublisher
from peloton.minicluster.servers import free_port
from peloton.readmodel.store import Store

JOB = """\
name: hello
instanceCount: 1
respool: {pool}
defaultConfig:
  resource: {{cpuLimit: 0.5, memLimitMb: 64}}
  command: {{value: "echo hi"}}
"""
YAML = {"content-type": "application/yaml"}


def small_app(store: Store, publisher: MemoryPublisher) -> FastAPI:
    return create_app(store, publisher, clock=lambda: 1_000, authenticator=authenticator())


# ---- body size limit ---------------------------------------------------------------------
def test_the_limit_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert max_body_bytes() == DEFAULT_MAX_BODY_BYTES == 1024 * 1024
    monkeypatch.setenv(ENV, "2048")
    assert max_body_bytes() == 2048
    monkeypatch.setenv(ENV, "lots")
    with pytest.raises(ValueError, match=ENV):
        max_body_bytes()


@pytest.fixture
async def limited(store: Store, publisher: MemoryPublisher,
                  monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setenv(ENV, "4096")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(small_app(store, publisher)),
                                 base_url="http://api", headers=headers(ADMIN)) as c:
        yield c


@pytest.mark.parametrize("method,path", [("POST", "/v1/jobs"), ("POST", "/v1/pools/big"),
                                         ("POST", "/v1/jobs/job-ok/kill"),
                                         ("GET", "/v1/jobs")])
async def test_a_declared_oversize_body_is_413_json(limited: httpx.AsyncClient,
                                                    publisher: MemoryPublisher,
                                                    method: str, path: str) -> None:
    r = await limited.request(method, path, content=b"x" * 5000, headers=YAML)
    assert r.status_code == 413
    assert set(r.json()) == {"error", "details"} and "4096" in r.json()["error"]
    assert "xxxx" not in r.text and publisher.events == []


async def test_a_chunked_oversize_body_is_cut_off_at_the_limit(
        limited: httpx.AsyncClient, publisher: MemoryPublisher) -> None:
    sent = []

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: sent as it comes
        for i in range(100):
            sent.append(i)
            yield b"# padding line of a job file that never ends ..........\n" * 18

    r = await limited.post("/v1/jobs", content=chunks(), headers=YAML)
    assert r.status_code == 413 and "4096" in r.json()["error"]
    assert len(sent) <= 6  # ~1 KiB chunks: read up to the limit, not the 100 KiB
    assert publisher.events == []


async def test_bodies_within_the_limit_pass(limited: httpx.AsyncClient, loaded: Store,
                                            publisher: MemoryPublisher) -> None:
    r = await limited.post("/v1/jobs", content=JOB.format(pool="/prod/batch"), headers=YAML)
    assert r.status_code == 202, r.text

    async def chunks() -> AsyncIterator[bytes]:
        for line in JOB.format(pool="/prod/batch").splitlines(keepends=True):
            yield line.encode()

    r = await limited.post("/v1/jobs", content=chunks(), headers=YAML)
    assert r.status_code == 202, r.text
    assert len(publisher.events) == 2


@pytest.fixture
def served(store: Store, publisher: MemoryPublisher,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """The API under a real uvicorn (HTTP/1.1 over TCP) with a 4 KiB limit: its port."""
    monkeypatch.setenv(ENV, "4096")
    server = uvicorn.Server(uvicorn.Config(small_app(store, publisher), host="127.0.0.1",
                                           port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield server.config.port
    finally:
        server.should_exit = True
        thread.join(10)


def _answer(port: int, head: str, body_parts: list[bytes]) -> bytes:
    """Send `head` and the parts, never finishing the body; what the server answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode())
        for part in body_parts:
            sock.sendall(part)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < int(
                answer.lower().partition(b"content-length: ")[2].split(b"\r\n")[0] or 0):
            more = sock.recv(65536)
            if not more:
                break
            answer += more
        return answer


def test_a_real_server_answers_413_before_the_body_ends(served: int,
                                                        publisher: MemoryPublisher) -> None:
    auth = f"Authorization: Bearer {ADMIN}\r\n"
    declared = _answer(served, "POST /v1/jobs HTTP/1.1\r\nHost: api\r\n" + auth +
                       "Content-Type: application/yaml\r\nContent-Length: 50000000\r\n\r\n",
                       [b"name: x\n"])
    assert declared.startswith(b"HTTP/1.1 413") and b'"error"' in declared
    chunk = b"# " + b"z" * 1000 + b"\n"
    chunked = _answer(served, "POST /v1/jobs HTTP/1.1\r\nHost: api\r\n" + auth +
                      "Content-Type: application/yaml\r\nTransfer-Encoding: chunked\r\n\r\n",
                      [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * 6)  # no last chunk
    assert chunked.startswith(b"HTTP/1.1 413") and b"4096" in chunked
    assert publisher.events == []


# ---- unknown query parameters -------------------------------------------------------------
@pytest.mark.parametrize("url,field", [
    ("/v1/jobs?stat=RUNNING", "stat"),
    ("/v1/jobs/job-ok/tasks?verbose=1", "verbose"),
    ("/v1/pools?x=1", "x"),
    ("/v1/jobs?limit=1&limit=2", "limit"),  # state may repeat: an array (any of)
])
async def test_unknown_or_repeated_query_parameters_are_400(
        client: httpx.AsyncClient, loaded: Store, url: str, field: str) -> None:
    r = await client.get(url)
    assert r.status_code == 400, r.text
    assert [d["field"] for d in r.json()["details"]] == [field]


async def test_an_unknown_parameter_changes_nothing(client: httpx.AsyncClient, loaded: Store,
                                                    publisher: MemoryPublisher) -> None:
    r = await client.post("/v1/jobs?jobid=mine", content=JOB.format(pool="/prod/batch"),
                          headers=YAML)
    assert r.status_code == 400 and r.json()["details"][0]["field"] == "jobid"
    assert "job_id" in r.json()["details"][0]["message"]
    assert publisher.events == []


async def test_documented_query_parameters_still_work(client: httpx.AsyncClient,
                                                      loaded: Store) -> None:
    r = await client.get("/v1/jobs", params={"state": "failed", "limit": 5})
    assert r.status_code == 200 and [j["job_id"] for j in r.json()["jobs"]] == ["job-bad"]
    assert (await client.get("/v1/preemptions?job_id=job-ok&pool=/prod")).status_code == 200


# ---- jobs for unknown pools ------------------------------------------------------------------
async def test_a_job_for_an_unknown_pool_is_400(client: httpx.AsyncClient, loaded: Store,
                                                publisher: MemoryPublisher) -> None:
    r = await client.post("/v1/jobs", content=JOB.format(pool="/nope"), headers=YAML)
    assert r.status_code == 400, r.text
    assert r.json()["details"][0]["field"] == "respool"
    assert "/nope does not exist" in r.json()["details"][0]["message"]
    assert publisher.events == []
    r = await client.post("/v1/jobs", content=JOB.format(pool="/dev"), headers=YAML)
    assert r.status_code == 202


async def test_before_any_pool_is_known_the_job_manager_decides(
        client: httpx.AsyncClient, store: Store, publisher: MemoryPublisher) -> None:
    r = await client.post("/v1/jobs", content=JOB.format(pool="/nope"), headers=YAML)
    assert r.status_code == 202 and len(publisher.events) == 1


async def test_a_pool_just_created_here_takes_jobs_at_once(
        client: httpx.AsyncClient, loaded: Store, publisher: MemoryPublisher) -> None:
    r = await client.post("/v1/pools/dev/new", json={"resources": []})
    assert r.status_code == 202, r.text
    r = await client.post("/v1/jobs", content=JOB.format(pool="/dev/new"), headers=YAML)
    assert r.status_code == 202, r.text
    assert [e.type for e in publisher.events] == ["ResourcePoolCreateRequested",
                                                  "JobSubmitted"]


async def test_the_grace_for_a_created_pool_ends(loaded: Store,
                                                 publisher: MemoryPublisher) -> None:
    now = [1_000]
    app = create_app(loaded, publisher, clock=lambda: now[0], authenticator=authenticator())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://api",
                                 headers=headers(ADMIN)) as c:
        assert (await c.post("/v1/pools/dev/late", json={"resources": []})).status_code == 202
        now[0] += POOL_IN_FLIGHT_MS  # never accepted: the resource manager refused it
        r = await c.post("/v1/jobs", content=JOB.format(pool="/dev/late"), headers=YAML)
        assert r.status_code == 400 and r.json()["details"][0]["field"] == "respool"


# ---- forged ids -------------------------------------------------------------------------------
FORGED = ["x" * 5000, "job'; DROP TABLE jobs; --", "-leading-dash", "a b", "j\u00e9b",
          "%00nul", "..", "%F0%9F%92%A5"]


@pytest.mark.parametrize("template", [
    "GET /v1/jobs/{}", "GET /v1/jobs/{}/tasks", "GET /v1/jobs/{}/tasks/0",
    "POST /v1/jobs/{}/kill", "POST /v1/jobs/{}/stop", "GET /v1/jobs/{}/updates",
    "GET /v1/updates/{}", "POST /v1/updates/{}/pause"])
async def test_forged_ids_are_400_or_404_and_never_echoed_whole(
        client: httpx.AsyncClient, loaded: Store, publisher: MemoryPublisher,
        template: str) -> None:
    method, path = template.split(" ")
    for forged in FORGED:
        r = await client.request(method, path.format(forged))
        assert r.status_code in (400, 404), (forged, r.text)
        assert set(r.json()) == {"error", "details"}
        assert len(r.content) < 2000 and "x" * 1000 not in r.text
    assert publisher.events == []


async def test_long_host_and_request_ids_are_400(client: httpx.AsyncClient,
                                                 loaded: Store) -> None:
    for url in (f"/v1/hosts/{'h' * 300}", f"/v1/pool-requests/{'r' * 300}"):
        r = await client.get(url)
        assert r.status_code == 400 and len(r.content) < 2000, r.text


async def test_undecodable_text_in_a_body_is_400_not_500(client: httpx.AsyncClient,
                                                         loaded: Store) -> None:
    bodies: list[tuple[str, dict[str, Any]]] = [
        ('{"\\ud800": 1}', {"content-type": "application/json"}),  # a lone surrogate
        ('"\\udc80x": {}\n', YAML),
        ("resources: []\nextra: '" + "z" * 50_000 + "'\n", YAML),
    ]
    for text, hdrs in bodies:
        r = await client.post("/v1/pools/lab", content=text, headers=hdrs)
        assert r.status_code == 400, r.text
        assert len(r.content) < 5000  # every echoed string is cut
        json.loads(r.text)


# ---- the OpenAPI says what the server sends ----------------------------------------------------
async def test_openapi_declares_400_not_422_with_the_error_model(
        client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    assert "ValidationError" not in spec["components"]["schemas"]
    ops = [(p, m, op) for p, item in spec["paths"].items() for m, op in item.items()]
    assert len(ops) >= 25
    for path, method, op in ops:
        codes = op["responses"]
        assert "422" not in codes, (path, method)
        assert {"400", "413"} <= set(codes), (path, method)
        for code, answer in codes.items():
            if code.startswith(("4", "5")):
                schema = answer["content"]["application/json"]["schema"]
                assert schema in ({"$ref": "#/components/schemas/ErrorBody"},
                                  spec["components"]["schemas"]["ErrorBody"]) or \
                    set(schema.get("properties", {})) == {"error", "details"}, (path, code)
        if "{" in path:
            assert "404" in codes, path
        if method != "get":
            assert "503" in codes, (path, method)
    kill = spec["paths"]["/v1/jobs/{job_id}/kill"]["post"]
    assert kill["requestBody"]["content"]["application/json"]["schema"] == {
        "anyOf": [{"$ref": "#/components/schemas/KillRequest"}, {"type": "null"}],
        "title": "Req"} or "$ref" in json.dumps(kill["requestBody"])
    submit = spec["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]
    assert {c["schema"]["type"] for c in submit.values()} == {"object"}
    job_id = spec["paths"]["/v1/jobs/{job_id}"]["get"]["parameters"][0]["schema"]
    assert job_id["maxLength"] == 128 and job_id["pattern"].startswith("^")
    command = spec["paths"]["/v1/updates/{update_id}/{command}"]["post"]["parameters"][1]
    assert command["schema"]["enum"] == ["pause", "resume", "abort", "rollback"]
    action = spec["components"]["schemas"]["MaintenanceRequest"]["properties"]["action"]
    assert action["enum"] == ["start", "complete", "cancel"]


async def test_the_declared_state_pattern_is_the_one_enforced(
        client: httpx.AsyncClient, loaded: Store) -> None:
    spec = (await client.get("/openapi.json")).json()
    state = next(p for p in spec["paths"]["/v1/jobs"]["get"]["parameters"]
                 if p["name"] == "state")
    assert "null" not in json.dumps(state["schema"])  # absent or text, never null
    assert (await client.get("/v1/jobs?state=Running")).status_code == 200
    r = await client.get("/v1/jobs?state=RUNNINGX")
    assert r.status_code == 400 and r.json()["details"][0]["field"] == "state"
