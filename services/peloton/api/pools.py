"""Resource pools over HTTP: reads from the read model, changes published as requests.

Routes (see `pools_router`):
- GET /v1/pools: the pools of the newest entitlement cycle, each with its config (share,
  type, slack and controller limits) where the resource manager recorded one; pools
  created after that cycle are listed too, with zero entitlement (cycle 0).
- GET /v1/pools/{path}: one pool; 404 when neither a cycle nor a config knows it. With
  `?at=`, as of a past instant (peloton.api.history, with GET .../history).
- POST /v1/pools/{path}: create; the body is a Peloton ResourcePoolConfig (YAML or JSON).
  POST /v1/pools: the same, with the pool named by the body's `name` and `parent`
  (default "/"), as in Peloton.
- PUT /v1/pools/{path}: replace the config; a `parent` in the body moves the pool.
- DELETE /v1/pools/{path}.
- GET /v1/pool-requests/{request_id}: REQUESTED, ACCEPTED, or REJECTED with every reason.
- GET /v1/preemptions: preempted runs (job, pool filters), newest first.

Writes answer 202 with a request id once the broker acknowledged the request; the
resource manager then accepts or rejects it against the tree (limits against parents,
sibling reservations, children or tasks on delete). A body that cannot be parsed, or
that breaks a rule of the config alone (limit >= reservation >= 0, share > 0, percents),
is answered 400 with every problem as {"field", "message"}.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import yaml
from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field

from peloton.api.auth import require_admin
from peloton.api.errors import BadRequest, ErrorBody, NotFound, UnsupportedMediaType
from peloton.api.history import AT_DESCRIPTION, pool_at, resolve_at
from peloton.api.openapi import document_content
from peloton.api.params import RequestId
from peloton.model.event import Event
from peloton.model.resources import KINDS
from peloton.readmodel.store import Store
from peloton.resmgr.domain.poolbook import normalize_path, parse_pool_document, split_path

__all__ = ["Pool", "PoolList", "PoolRequestAccepted", "PoolRequest", "Preemption",
           "pools_router", "merge_pools", "POOL_CONTENT_TYPES"]


Db = Callable[..., Awaitable[Any]]
Publish = Callable[[Event], Awaitable[None]]

POOL_CONTENT_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml",
                      "text/plain", "application/json")
_ZERO = dict.fromkeys(KINDS, 0.0)


class PoolResource(BaseModel):
    kind: str
    reservation: float
    limit: float
    share: float
    type: str


class PoolConfigOut(BaseModel):
    name: str
    description: str
    resources: list[PoolResource]
    slack_limit_percent: float
    controller_limit_percent: float | None


class Pool(BaseModel):
    pool: str
    parent: str | None
    cycle: int = Field(description="entitlement cycle of the figures (0: none yet)")
    at: int
    capacity: dict[str, float]
    reservation: dict[str, float]
    limit: dict[str, float]
    entitlement: dict[str, float]
    slack_entitlement: dict[str, float]
    nonslack_entitlement: dict[str, float]
    allocation: dict[str, float]
    demand: dict[str, float]
    share: dict[str, float] = Field(default_factory=dict)
    config: PoolConfigOut | None = Field(
        None, description="as the resource manager last decided it (none for pools never "
                          "created or updated through a request, e.g. the initial /default)")


class PoolList(BaseModel):
    pools: list[Pool]


class PoolRequestAccepted(BaseModel):
    request_id: str
    operation: str
    path: str


class PoolRequest(BaseModel):
    request_id: str
    path: str
    operation: str
    state: str = Field(description="REQUESTED, ACCEPTED or REJECTED")
    reasons: list[str]
    at: int


class Preemption(BaseModel):
    job_id: str
    instance: int
    run: int
    at: int
    pool: str
    reason: str
    detail: str


class PreemptionList(BaseModel):
    preemptions: list[Preemption]


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody}, 404: {"model": ErrorBody}}
_WRITE_ERRORS: dict[int | str, dict[str, Any]] = {
    **_ERRORS, 415: {"model": ErrorBody}, 503: {"model": ErrorBody}}
_BODY = {"requestBody": {"required": True, "description": "a ResourcePoolConfig",
                         "content": document_content(POOL_CONTENT_TYPES)}}


def merge_pools(rows: list[dict[str, Any]],
                configs: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Entitlement rows joined with recorded configs (which own reservation, limit and
    share when present); configs without a row yet become zero rows. Sorted by path."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        out[row["pool"]] = _with_config(dict(row), configs.get(row["pool"]))
    for path, cfg in configs.items():
        if path not in out:
            base = {"pool": path, "parent": cfg["parent"], "cycle": 0, "at": cfg["at"],
                    "capacity": {}, **{k: dict(_ZERO) for k in (
                        "reservation", "limit", "entitlement", "slack_entitlement",
                        "nonslack_entitlement", "allocation", "demand")}}
            out[path] = _with_config(base, cfg)
    return [out[p] for p in sorted(out)]


def _with_config(row: dict[str, Any], cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    if cfg is None:
        row["share"], row["config"] = {}, None
        return row
    config = cfg["config"]
    res = {r["kind"]: r for r in config["resources"]}
    row["reservation"] = {k: float(res[k]["reservation"]) if k in res else 0.0 for k in KINDS}
    row["limit"] = {k: float(res[k]["limit"]) if k in res else 0.0 for k in KINDS}
    row["share"] = {k: float(res[k]["share"]) if k in res else 1.0 for k in KINDS}
    row["parent"] = cfg["parent"]
    row["config"] = config
    return row


def _path(raw: str) -> str:
    try:
        return normalize_path(raw if raw.startswith("/") else "/" + raw)
    except ValueError as exc:
        raise BadRequest("invalid pool path", [{"field": "path", "message": str(exc)}]) from exc


async def _document(request: Request) -> dict[str, Any]:
    ctype = (request.headers.get("content-type") or "application/yaml")
    ctype = ctype.split(";")[0].strip().lower()
    if ctype not in POOL_CONTENT_TYPES:
        raise UnsupportedMediaType(f"unsupported content type {ctype!r}",
                                   [f"use one of {', '.join(POOL_CONTENT_TYPES)}"])
    try:
        text = (await request.body()).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid(["body: not UTF-8"]) from exc
    if not text.strip():
        raise _invalid(["body: empty (send a ResourcePoolConfig)"])
    try:
        doc = json.loads(text) if ctype == "application/json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        kind = "JSON" if ctype == "application/json" else "YAML"
        raise _invalid([f"body: not valid {kind}: {exc}"]) from exc
    if not isinstance(doc, dict):
        raise _invalid([f"body: must be a mapping, got {type(doc).__name__}"])
    return doc


def _invalid(problems: list[str]) -> BadRequest:
    from peloton.api.app import problem_details

    return BadRequest("invalid pool config", problem_details(problems))


def _parse(doc: dict[str, Any], path: str) -> tuple[dict[str, Any], str | None]:
    """(PoolConfig record, the body's parent or None), or BadRequest with every problem."""
    record, parent, problems = parse_pool_document(doc, path)
    if record is None:
        raise _invalid(problems)
    return record, parent


def pools_router(store: Store, publish: Publish, db: Db,
                 clock: Callable[[], int]) -> APIRouter:
    """The routes in the module docstring, over one store and one publish function."""
    router = APIRouter(tags=["pools"])
    admin = [Depends(require_admin)]  # pool changes: admins only (peloton.api.auth)

    async def pools() -> list[dict[str, Any]]:
        rows = await db(store.pools)
        configs = await db(store.pool_configs)
        return merge_pools(rows, configs)

    async def requested(etype: str, path: str, operation: str,
                        **fields: Any) -> PoolRequestAccepted:
        rid = str(uuid.uuid4())
        await publish(Event(etype, path, {"request_id": rid, "at": clock(), "path": path,
                                          **fields}))
        return PoolRequestAccepted(request_id=rid, operation=operation, path=path)

    @router.get("/v1/pools", response_model=PoolList)
    async def list_pools() -> dict[str, Any]:
        """The resource pool tree: config, entitlement, allocation and demand per pool."""
        return {"pools": await pools()}

    @router.post("/v1/pools", status_code=202, response_model=PoolRequestAccepted,
                 responses=_WRITE_ERRORS, openapi_extra=_BODY, dependencies=admin)
    async def create_named_pool(request: Request) -> PoolRequestAccepted:
        """Create a pool named by the body's `name` under its `parent` (default /)."""
        doc = await _document(request)
        name, parent = doc.get("name"), doc.get("parent") or "/"
        if not isinstance(name, str) or not name or "/" in name:
            raise _invalid([f"name: a pool name (no '/') is required, got {name!r}"])
        if not isinstance(parent, str):
            raise _invalid([f"parent: must be a pool path, got {parent!r}"])
        path = _path(f"{parent.rstrip('/')}/{name}")
        config, _ = _parse(doc, path)
        return await requested("ResourcePoolCreateRequested", path, "CREATE", config=config)

    @router.get("/v1/pools/{path:path}", response_model=Pool, responses=_ERRORS)
    async def get_pool(path: str, at: str | None = Query(
            None, max_length=64, description=AT_DESCRIPTION)) -> dict[str, Any]:
        """One pool: config, entitlement, allocation and demand; with `at`, its
        entitlement cycle as of that past instant (peloton.api.history; no config)."""
        wanted = _path(path)
        when = resolve_at(at, clock())
        if when is not None:
            return await pool_at(store, db, wanted, when)
        for pool in await pools():
            if pool["pool"] == wanted:
                return pool
        raise NotFound(f"pool {wanted} not found (a new pool may still be in flight)")

    @router.post("/v1/pools/{path:path}", status_code=202, response_model=PoolRequestAccepted,
                 responses=_WRITE_ERRORS, openapi_extra=_BODY, dependencies=admin)
    async def create_pool(path: str, request: Request) -> PoolRequestAccepted:
        """Create a pool at this path (its parent must exist)."""
        wanted = _path(path)
        config, parent = _parse(await _document(request), wanted)
        if parent is not None and parent != split_path(wanted)[0]:
            raise _invalid([f"parent: {parent} is not the path's parent "
                            f"{split_path(wanted)[0]}"])
        return await requested("ResourcePoolCreateRequested", wanted, "CREATE", config=config)

    @router.put("/v1/pools/{path:path}", status_code=202, response_model=PoolRequestAccepted,
                responses=_WRITE_ERRORS, openapi_extra=_BODY, dependencies=admin)
    async def update_pool(path: str, request: Request) -> PoolRequestAccepted:
        """Replace a pool's config; a `parent` different from the current one moves it."""
        wanted = _path(path)
        config, parent = _parse(await _document(request), wanted)
        return await requested("ResourcePoolUpdateRequested", wanted, "UPDATE",
                               config=config, parent=parent)

    @router.delete("/v1/pools/{path:path}", status_code=202,
                   response_model=PoolRequestAccepted,
                   responses={**_ERRORS, 503: {"model": ErrorBody}}, dependencies=admin)
    async def delete_pool(path: str) -> PoolRequestAccepted:
        """Delete a leaf pool that holds no tasks."""
        return await requested("ResourcePoolDeleteRequested", _path(path), "DELETE")

    @router.get("/v1/pool-requests/{request_id}", response_model=PoolRequest,
                responses=_ERRORS)
    async def get_pool_request(request_id: RequestId) -> dict[str, Any]:
        """What became of a pool request."""
        found = await db(store.pool_request, request_id)
        if found is None:
            raise NotFound(f"pool request {request_id} not found (it may still be in flight)")
        return dict(found)

    @router.get("/v1/preemptions", response_model=PreemptionList)
    async def list_preemptions(
        job_id: str | None = Query(None), pool: str | None = Query(None),
        limit: int = Query(1000, ge=1, le=100_000),
    ) -> dict[str, Any]:
        """Runs the resource manager preempted, newest first."""
        return {"preemptions": await db(store.preemptions, job_id, pool, limit)}

    return router
