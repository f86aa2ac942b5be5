"""The HTTP API: submit and kill jobs (published to the bus), read everything else from
the read model. OpenAPI at /openapi.json, interactive docs at /docs. Resource pools
(reads, and create/update/delete requests) are in peloton.api.pools, host maintenance in
peloton.api.hosts, rolling updates (and restart, stop) in peloton.api.updates; the web
UI under /ui in peloton.api.ui.

Contract:
- Writes are facts published through a `Publisher`; a 202 means the broker acknowledged
  the record, not that the job manager has seen it yet.
- Reads come from the `Store` (called in a worker thread). Right after a submit the job
  may not be projected yet: reads answer 404 "job X not found (it may still be in flight)".
- Every error is JSON `{"error": message, "details": [...]}` (see peloton.api.errors);
  invalid input is 400 and lists every problem as {"field", "message"}.
- Edges (each module's docstring has its contract): bodies over PELOTON_API_MAX_BODY_BYTES
  are 413 (peloton.api.bodylimit); query parameters an operation does not document are
  400 (peloton.api.strictquery); ids in paths are typed (peloton.api.params: forged ids
  are 400); the OpenAPI declares the 400s and error model actually sent, no 422
  (peloton.api.openapi).
- A job for a pool the read model does not know is 400 (field respool), not 202. The
  check never blocks what the job manager would accept: it is skipped while the read
  model knows no pool at all (no entitlement cycle or config yet, as the job manager's
  own check), and a pool whose creation this process published less than
  POOL_IN_FLIGHT_MS ago counts as known (the read model lags the resource manager's
  acceptance). Another API replica's just-created pool may still be refused for that
  lag (under a second when the cluster is healthy): the message says to retry.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar

import httpx
from fastapi import Body, Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException

from peloton.api import auth, listing, openapi, ui
from peloton.api.admissibility import submission_warnings
from peloton.api.bodylimit import BodyLimitMiddleware, max_body_bytes
from peloton.api.errors import (
    ApiError,
    BadGateway,
    BadRequest,
    Conflict,
    ErrorBody,
    NotFound,
    PublishError,
    Unavailable,
    UnsupportedMediaType,
    error_body,
)
from peloton.api.events import events_router
from peloton.api.health import health_router
from peloton.api.history import AT_DESCRIPTION, history_router, job_at, resolve_at
from peloton.api.hosts import hosts_router
from peloton.api.openapi import document_content
from peloton.api.params import ID_PATTERN, JobId
from peloton.api.pools import Pool, PoolList, pools_router
from peloton.api.publisher import Publisher
from peloton.api.strictquery import reject_unknown_query
from peloton.api.updates import updates_router
from peloton.api.whypending import JobPending, PendingReason, annotate_tasks, job_pending
from peloton.bus.codec import EncodeError
from peloton.jobmgr.domain.states import JobState
from peloton.jobmgr.domain.validation import check_job_document
from peloton.model.event import Event
from peloton.model.ids import run_id
from peloton.model.jobfile import JobFileError, job_document_to_submitted, parse_job_file
from peloton.model.taskstate import TaskState
from peloton.readmodel.listing import jobs_page, tasks_page
from peloton.readmodel.store import Store

__all__ = ["create_app", "JOB_CONTENT_TYPES", "problem_details", "Pool", "PoolList"]

log = logging.getLogger(__name__)
T = TypeVar("T")

JOB_CONTENT_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml",
                     "text/plain", "application/json")
JOB_ID = re.compile(ID_PATTERN)
JOB_STATES = ("SUBMITTED", "REJECTED", *(s.value for s in JobState))
TASK_STATES = tuple(s.value for s in TaskState)
_STATE_DOC = "any of (repeat it, or separate with commas; any case): "
POOL_IN_FLIGHT_MS = 60_000
_FIELD = re.compile(r"^(?P<field>[A-Za-z0-9_.\[\]]+): (?P<message>.*)$", re.S)


# ---- response models (the OpenAPI schema) --------------------------------------------
class SubmitWarning(BaseModel):
    code: str = Field(description="NON_PREEMPTIBLE_BEYOND_RESERVATION or NO_HOST_FITS")
    message: str


class JobAccepted(BaseModel):
    job_id: str
    warnings: list[SubmitWarning] = Field(
        default_factory=list, description="why the job can never be admitted or placed "
        "as the cluster is configured now (it is accepted all the same; see "
        "peloton.api.admissibility)")


class KillRequest(BaseModel):
    instances: list[int] = Field(default_factory=list, description="empty: the whole job")
    reason: str = ""


class KillAccepted(BaseModel):
    job_id: str
    instances: list[int]


class KillRequestInfo(BaseModel):
    at: int
    instances: list[int]
    reason: str


class Job(BaseModel):
    job_id: str
    name: str
    owner: str
    type: str
    respool: str
    instance_count: int
    priority: int
    preemptible: bool
    labels: dict[str, str]
    description: str
    state: str = Field(description="SUBMITTED (not decided yet), REJECTED, or a job state")
    previous_state: str | None
    submitted_at: int | None
    created_at: int | None
    updated_at: int
    rejection_reasons: list[str]
    kill_request: KillRequestInfo | None
    config: dict[str, Any]
    task_counts: dict[str, int]
    pending: JobPending | None = Field(None, description="why its tasks wait, with its "
                                       "place in its pool's queue (GET /v1/jobs/{id} only)")


class JobList(BaseModel):
    jobs: list[Job]
    next_cursor: str | None = Field(None, description="pass as `cursor` for the next "
                                    "page; null: this is the last page")


class TaskTransition(BaseModel):
    run: int
    state: str
    previous_state: str
    reason: str
    host: str | None
    exit_code: int | None
    failures: int
    at: int
    config_version: int = Field(1, description="the job config version the run runs")


class Task(BaseModel):
    instance: int
    run: int
    state: str
    previous_state: str
    host: str | None
    reason: str
    exit_code: int | None
    failures: int
    updated_at: int
    config_version: int = Field(1, description="the job config version the run runs")
    health: str | None = Field(None, description="the run's health check: PENDING (no "
                               "passing check yet), HEALTHY or UNHEALTHY; null: no check")
    sandbox: str | None
    history: list[TaskTransition]
    pending: PendingReason | None = Field(None, description="why it waits (null: it does "
                                          "not wait)")


class TaskList(BaseModel):
    job_id: str
    tasks: list[Task]
    next_cursor: str | None = Field(None, description="pass as `cursor` for the next "
                                    "page; null: this is the last page")


class HostRun(BaseModel):
    job_id: str
    instance: int
    run: int
    state: str


class Host(BaseModel):
    host: str
    state: str = Field(description="REGISTERED, UP or LOST")
    incarnation: str | None
    capacity: dict[str, float]
    free: dict[str, float] | None
    available: bool | None
    labels: dict[str, str]
    log_url: str | None
    port_range: list[int] | None
    simulated: bool
    registered_at: int | None
    last_heartbeat: int | None
    running: int | None
    lost_at: int | None
    lost_reason: str | None
    maintenance_state: str = Field("UP", description="UP, DRAINING, DRAINED or DOWN")
    maintenance_deadline: int | None = Field(
        None, description="when the drain should be over (ms since the epoch)")
    maintenance_reason: str = ""
    maintenance_at: int | None = None
    runs: list[HostRun] = Field(default_factory=list,
                                description="runs whose latest state is on the host")
    task_count: int = 0


class HostList(BaseModel):
    hosts: list[Host]


class DeadLetter(BaseModel):
    at: int
    service: str
    source_topic: str
    partition: int
    offset: int
    reason: str
    key: str | None
    value_size: int
    value_b64: str


class DeadLetterList(BaseModel):
    dead_letters: list[DeadLetter]


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody}, 404: {"model": ErrorBody}}


def problem_details(problems: list[str]) -> list[dict[str, str]]:
    """'field.path: reason' strings as {"field", "message"} objects (field may be '')."""
    out = []
    for p in problems:
        m = _FIELD.match(p)
        out.append({"field": m["field"], "message": m["message"]} if m
                   else {"field": "", "message": p})
    return out


def _now_ms() -> int:
    return int(time.time() * 1000)


def _job_missing(job_id: str) -> NotFound:
    return NotFound(f"job {job_id} not found (it may still be in flight)")


def create_app(
    store: Store, publisher: Publisher, *, http_client: httpx.AsyncClient | None = None,
    status: Callable[[], dict[str, Any]] | None = None, clock: Callable[[], int] = _now_ms,
    authenticator: auth.Authenticator | None = None,
    checks: Callable[[], dict[str, bool]] | None = None,
) -> FastAPI:
    """The API over one store and one publisher. `http_client` reaches agents' log
    servers (one is made on first use otherwise); `status` adds fields to /healthz;
    `checks` adds readiness checks to /readyz (peloton.api.health);
    `authenticator` knows the bearer tokens (peloton.api.auth; None: no token is valid,
    so only the open paths answer)."""
    clients: list[httpx.AsyncClient] = [http_client] if http_client is not None else []
    owned: list[httpx.AsyncClient] = []

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        for c in owned:
            await c.aclose()

    app = FastAPI(title="Peloton-py API", version="1", lifespan=lifespan,
                  dependencies=[Depends(reject_unknown_query), Depends(auth.BEARER)],
                  description="Submit and kill jobs; read jobs, tasks, hosts, pools and "
                              "dead letters from the read model.")
    _install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes())
    auth.install(app, authenticator or auth.AnyOf(), extra_open=ui.OPEN_PAGES)
    openapi.install(app)  # last: it fixes the document the others made
    auth.document(app)  # but for this: the open paths (/healthz, ...) need no token

    async def db(fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)

    created: dict[str, int] = {}  # pool -> when this process published its creation

    async def publish(event: Event) -> None:
        if event.type == "ResourcePoolCreateRequested":
            created[event.key] = clock()
        try:
            await publisher.publish(event)
        except EncodeError as exc:
            raise BadRequest(f"{event.type} does not match its schema", [str(exc)]) from exc
        except PublishError as exc:
            raise Unavailable(f"could not publish {event.type}", [str(exc)]) from exc

    async def known_pool(pool: str) -> None:
        """400 for a pool the read model does not know, unless it knows no pool yet (no
        entitlement cycle, no config: as the job manager, leave it to the later stages)
        or this process published the pool's creation less than POOL_IN_FLIGHT_MS ago."""
        known = {p["pool"] for p in await db(store.pools)} | set(await db(store.pool_configs))
        if not known or pool in known:
            return
        at = created.get(pool)
        if at is not None and clock() - at < POOL_IN_FLIGHT_MS:
            return
        raise BadRequest("invalid job file", problem_details([
            f"respool: resource pool {pool[:200]} does not exist (a pool created moments ago "
            "through another API replica may not be known here yet: retry)"]))

    async def known_job(job_id: str) -> dict[str, Any]:
        job = await db(store.get_job, job_id)
        if job is None:
            raise _job_missing(job_id)
        return job

    def agent_client() -> httpx.AsyncClient:
        if not clients:
            client = httpx.AsyncClient(timeout=httpx.Timeout(10.0, connect=3.0))
            clients.append(client)
            owned.append(client)
        return clients[0]

    # ---- jobs ---------------------------------------------------------------------------
    job_body = {"requestBody": {"required": True, "description": "a Peloton job file",
                                "content": document_content(JOB_CONTENT_TYPES)}}

    @app.post("/v1/jobs", status_code=202, response_model=JobAccepted, tags=["jobs"],
              openapi_extra=job_body,
              responses={**_ERRORS, 409: {"model": ErrorBody}, 415: {"model": ErrorBody},
                         503: {"model": ErrorBody}})
    async def submit_job(
        request: Request,
        job_id: str | None = Query(None, description="default: a new uuid4",
                                   pattern=ID_PATTERN, max_length=128),
    ) -> JobAccepted:
        """Submit a job file (YAML or JSON); publishes JobSubmitted."""
        ctype = (request.headers.get("content-type") or "application/yaml")
        ctype = ctype.split(";")[0].strip().lower()
        if ctype not in JOB_CONTENT_TYPES:
            raise UnsupportedMediaType(f"unsupported content type {ctype!r}",
                                       [f"use one of {', '.join(JOB_CONTENT_TYPES)}"])
        if job_id is not None and not JOB_ID.match(job_id):
            raise BadRequest("invalid job id", problem_details(
                ["job_id: 1-128 letters, digits, '.', '_' or '-', starting with a letter "
                 "or digit"]))
        try:
            text = (await request.body()).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadRequest("invalid job file", problem_details(["body: not UTF-8"])) from exc
        if not text.strip():
            raise BadRequest("invalid job file",
                             problem_details(["body: empty (send a job file)"]))
        jid = job_id or str(uuid.uuid4())
        body = _parse_job(text, ctype, jid, clock())
        auth.require_pool(request, str(body["respool"]))
        await known_pool(str(body["respool"]))
        if job_id is not None and await db(store.get_job, jid) is not None:
            raise Conflict(f"job {jid} already exists")
        warnings = await db(submission_warnings, store, body)
        await publish(Event("JobSubmitted", jid, body))
        return JobAccepted(job_id=jid, warnings=[SubmitWarning(**w) for w in warnings])

    @app.get("/v1/jobs", response_model=JobList, tags=["jobs"], responses=_ERRORS,
             openapi_extra={"parameters": [listing.state_param(
                 JOB_STATES, _STATE_DOC + ", ".join(JOB_STATES))]})
    async def list_jobs(
        request: Request,
        owner: str | None = Query(None, max_length=256),
        pool: str | None = Query(None, max_length=1024, description="the job's resource "
                                 "pool path, e.g. /prod/batch"),
        subpools: bool = Query(False, description="with pool: its sub-pools' jobs too"),
        label_selector: str | None = Query(
            None, max_length=listing.MAX_SELECTOR, description="Kubernetes style, e.g. "
            "`team=ml,tier!=test,env in (prod,stage),gpu,!canary`"),
        submitted_from: int | None = Query(None, ge=0, le=2**62,
                                           description="epoch ms, inclusive"),
        submitted_to: int | None = Query(None, ge=0, le=2**62,
                                         description="epoch ms, exclusive"),
        cursor: str | None = Query(None, max_length=listing.MAX_CURSOR,
                                   description="a previous answer's next_cursor"),
        limit: int = Query(100, ge=1, le=10_000),
    ) -> dict[str, Any]:
        """Jobs, newest submitted first, filtered (all filters must hold) and paginated by
        cursor: pages stay stable while new jobs arrive (they sort before the first)."""
        flt = listing.job_filter(
            states=request.query_params.getlist("state"), allowed=JOB_STATES, owner=owner,
            pool=pool, subpools=subpools,
            label_selector=label_selector, submitted_from=submitted_from,
            submitted_to=submitted_to)
        jobs, last = await db(jobs_page, store, flt, listing.job_cursor(cursor), limit)
        return {"jobs": jobs,
                "next_cursor": listing.encode_cursor(last) if last is not None else None}

    @app.get("/v1/jobs/{job_id}", response_model=Job, tags=["jobs"], responses=_ERRORS)
    async def get_job(job_id: JobId, at: str | None = Query(
            None, max_length=64, description=AT_DESCRIPTION)) -> dict[str, Any]:
        """A job: state, task counts, configuration summary, rejection reasons, and why
        its tasks wait (`pending`, see peloton.api.whypending); with `at`, the job as of
        that past instant, from its history (peloton.api.history)."""
        when = resolve_at(at, clock())
        if when is not None:  # as of a past instant (peloton.api.history)
            return await job_at(store, db, job_id, when)
        return await db(job_pending, store, await known_job(job_id))

    owns_job = Depends(auth.job_owner(lambda jid: db(store.get_job, jid)))

    @app.post("/v1/jobs/{job_id}/kill", status_code=202, response_model=KillAccepted,
              dependencies=[owns_job],
              tags=["jobs"], responses={**_ERRORS, 503: {"model": ErrorBody}})
    async def kill_job(job_id: JobId, req: KillRequest | None = Body(None)) -> KillAccepted:
        """Kill a job, or some of its instances; publishes JobKillRequested."""
        req = req or KillRequest()
        job = await known_job(job_id)
        bad = sorted({i for i in req.instances if not 0 <= i < job["instance_count"]})
        if bad:
            raise BadRequest("invalid request", [
                {"field": "instances", "message": f"no instance {i} (the job has "
                 f"{job['instance_count']})"} for i in bad])
        instances = sorted(set(req.instances))
        await publish(Event("JobKillRequested", job_id, {
            "job_id": job_id, "at": clock(), "instances": instances,
            "reason": req.reason or "killed through the API"}))
        return KillAccepted(job_id=job_id, instances=instances)

    # ---- tasks --------------------------------------------------------------------------
    @app.get("/v1/jobs/{job_id}/tasks", response_model=TaskList, tags=["tasks"],
             responses=_ERRORS, openapi_extra={"parameters": [listing.state_param(
                 TASK_STATES, _STATE_DOC + ", ".join(TASK_STATES))]})
    async def list_tasks(
        request: Request,
        job_id: JobId,
        instances: str | None = Query(None, max_length=1024, pattern=r"^[0-9 ,-]*$",
                                      description="instance ranges, e.g. 0-3,7"),
        host: str | None = Query(None, max_length=253, description="tasks whose current "
                                 "run is on this host"),
        cursor: str | None = Query(None, max_length=listing.MAX_CURSOR,
                                   description="a previous answer's next_cursor"),
        limit: int = Query(10_000, ge=1, le=10_000),
    ) -> dict[str, Any]:
        """A job's tasks in instance order with their state, reason, exit code and state
        history, filtered (all filters must hold) and paginated by cursor."""
        flt = listing.task_filter(states=request.query_params.getlist("state"),
                                  allowed=TASK_STATES, instances=instances,
                                  host=host)
        after = listing.task_cursor(cursor)
        job = await known_job(job_id)
        tasks, last = await db(tasks_page, store, job_id, flt, after, limit)
        tasks = await db(annotate_tasks, store, job, tasks)
        return {"job_id": job_id, "tasks": tasks,
                "next_cursor": listing.encode_cursor([last]) if last is not None else None}

    async def known_task(job_id: str, instance: int) -> dict[str, Any]:
        task = await db(store.task, job_id, instance)
        if task is None:
            await known_job(job_id)
            raise NotFound(f"task {job_id}/{instance} not found")
        return task

    @app.get("/v1/jobs/{job_id}/tasks/{instance}", response_model=Task, tags=["tasks"],
             responses=_ERRORS)
    async def get_task(job_id: JobId, instance: int = Path(ge=0)) -> dict[str, Any]:
        task = await known_task(job_id, instance)
        return (await db(annotate_tasks, store, await known_job(job_id), [task]))[0]

    @app.get("/v1/jobs/{job_id}/tasks/{instance}/logs", tags=["tasks"],
             response_class=StreamingResponse,
             responses={200: {"content": {"text/plain": {}}}, **_ERRORS,
                        502: {"model": ErrorBody}})
    async def task_logs(
        job_id: JobId, instance: int = Path(ge=0),
        stream: Literal["stdout", "stderr"] = "stdout",
        run: int | None = Query(None, ge=1, description="default: the current run"),
    ) -> StreamingResponse:
        """A run's stdout or stderr, streamed from the agent of the host it ran on."""
        task = await known_task(job_id, instance)
        the_run = run or int(task["run"])
        host = task["host"] if the_run == task["run"] else None
        host = host or await db(store.run_host, job_id, instance, the_run)
        rid = run_id(job_id, instance, the_run)
        if not host:
            raise NotFound(f"run {rid} has not been placed on a host, so it has no logs")
        log_url = await db(store.host_log_url, host)
        if not log_url:
            raise NotFound(f"host {host} has not registered a log URL")
        return await _proxy_log(agent_client(), log_url, host, rid, stream)

    # ---- cluster ------------------------------------------------------------------------
    @app.get("/v1/hosts", response_model=HostList, tags=["cluster"])
    async def list_hosts() -> dict[str, Any]:
        return {"hosts": await db(store.hosts)}

    app.include_router(history_router(store, db, clock))  # before pools: .../history
    app.include_router(pools_router(store, publish, db, clock))
    app.include_router(hosts_router(store, publish, db, clock))
    app.include_router(updates_router(store, publish, db, clock))
    app.include_router(ui.ui_router(store, db, clock))  # the web UI (peloton.api.ui)
    app.include_router(events_router(store))

    @app.get("/v1/dead-letters", response_model=DeadLetterList, tags=["cluster"])
    async def list_dead_letters(limit: int = Query(100, ge=1, le=10_000)) -> dict[str, Any]:
        """Records some service could not decode or handle, newest first."""
        return {"dead_letters": await db(store.dead_letters, limit)}

    # /healthz, /readyz, /metrics: probes and scrapes carry no token, so these stay OUT
    # of authentication (auth.OPEN_PATHS lists them); never put them behind it.
    app.include_router(health_router(store, publisher, status, checks))

    return app


