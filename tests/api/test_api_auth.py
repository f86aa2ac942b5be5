"""Bearer tokens and roles on the real API app (a real chdb read model, the in-memory
publisher): who may read, submit, kill, update and change pools and hosts, and what a
refused request answers (401/403/404 in the API's JSON, nothing published, no token in
the message)."""

from __future__ import annotations

import re

import httpx
import pytest
from api_tokens import ADMIN, ALICE, ALICE_NAME, BOB, BOB_NAME, client_as
from fastapi import FastAPI
from readmodel_scenario import SERVICE_YAML

from peloton.api.publisher import MemoryPublisher
from peloton.api.tokens import hash_token
from peloton.readmodel.store import Store

YAML = {"content-type": "application/yaml"}
JOB = """\
name: hello
instanceCount: 1
respool: /prod/batch
defaultConfig:
  resource: {cpuLimit: 0.5, memLimitMb: 64}
  command: {value: "echo hi"}
"""
POOL = "resources: [{kind: cpu, reservation: 0, limit: 2}]"
OPEN = {"/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/docs/oauth2-redirect",
        "/redoc"}
SECRETS = (ADMIN, ALICE, BOB, "not-a-known-token-but-long", hash_token(ALICE))

# every write a submitter may do on an existing job (job-svc is in /prod/batch)
JOB_WRITES = [("POST", "/v1/jobs/job-svc/kill", {"json": {}}),
              ("POST", "/v1/jobs/job-svc/stop", {}),
              ("POST", "/v1/jobs/job-svc/start", {}),
              ("POST", "/v1/jobs/job-svc/restart", {}),
              ("POST", "/v1/jobs/job-svc/update",
               {"content": SERVICE_YAML.replace("./serve", "./serve2"), "headers": YAML}),
              ("POST", "/v1/updates/u-1/pause", {})]
ADMIN_WRITES = [("POST", "/v1/pools/lab2", {"content": POOL, "headers": YAML}),
                ("POST", "/v1/pools", {"json": {"name": "lab3", "resources": []}}),
                ("PUT", "/v1/pools/prod/batch", {"content": POOL, "headers": YAML}),
                ("DELETE", "/v1/pools/prod/batch", {}),
                ("POST", "/v1/hosts/h1/maintenance", {"json": {"action": "start"}})]


def no_secret(r: httpx.Response) -> None:
    for secret in SECRETS:
        assert secret not in r.text and secret not in str(r.headers), r.text


def filled(path: str) -> str:
    """A route's path with every parameter given a value."""
    return re.sub(r"\{[^}]+\}", "x", path)


def protected_routes(app: FastAPI) -> list[tuple[str, str]]:
    out = [(method.upper(), filled(path)) for path, ops in app.openapi()["paths"].items()
           for method in ops if path not in OPEN]
    assert len(out) > 20  # every route of the API, not a few
    return out


# ---- authentication --------------------------------------------------------------------
async def test_every_route_but_the_open_ones_needs_a_token(
        app: FastAPI, loaded: Store, publisher: MemoryPublisher) -> None:
    async with client_as(app, None) as anon:
        for method, path in protected_routes(app):
            r = await anon.request(method, path, json={})
            assert r.status_code == 401, (method, path, r.text)
            assert r.headers["www-authenticate"] == 'Bearer realm="peloton"'
            assert r.json() == {"error": "missing bearer token", "details": [{
                "field": "Authorization",
                "message": "send the header Authorization: Bearer <token>"}]}
        for path in ("/healthz", "/openapi.json", "/docs"):
            assert (await anon.get(path)).status_code == 200, path
    assert publisher.events == []


@pytest.mark.parametrize("header", [
    "Bearer not-a-known-token-but-long", f"Bearer {ALICE}x", f"bearer {hash_token(ALICE)}",
    f"Basic {ALICE}", "Bearer", "Bearer ", f"Bearer {ALICE} {ALICE}", f"{ALICE}"])
async def test_a_wrong_or_malformed_token_is_401_and_never_echoed(
        app: FastAPI, loaded: Store, publisher: MemoryPublisher, header: str) -> None:
    async with client_as(app, None) as anon:
        for method, path in [("GET", "/v1/jobs"), ("POST", "/v1/jobs/job-ok/kill"),
                             ("POST", "/v1/pools/x")]:
            r = await anon.request(method, path, headers={"Authorization": header})
            assert r.status_code == 401, (header, r.text)
            assert r.headers["www-authenticate"].startswith("Bearer ")
            assert r.json()["error"] in ("invalid bearer token", "malformed Authorization "
                                         "header")
            no_secret(r)
    assert publisher.events == []


async def test_an_unknown_token_is_answered_as_invalid(app: FastAPI, loaded: Store) -> None:
    async with client_as(app, "not-a-known-token-but-long") as c:
        r = await c.get("/v1/jobs")
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == 'Bearer realm="peloton", error="invalid_token"'
    assert r.json()["error"] == "invalid bearer token"


async def test_any_valid_token_reads(app: FastAPI, loaded: Store) -> None:
    for token in (ADMIN, ALICE, BOB):
        async with client_as(app, token) as c:
            for path in ("/v1/jobs", "/v1/jobs/job-ok", "/v1/jobs/job-ok/tasks", "/v1/hosts",
                         "/v1/pools", "/v1/dead-letters", "/v1/jobs/job-svc/updates",
                         "/v1/updates/u-1", "/v1/preemptions"):
                assert (await c.get(path)).status_code == 200, (token[:9], path)


