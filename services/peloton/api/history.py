"""History and time travel over HTTP, answered from the read model's event history.

Routes (`history_router`; registered before peloton.api.pools, whose `{path:path}` would
otherwise swallow `.../history`):
- GET /v1/pools/{path}/history?from&to&step: the pool's entitlement, allocation, demand,
  reservation and limit per resource, one point per entitlement cycle in [from, to]
  (default: the last hour up to now). At most MAX_POINTS points: with more cycles than
  that the server samples the last cycle of each `step_ms` bucket counted from `from`
  (the answer's `sampling` says how, `cycles` how many cycles the range held); a given
  `step` (ms) too fine for MAX_POINTS is 400. A pool with no cycle in the range (or
  none ever) answers no points. A pool named `history` (e.g. /a/history) is not
  reachable by GET /v1/pools/a/history (that is /a's history): GET /v1/pools lists it.
- GET /v1/cluster?at: job counts by state, task counts by state, the pools' entitlement,
  allocation and demand, and each host's state and maintenance state, as of `at`
  (default now).
And the `at` query parameter of GET /v1/jobs/{id} (api/app.py) and GET /v1/pools/{path}
(api/pools.py), served by `job_at` / `pool_at` here.

Times (`at`, `from`, `to`) are ms since the epoch, ISO 8601 (UTC without an offset), `now`
or relative to now (`-1h`, `-15m`, `-2d`; see peloton.readmodel.history.parse_instant).
Garbage is 400 with the accepted forms; an `at` (or `from`) in the future is 400; an `at`
before the job existed is 404 saying when it was first seen; a pool without an
entitlement cycle at `at` is 404. What "as of" shows, and what it cannot (a job's spec is
its newest; tasks' sandbox and health are not history), is in
peloton.readmodel.history's contract.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from peloton.api.errors import BadRequest, ErrorBody, NotFound
from peloton.readmodel.history import INSTANT_FORMS, MAX_POINTS, History, parse_instant
from peloton.readmodel.store import Store
from peloton.resmgr.domain.poolbook import normalize_path

__all__ = ["history_router", "job_at", "pool_at", "resolve_at", "AT_DESCRIPTION",
           "PoolHistory", "ClusterState"]

Db = Callable[..., Awaitable[Any]]
AT_DESCRIPTION = f"the state as of this instant: {INSTANT_FORMS}"
_HOUR_MS = 3_600_000


class PoolPoint(BaseModel):
    at: int
    cycle: int
    cycles: int = Field(description="cycles this point stands for (1 unless sampled)")
    entitlement: dict[str, float]
    allocation: dict[str, float]
    demand: dict[str, float]
    reservation: dict[str, float]
    limit: dict[str, float]


class PoolHistory(BaseModel):
    pool: str
    from_: int = Field(alias="from")
    to: int
    step_ms: int | None = Field(description="bucket length when sampled (None: every cycle)")
    sampling: str = Field(description="how the points were chosen")
    cycles: int = Field(description="entitlement cycles of the pool in [from, to]")
    max_points: int
    points: list[PoolPoint]

    model_config = {"populate_by_name": True}


class PoolAt(BaseModel):
    pool: str
    parent: str | None
    cycle: int
    at: int
    entitlement: dict[str, float]
    allocation: dict[str, float]
    demand: dict[str, float]


class HostAt(BaseModel):
    host: str
    state: str = Field(description="REGISTERED, UP or LOST")
    maintenance_state: str = Field(description="UP, DRAINING, DRAINED or DOWN")
    maintenance_reason: str
    capacity: dict[str, float]
    free: dict[str, float] | None
    available: bool | None
    labels: dict[str, str]


class ClusterState(BaseModel):
    at: int = Field(description="the instant answered (ms since the epoch)")
    jobs: dict[str, int] = Field(description="jobs by state")
    job_count: int
    tasks: dict[str, int] = Field(description="tasks by state")
    pools: list[PoolAt]
    hosts: list[HostAt]
    host_states: dict[str, int] = Field(description="hosts by state")


def _instant(field: str, raw: str, now: int) -> int:
    try:
        return parse_instant(raw, now)
    except ValueError as exc:
        raise BadRequest("invalid time", [{"field": field, "message": str(exc)}]) from exc


def resolve_at(raw: str | None, now: int, field: str = "at") -> int | None:
    """The instant asked (None: not asked); 400 for garbage or the future."""
    if raw is None:
        return None
    at = _instant(field, raw, now)
    if at > now:
        raise BadRequest("invalid time", [{"field": field, "message":
                         f"{at} is in the future (now is {now}): history cannot tell it"}])
    return at


async def job_at(store: Store, db: Db, job_id: str, at: int) -> dict[str, Any]:
    """The job as of `at`, or 404 (unknown job, or not existing yet then)."""
    hist = History(store._query)
    job = await db(hist.job_at, job_id, at)
    if job is not None:
        return job  # type: ignore[no-any-return]
    first = await db(hist.first_seen, job_id)
    if first is None:
        if await db(store.get_job, job_id) is not None:  # projected before job_events
            raise NotFound(f"job {job_id} has no state history (its facts were read before "
                           "this read model kept job history)")
        raise NotFound(f"job {job_id} not found (it may still be in flight)")
    raise NotFound(f"job {job_id} did not exist at {at}: it was first seen at {first}",
                   [{"field": "at", "message": f"give an instant at or after {first}"}])


async def pool_at(store: Store, db: Db, path: str, at: int) -> dict[str, Any]:
    """The pool in the newest entitlement cycle at or before `at`, or 404."""
    for pool in await db(History(store._query).pools_at, at):
        if pool["pool"] == path:
            return pool  # type: ignore[no-any-return]
    raise NotFound(f"pool {path} had no entitlement cycle at or before {at}")


def history_router(store: Store, db: Db, clock: Callable[[], int]) -> APIRouter:
    """The routes of the module docstring, over one store."""
    router = APIRouter()
    hist = History(store._query)

    @router.get("/v1/pools/{path:path}/history", response_model=PoolHistory,
                response_model_by_alias=True, tags=["pools"],
                responses={400: {"model": ErrorBody}})
    async def pool_history(
        path: str,
        frm: str | None = Query(None, alias="from", max_length=64,
                                description=f"start (default: an hour before `to`): "
                                            f"{INSTANT_FORMS}"),
        to: str | None = Query(None, max_length=64,
                               description=f"end (default: now): {INSTANT_FORMS}"),
        step: int | None = Query(None, ge=1, le=10**12, description=(
            f"sample the last cycle of each `step` ms (default: every cycle, or when the "
            f"range holds more than {MAX_POINTS} cycles the smallest whole second that "
            f"keeps at most {MAX_POINTS} points)")),
    ) -> dict[str, Any]:
        """A pool's entitlement, allocation and demand per cycle over a time range."""
        try:
            pool = normalize_path(path if path.startswith("/") else "/" + path)
        except ValueError as exc:
            raise BadRequest("invalid pool path",
                             [{"field": "path", "message": str(exc)}]) from exc
        now = clock()
        end = now if to is None else _instant("to", to, now)
        start = end - _HOUR_MS if frm is None else _instant("from", frm, now)
        if start > now:
            raise BadRequest("invalid time", [{"field": "from", "message":
                             f"{start} is in the future (now is {now})"}])
        if start > end:
            raise BadRequest("invalid time", [{"field": "from", "message":
                             f"`from` ({start}) is after `to` ({end})"}])
        try:
            return await db(hist.pool_series, pool, max(0, start), end, step)  # type: ignore[no-any-return]
        except ValueError as exc:
            raise BadRequest("invalid step", [{"field": "step", "message": str(exc)}]) from exc

    @router.get("/v1/cluster", response_model=ClusterState, tags=["cluster"],
                responses={400: {"model": ErrorBody}})
    async def cluster(
        at: str | None = Query(None, max_length=64, description=AT_DESCRIPTION
                               + " (default: now)"),
    ) -> dict[str, Any]:
        """The whole cluster (jobs, tasks, pools, hosts) as of an instant."""
        now = clock()
        when = resolve_at(at, now)
        return await db(hist.cluster_at, now if when is None else when)  # type: ignore[no-any-return]

    return router