def _parse_job(text: str, ctype: str, job_id: str, now_ms: int) -> dict[str, Any]:
    try:
        if ctype == "application/json":
            return check_job_document(job_document_to_submitted(json.loads(text), job_id, now_ms))
        return check_job_document(parse_job_file(text, job_id, now_ms))
    except json.JSONDecodeError as exc:
        raise BadRequest("invalid job file",
                         problem_details([f"not valid JSON: {exc}"])) from exc
    except JobFileError as exc:
        raise BadRequest("invalid job file", problem_details(exc.problems)) from exc


async def _proxy_log(client: httpx.AsyncClient, log_url: str, host: str, rid: str,
                     stream: str) -> StreamingResponse:
    url = f"{log_url.rstrip('/')}/logs/{rid}/{stream}"
    try:
        resp = await client.send(client.build_request("GET", url), stream=True)
    except httpx.HTTPError as exc:
        raise BadGateway(f"the agent on {host} is unreachable", [f"{url}: {exc!r}"]) from exc
    if resp.status_code == 404:
        await resp.aclose()
        raise NotFound(f"the agent on {host} has no {stream} log for run {rid}")
    if resp.status_code >= 400:
        text = (await resp.aread())[:500].decode("utf-8", "replace")
        await resp.aclose()
        raise BadGateway(f"the agent on {host} answered {resp.status_code}", [text])
    return StreamingResponse(resp.aiter_bytes(),
                             media_type=resp.headers.get("content-type", "text/plain"),
                             background=BackgroundTask(resp.aclose))


def _field_of(loc: Any) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("query", "path", "body", "header"):
        parts = parts[1:]
    return ".".join(parts)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(error_body(exc.message, exc.details), status_code=exc.status,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        details = [{"field": _field_of(e.get("loc", ())), "message": str(e.get("msg", ""))}
                   for e in exc.errors()]
        return JSONResponse(error_body("invalid request", details), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(error_body(str(exc.detail)), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return JSONResponse(error_body(f"internal error: {type(exc).__name__}"),
                            status_code=500)