# ---- submitters and their pools ----------------------------------------------------------
async def test_a_submitter_submits_only_to_its_pools(
        app: FastAPI, loaded: Store, publisher: MemoryPublisher) -> None:
    async with client_as(app, BOB) as bob:
        r = await bob.post("/v1/jobs", content=JOB, headers=YAML)
    assert r.status_code == 403
    assert r.json() == {"error": f"user {BOB_NAME} may not use pool /prod/batch", "details": [
        {"field": "respool", "message": f"{BOB_NAME} works in /team-b only"}]}
    no_secret(r)
    assert publisher.events == []
    async with client_as(app, ALICE) as alice:
        r = await alice.post("/v1/jobs", content=JOB, headers=YAML)
        assert r.status_code == 202, r.text
        sibling = JOB.replace("/prod/batch", "/production")  # a prefix is not a subtree
        assert (await alice.post("/v1/jobs", content=sibling, headers=YAML)).status_code == 403
    assert [e.type for e in publisher.events] == ["JobSubmitted"]


@pytest.mark.parametrize(("method", "path", "kw"), JOB_WRITES)
async def test_a_submitter_changes_no_job_of_another_pool(
        app: FastAPI, loaded: Store, publisher: MemoryPublisher, method: str, path: str,
        kw: dict[str, object]) -> None:
    async with client_as(app, BOB) as bob:
        r = await bob.request(method, path, **kw)  # type: ignore[arg-type]
    assert r.status_code == 403, r.text
    assert r.json()["error"] == f"user {BOB_NAME} may not use pool /prod/batch"
    no_secret(r)
    assert publisher.events == []
    async with client_as(app, ALICE) as alice:  # the owner of /prod: the handler decides
        r = await alice.request(method, path, **kw)  # type: ignore[arg-type]
    assert r.status_code not in (401, 403), r.text


async def test_a_submitter_kills_its_own_jobs(app: FastAPI, loaded: Store,
                                              publisher: MemoryPublisher) -> None:
    async with client_as(app, ALICE) as alice:
        r = await alice.post("/v1/jobs/job-ok/kill", json={"instances": [1]})
    assert r.status_code == 202
    assert [(e.type, e.key) for e in publisher.events] == [("JobKillRequested", "job-ok")]


@pytest.mark.parametrize(("job_id", "status"), [
    ("nope", 404), ("job-ok.", 404), ("JOB-OK", 404), ("job-ok%2Fx", 404), ("a" * 300, 400),
    ("..%2F..%2Fpools", 404), ("job-ok%00", 400), ("-job-ok", 400)])
async def test_a_forged_job_id_is_answered_alike_for_submitters_and_admins(
        app: FastAPI, loaded: Store, publisher: MemoryPublisher, job_id: str,
        status: int) -> None:
    """404: an id the read model does not know; 400: no job can have it."""
    for token in (BOB, ALICE, ADMIN):
        async with client_as(app, token) as c:
            for verb, kw in (("kill", {"json": {}}), ("stop", {}), ("start", {}),
                             ("restart", {}), ("update", {"content": JOB, "headers": YAML})):
                r = await c.post(f"/v1/jobs/{job_id}/{verb}", **kw)  # type: ignore[arg-type]
                assert r.status_code == status, (token[:9], verb, r.text)
                no_secret(r)
            r = await c.post(f"/v1/updates/{job_id}/pause")
            assert r.status_code == status, (token[:9], r.text)
    assert publisher.events == []


async def test_an_unknown_update_is_404_for_a_submitter(
        app: FastAPI, loaded: Store, publisher: MemoryPublisher) -> None:
    async with client_as(app, BOB) as bob:
        r = await bob.post("/v1/updates/u-nope/pause")
    assert r.status_code == 404
    assert r.json()["error"] == "update u-nope not found (it may still be in flight)"
    assert publisher.events == []


# ---- admins ------------------------------------------------------------------------------
@pytest.mark.parametrize(("method", "path", "kw"), ADMIN_WRITES)
async def test_pools_and_hosts_are_for_admins(
        app: FastAPI, loaded: Store, publisher: MemoryPublisher, method: str, path: str,
        kw: dict[str, object]) -> None:
    async with client_as(app, ALICE) as alice:
        r = await alice.request(method, path, **kw)  # type: ignore[arg-type]
    assert r.status_code == 403, r.text
    assert r.json() == {"error": f"user {ALICE_NAME} is not an admin", "details": [
        {"field": "", "message": "pools, hosts and maintenance need the admin role"}]}
    assert publisher.events == []
    async with client_as(app, ADMIN) as admin:
        r = await admin.request(method, path, **kw)  # type: ignore[arg-type]
    assert r.status_code not in (401, 403), r.text


async def test_an_admin_may_do_everything(app: FastAPI, loaded: Store,
                                          publisher: MemoryPublisher) -> None:
    async with client_as(app, ADMIN) as admin:
        for method, path, kw in JOB_WRITES:
            r = await admin.request(method, path, **kw)  # type: ignore[arg-type]
            assert r.status_code not in (401, 403), (path, r.text)
        r = await admin.post("/v1/jobs", content=JOB.replace("/prod/batch", "/dev"),
                             headers=YAML)
        assert r.status_code == 202, r.text


# ---- the OpenAPI document ----------------------------------------------------------------
async def test_openapi_declares_the_bearer_scheme(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    assert doc["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http", "scheme": "bearer", "description": pytest.approx(
            doc["components"]["securitySchemes"]["bearerAuth"]["description"])}
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if path in OPEN:
                assert not op.get("security") and "401" not in op["responses"], path
                continue
            assert op["security"] == [{"bearerAuth": []}], (method, path)
            assert "401" in op["responses"], (method, path)
            if method != "get":
                assert "403" in op["responses"], (method, path)
