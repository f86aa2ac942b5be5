"""Host maintenance over HTTP: requests published to the host manager, read back from the
read model.

Routes (see `hosts_router`; GET /v1/hosts itself is in app.py):
- POST /v1/hosts/{host}/maintenance, body {"action": "start"|"complete"|"cancel",
  "deadline": "10m" (start only, optional), "requested_by": "..." (optional)}: publishes
  HostMaintenanceRequested and answers 202 with the published request. The deadline is a
  duration from now ("90s", "10m", "1h30m", "2d"), published as absolute ms.
  400: a bad action or deadline; 404: the read model does not know the host; 409: the
  host's maintenance state (read model) forbids the action (`model.hoststate.can_apply`,
  the reason is the machine's). The read model lags the host manager, which decides
  again and may still refuse (HostMaintenanceRejected, shown in the host's events).
- GET /v1/hosts/{host}: the host (as in GET /v1/hosts) with its maintenance `events`
  (state changes and refused requests, newest first); 404 when unknown.
Errors have the API's shape: {"error", "details": [{"field", "message"}]}.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from fastapi import APIRouter, Body, Depends
from pydantic import BaseModel

from peloton.api.auth import require_admin
from peloton.api.errors import BadRequest, Conflict, ErrorBody, NotFound
from peloton.api.params import HostName
from peloton.model.duration import parse_duration_ms
from peloton.model.event import Event
from peloton.model.hoststate import HostCommand, HostState, HostStateError, apply

__all__ = ["ACTIONS", "MaintenanceRequest", "MaintenanceAccepted", "HostEvent",
           "hosts_router"]

Db = Callable[..., Awaitable[Any]]
Publish = Callable[[Event], Awaitable[None]]

ACTIONS: dict[str, HostCommand] = {
    "start": HostCommand.START_MAINTENANCE,
    "complete": HostCommand.COMPLETE_MAINTENANCE,
    "cancel": HostCommand.CANCEL_MAINTENANCE,
}


class MaintenanceRequest(BaseModel):
    action: Literal["start", "complete", "cancel"]
    deadline: str | None = None
    requested_by: str | None = None


class MaintenanceAccepted(BaseModel):
    host: str
    command: str
    deadline_ms: int | None
    requested_by: str
    at: int


class HostEvent(BaseModel):
    at: int
    kind: str
    state: str
    previous_state: str
    present: bool
    command: str
    reason: str
    deadline: int | None


def _invalid(field: str, message: str) -> BadRequest:
    return BadRequest("invalid request", [{"field": field, "message": message}])


def hosts_router(store: Any, publish: Publish, db: Db, clock: Callable[[], int]) -> APIRouter:
    """The routes in the module docstring, over one store and one publish function."""
    router = APIRouter(tags=["cluster"])

    async def known_host(host: str) -> dict[str, Any]:
        found = await db(store.hosts, host)
        if not found:
            raise NotFound(f"host {host} not found",
                           [{"field": "host", "message": f"unknown host {host}"}])
        return dict(found[0])

    @router.post("/v1/hosts/{host}/maintenance", status_code=202,
                 response_model=MaintenanceAccepted, dependencies=[Depends(require_admin)],
                 responses={409: {"model": ErrorBody}})
    async def maintenance(host: HostName, req: MaintenanceRequest = Body(...)) -> dict[str, Any]:
        """Start, complete or cancel a host's maintenance (publishes
        HostMaintenanceRequested; the host manager decides)."""
        command = ACTIONS.get(req.action)
        if command is None:
            raise _invalid("action", f"one of {', '.join(ACTIONS)} expected, "
                                     f"got {req.action!r}")
        now = clock()
        deadline_ms = None
        if req.deadline is not None:
            if command is not HostCommand.START_MAINTENANCE:
                raise _invalid("deadline", "a deadline goes with action start only")
            try:
                deadline_ms = now + parse_duration_ms(req.deadline)
            except ValueError as exc:
                raise _invalid("deadline", str(exc)) from None
        found = await known_host(host)
        try:
            state = HostState(found.get("maintenance_state") or "UP")
            apply(state, command)
        except HostStateError as exc:
            raise Conflict(f"cannot {req.action} maintenance of host {host}",
                           [{"field": "action", "message": exc.reason}]) from None
        body = {"host": host, "command": command.value, "deadline_ms": deadline_ms,
                "requested_by": req.requested_by or "api", "at": now}
        await publish(Event("HostMaintenanceRequested", host, body))
        return body

    @router.get("/v1/hosts/{host}")
    async def get_host(host: HostName) -> dict[str, Any]:
        """One host with its maintenance history (newest first)."""
        found = await known_host(host)
        found["events"] = await db(store.host_events, host)
        return found

    return router
