"""Rolling updates over HTTP: requests published to the job manager, read back from the read
model.

Routes (see `updates_router`):
- POST /v1/jobs/{job_id}/update, body a job file (YAML or JSON, as POST /v1/jobs), query
  batch_size, max_unavailable, max_failures (max_tolerable_instance_failures),
  max_instance_retries, rollback_on_failure, start_paused, canary, update_id (default a
  uuid4), requested_by: publishes JobUpdateRequested, 202 {job_id, update_id}.
- POST /v1/jobs/{job_id}/restart, query batch_size, max_unavailable, update_id,
  requested_by: a rolling update to the job's current config (every instance gets a new
  run), rebuilt from the read model's spec as a JobSubmitted body. 409 when the read
  model does not hold the whole config (a spec projected before it kept all of it): then
  send the job file to /update instead.
- POST /v1/jobs/{job_id}/stop: kill the whole job (JobKillRequested, as /kill).
- GET /v1/jobs/{job_id}/updates (newest first), GET /v1/updates/{update_id}.
- POST /v1/updates/{update_id}/{command}, command pause|resume|abort|rollback: publishes
  UpdateCommandRequested, 202.
Errors (the API's shape, {"error", "details": [{"field", "message"}]}): 400 every problem
at once (the job file's, as job submission checks them; the settings'; a job type that is
not SERVICE/STATEFUL; a changed type or respool; an unknown command); 404 an unknown job
or update; 409 a live update of the job (the read model's: an update not in a final state,
or a request unanswered for less than `UNANSWERED_MS`), an update id already used, or a
command the update's state forbids (the state machine's reason). The read model lags the
job manager, which decides again and may still refuse (JobUpdateRejected: the update shows
REJECTED, a refused command shows as its `last_command_rejection`).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, Field

from peloton.api.auth import job_owner, update_owner
from peloton.api.errors import BadRequest, Conflict, ErrorBody, NotFound, UnsupportedMediaType
from peloton.api.listing import parse_instance_ranges
from peloton.api.openapi import document_content
from peloton.api.params import ID_PATTERN, JobId, UpdateId
from peloton.jobmgr.domain.validation import validate_submission
from peloton.model.event import Event
from peloton.model.jobfile import JobFileError, job_document_to_submitted, parse_job_file
from peloton.updates.domain.rolling import UpdateSettings, UpdateSpecError
from peloton.updates.domain.states import (
    IllegalUpdateTransition,
    Trigger,
    UpdateState,
    UpdateStatus,
    apply,
)

__all__ = ["updates_router", "UpdateAccepted", "UpdateInfo", "UpdateList",
           "CommandAccepted", "COMMANDS", "UNANSWERED_MS", "submitted_from_spec"]

Db = Callable[..., Awaitable[Any]]
Publish = Callable[[Event], Awaitable[None]]

COMMANDS = ("pause", "resume", "abort", "rollback")
UPDATABLE = ("SERVICE", "STATEFUL")
FINAL = {"SUCCEEDED", "ROLLED_BACK", "ABORTED", "FAILED", "REJECTED"}
UNANSWERED_MS = 60_000  # a request the job manager has not answered blocks for this long
CONTENT_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml",
                 "text/plain", "application/json")
_ID = re.compile(ID_PATTERN)
_CONFLICT: dict[int | str, dict[str, Any]] = {409: {"model": ErrorBody}}
Command = Annotated[Literal["pause", "resume", "abort", "rollback"],
                    Path(description="pause, resume, abort or rollback")]
# query parameter -> UpdateSettings attribute (and the field UpdateSpecError names)
_INT_SETTINGS = {"batch_size": ("batch_size", "batchSize"),
                 "max_unavailable": ("max_unavailable", "maxUnavailable"),
                 "max_failures": ("max_tolerable_instance_failures",
                                  "maxTolerableInstanceFailures"),
                 "max_instance_retries": ("max_instance_retries", "maxInstanceRetries"),
                 "canary": ("canary", "canary")}


class UpdateAccepted(BaseModel):
    job_id: str
    update_id: str


class CommandAccepted(BaseModel):
    job_id: str
    update_id: str
    command: str
    at: int


class CommandRejection(BaseModel):
    command: str
    at: int
    reason: str


class UpdateInfo(BaseModel):
    job_id: str
    update_id: str
    state: str = Field(description="REQUESTED (not answered yet), REJECTED, or INITIALIZED, "
                                   "ROLLING_FORWARD, PAUSED, ROLLING_BACKWARD, SUCCEEDED, "
                                   "ROLLED_BACK, ABORTED, FAILED")
    previous_state: str | None
    reason: str
    from_version: int | None
    to_version: int | None
    from_instance_count: int
    to_instance_count: int
    instances: int = Field(description="how many instances the update may touch")
    done: list[int]
    failed: list[int]
    in_flight: list[int]
    resume_to: str | None = Field(description="the state a PAUSED update resumes")
    settings: dict[str, Any]
    requested_by: str | None
    requested_at: int | None
    created_at: int
    updated_at: int | None
    last_command_rejection: CommandRejection | None


class UpdateList(BaseModel):
    job_id: str
    updates: list[UpdateInfo]


class StopAccepted(BaseModel):
    job_id: str
    instances: list[int]


def _problem(field: str, message: str) -> dict[str, str]:
    return {"field": field, "message": message}


def _split(problem: str) -> dict[str, str]:
    field, sep, message = problem.partition(": ")
    return _problem(field, message) if sep and " " not in field else _problem("", problem)


def settings_problems(values: dict[str, Any]) -> list[dict[str, str]]:
    """Every invalid setting, named by its query parameter."""
    out = []
    for param, (attr, _) in _INT_SETTINGS.items():
        value = values.get(attr)
        if value is None:
            continue
        try:
            UpdateSettings(**{attr: value})
        except UpdateSpecError as exc:
            out.append(_problem(param, exc.reason))
    return out


def submitted_from_spec(job: dict[str, Any], job_id: str, now_ms: int) -> dict[str, Any] | None:
    """The job's current config (the read model's spec) as a JobSubmitted body, or None when
    the spec does not hold all of it."""
    config = job.get("config") or {}
    needed = ("default_task", "instance_tasks", "gang_size", "placement_strategy", "revocable",
              "max_unavailable")
    if any(k not in config for k in needed):
        return None
    return {
        "job_id": job_id, "submitted_at": now_ms, "name": job["name"], "owner": job["owner"],
        "description": job.get("description") or "", "type": job["type"],
        "labels": dict(job["labels"]), "instance_count": job["instance_count"],
        "respool": job["respool"],
        "sla": {"priority": job["priority"], "preemptible": job["preemptible"],
                "revocable": bool(config["revocable"]),
                "minimum_running_instances": int(config["gang_size"]),
                "maximum_running_instances": 0,
                "maximum_unavailable_instances": config["max_unavailable"]},
        "default_config": _task_config(config["default_task"]),
        "instance_config": {k: _task_config(v) for k, v in config["instance_tasks"].items()},
        "placement_strategy": config["placement_strategy"],
    }


def _task_config(t: dict[str, Any]) -> dict[str, Any]:
    r = t["resources"]
    return {"cpu_limit": r["cpu"], "mem_limit_mb": r["memory"], "disk_limit_mb": r["disk"],
            "gpu_limit": r["gpu"], "command": t["command"], "env": dict(t["env"]),
            "constraint_json": t.get("constraint_json"), "max_failures": t["max_failures"],
            "labels": dict(t["labels"]), "ports": list(t["ports"]),
            "kill_grace_period_s": t["kill_grace_period_s"],
            "controller": bool(t.get("controller")), "revocable": bool(t.get("revocable")),
            "health_check_json": t.get("health_check_json"), "volume": t.get("volume")}


def _parse(text: str, ctype: str, job_id: str, now_ms: int
           ) -> tuple[dict[str, Any] | None, dict[str, Any] | None, list[str]]:
    """(JobSubmitted body, what the job manager would make of it, problems)."""
    try:
        if ctype == "application/json":
            body = job_document_to_submitted(json.loads(text), job_id, now_ms)
        else:
            body = parse_job_file(text, job_id, now_ms)
    except json.JSONDecodeError as exc:
        return None, None, [f"body: not valid JSON: {exc}"]
    except JobFileError as exc:
        return None, None, list(exc.problems)
    created, problems = validate_submission(body, None, None, now_ms)
    return body, created, problems


def updates_router(store: Any, publish: Publish, db: Db, clock: Callable[[], int]) -> APIRouter:
    """The routes in the module docstring, over one store and one publish function."""
    router = APIRouter(tags=["updates"])
    # writes: admins, or submitters owning the job's pool (peloton.api.auth)
    owns_job = [Depends(job_owner(lambda jid: db(store.get_job, jid)))]
    owns_update = [Depends(update_owner(lambda uid: db(store.update, uid),
                                        lambda jid: db(store.get_job, jid)))]

    async def known_job(job_id: str) -> dict[str, Any]:
        job = await db(store.get_job, job_id)
        if job is None:
            raise NotFound(f"job {job_id} not found (it may still be in flight)",
                           [_problem("job_id", f"unknown job {job_id}")])
        return dict(job)

    async def known_update(update_id: str) -> dict[str, Any]:
        found = await db(store.update, update_id)
        if found is None:
            raise NotFound(f"update {update_id} not found (it may still be in flight)",
                           [_problem("update_id", f"unknown update {update_id}")])
        return dict(found)

    async def check_free(job_id: str, update_id: str | None, now: int) -> None:
        """409 when the job has a live update or the update id is taken."""
        for u in await db(store.updates_of_job, job_id):
            if u["state"] == "REQUESTED" and now - (u["requested_at"] or 0) >= UNANSWERED_MS:
                continue  # never answered: the job manager dropped it
            if u["state"] not in FINAL:
                raise Conflict(f"job {job_id} already has update {u['update_id']} "
                               f"({u['state']})", [_problem(
                                   "job_id", "pause, abort or wait for it first")])
        if update_id is not None and await db(store.update, update_id) is not None:
            raise Conflict(f"update {update_id} already exists",
                           [_problem("update_id", "choose another id")])

    def job_problems(job: dict[str, Any]) -> list[str]:
        if job["type"] not in UPDATABLE:
            return [f"type: only SERVICE and STATEFUL jobs are updated in place (job "
                    f"{job['job_id']} is {job['type'] or job['state']})"]
        return []

    def check_id(update_id: str | None) -> list[dict[str, str]]:
        if update_id is not None and not _ID.match(update_id):
            return [_problem("update_id", "1-128 letters, digits, '.', '_' or '-', starting "
                                          "with a letter or digit")]
        return []

    async def request_update(job_id: str, config: dict[str, Any], settings: dict[str, Any],
                             update_id: str | None, requested_by: str, now: int,
                             instances: list[int] | None = None) -> UpdateAccepted:
        uid = update_id or str(uuid.uuid4())
        await check_free(job_id, update_id, now)
        await publish(Event("JobUpdateRequested", job_id, {
            "job_id": job_id, "update_id": uid, "at": now, "requested_by": requested_by,
            "config": config, "settings": settings, "instances": instances or []}))
        return UpdateAccepted(job_id=job_id, update_id=uid)

    job_body = {"requestBody": {"required": True, "description": "the job's new job file",
                                "content": document_content(CONTENT_TYPES)}}

    @router.post("/v1/jobs/{job_id}/update", status_code=202, response_model=UpdateAccepted,
                 openapi_extra=job_body, dependencies=owns_job, responses=_CONFLICT)
    async def update_job(
        request: Request, job_id: JobId,
        batch_size: int = Query(0, description="instances in flight at once; 0: all"),
        max_unavailable: int | None = Query(
            None, description="instances down at once; default: the job's "
                              "sla.maximumUnavailableInstances, else no limit"),
        max_failures: int = Query(0, description="failed instances before the update "
                                                 "fails (max_tolerable_instance_failures); "
                                                 "0: never"),
        max_instance_retries: int = Query(0, description="runs an instance may fail at the "
                                                         "new version; 0: no limit"),
        rollback_on_failure: bool = False, start_paused: bool = False,
        canary: int = Query(0, description="update this many instances, then pause"),
        update_id: str | None = Query(None, description="default: a new uuid4; 1-128 "
                                      "letters, digits, '.', '_' or '-'"),
        requested_by: str = "api",
    ) -> UpdateAccepted:
        """Roll a SERVICE or STATEFUL job to a new job file (publishes JobUpdateRequested;
        the job manager decides)."""
        ctype = (request.headers.get("content-type") or "application/yaml")
        ctype = ctype.split(";")[0].strip().lower()
        if ctype not in CONTENT_TYPES:
            raise UnsupportedMediaType(f"unsupported content type {ctype!r}",
                                       [f"use one of {', '.join(CONTENT_TYPES)}"])
        now = clock()
        settings = {"batch_size": batch_size, "max_unavailable": max_unavailable,
                    "max_instance_retries": max_instance_retries,
                    "max_tolerable_instance_failures": max_failures,
                    "rollback_on_failure": rollback_on_failure, "start_paused": start_paused,
                    "canary": canary}
        details = check_id(update_id) + settings_problems(settings)
        try:
            text = (await request.body()).decode("utf-8")
        except UnicodeDecodeError:
            text = None
            details.append(_problem("body", "not UTF-8"))
        job = await known_job(job_id)
        problems = job_problems(job)
        body: dict[str, Any] | None = None
        if text is not None and not text.strip():
            details.append(_problem("body", "empty (send the job's new job file)"))
        elif text is not None:
            body, created, found = _parse(text, ctype, job_id, now)
            problems += found
            if job["type"] in UPDATABLE:
                problems += _changed(job, created, body)
        details += [_split(p) for p in problems]
        if details:
            raise BadRequest("invalid update", details)
        assert body is not None
        return await request_update(job_id, body, settings, update_id, requested_by, now)

    @router.post("/v1/jobs/{job_id}/restart", status_code=202, response_model=UpdateAccepted,
                 dependencies=owns_job, responses=_CONFLICT)
    async def restart_job(
        job_id: JobId,
        batch_size: int = Query(0, description="instances restarted at once; 0: all"),
        max_unavailable: int | None = Query(None, description="instances down at once"),
        update_id: str | None = Query(None, description="default: a new uuid4"),
        requested_by: str = "api",
        instances: str | None = Query(None, description="only these instances, e.g. "
                                      "0-3,7 (default: all)"),
    ) -> UpdateAccepted:
        """Restart every instance (or the given ones) of a SERVICE or STATEFUL job, a
        batch at a time and within maxUnavailable: a rolling update to the job's current
        config."""
        now = clock()
        settings = {"batch_size": batch_size, "max_unavailable": max_unavailable,
                    "max_instance_retries": 0, "max_tolerable_instance_failures": 0,
                    "rollback_on_failure": False, "start_paused": False, "canary": 0}
        details = check_id(update_id) + settings_problems(settings)
        job = await known_job(job_id)
        details += [_split(p) for p in job_problems(job)]
        chosen, bad = parse_instances(instances, int(job["instance_count"]))
        details += [_problem("instances", b) for b in bad]
        if details:
            raise BadRequest("invalid restart", details)
        config = submitted_from_spec(job, job_id, now)
        if config is None:
            raise Conflict(f"the read model does not hold job {job_id}'s whole config",
                           [_problem("job_id", f"send its job file to POST /v1/jobs/"
                                               f"{job_id}/update instead")])
        return await request_update(job_id, config, settings, update_id, requested_by, now,
                                    chosen)

    @router.post("/v1/jobs/{job_id}/start", status_code=202, response_model=StopAccepted,
                 tags=["jobs"], dependencies=owns_job, responses=_CONFLICT)
    async def start_job(job_id: JobId, requested_by: str = "api",
                        instances: str | None = Query(None, description="only these "
                                                      "instances, e.g. 0-3,7 (default: all)"),
                        ) -> StopAccepted:
        """Start stopped instances of a SERVICE or STATEFUL job again (all of them, or
        `instances`), also of a STOPPED job: they get new runs (publishes
        JobStartRequested). 409 for a job that has ended (killed): it is submitted again."""
        job = await known_job(job_id)
        if job.get("type") not in ("SERVICE", "STATEFUL"):
            raise BadRequest("invalid start", [_problem(
                "type", f"only SERVICE and STATEFUL instances start again (job {job_id} "
                        f"is {job.get('type')}: a batch job is submitted again, a daemon's "
                        "instances follow its hosts)")])
        if job.get("state") in ("KILLED", "SUCCEEDED", "FAILED"):
            raise Conflict(f"job {job_id} has ended ({job['state']})", [_problem(
                "job_id", "a killed job does not start again: submit it again (`job "
                          "stop` instead of `job kill` keeps a service startable)")])
        chosen, bad = parse_instances(instances, int(job["instance_count"]))
        if bad:
            raise BadRequest("invalid start", [_problem("instances", b) for b in bad])
        await publish(Event("JobStartRequested", job_id, {
            "job_id": job_id, "at": clock(), "instances": chosen,
            "requested_by": requested_by}))
        return StopAccepted(job_id=job_id, instances=chosen)

    @router.post("/v1/jobs/{job_id}/stop", status_code=202, response_model=StopAccepted,
                 tags=["jobs"], dependencies=owns_job)
    async def stop_job(job_id: JobId, requested_by: str = "api",
                       instances: str | None = Query(None, description="only these "
                                                     "instances, e.g. 0-3,7 (default: all)"),
                       ) -> StopAccepted:
        """Stop a job, or some of its instances: they are killed and not restarted
        (publishes JobKillRequested). A SERVICE or STATEFUL job stopped whole is STOPPED
        (every instance's kill, so /start runs it again); any other job is killed, as by
        /kill."""
        job = await known_job(job_id)
        chosen, bad = parse_instances(instances, int(job["instance_count"]))
        if bad:
            raise BadRequest("invalid stop", [_problem("instances", b) for b in bad])
        if not chosen and job.get("type") in ("SERVICE", "STATEFUL"):
            chosen = list(range(int(job["instance_count"])))
        await publish(Event("JobKillRequested", job_id, {
            "job_id": job_id, "at": clock(), "instances": chosen,
            "reason": f"stopped by {requested_by} through the API"}))
        return StopAccepted(job_id=job_id, instances=chosen)

    @router.get("/v1/jobs/{job_id}/updates", response_model=UpdateList)
    async def list_updates(job_id: JobId) -> dict[str, Any]:
        """A job's updates, newest first."""
        await known_job(job_id)
        return {"job_id": job_id, "updates": await db(store.updates_of_job, job_id)}

    @router.get("/v1/updates/{update_id}", response_model=UpdateInfo)
    async def get_update(update_id: UpdateId) -> dict[str, Any]:
        """One update: state, progress (done, failed, in flight) and why it waits."""
        return await known_update(update_id)

    @router.post("/v1/updates/{update_id}/{command}", status_code=202,
                 response_model=CommandAccepted, dependencies=owns_update,
                 responses=_CONFLICT)
    async def update_command(update_id: UpdateId, command: Command,
                             requested_by: str = "api") -> CommandAccepted:
        """Pause, resume, abort or roll back an update (publishes UpdateCommandRequested)."""
        if command not in COMMANDS:
            raise BadRequest("invalid command", [_problem(
                "command", f"one of {', '.join(COMMANDS)} expected, got {command!r}")])
        found = await known_update(update_id)
        reason = _forbidden(found, Trigger(command))
        if reason:
            raise Conflict(f"cannot {command} update {update_id}",
                           [_problem("command", reason)])
        now = clock()
        await publish(Event("UpdateCommandRequested", found["job_id"], {
            "job_id": found["job_id"], "update_id": update_id, "at": now,
            "command": command, "requested_by": requested_by}))
        return CommandAccepted(job_id=found["job_id"], update_id=update_id, command=command,
                               at=now)

    return router


def _changed(job: dict[str, Any], created: dict[str, Any] | None,
             body: dict[str, Any] | None) -> list[str]:
    """An update keeps the job's type and pool: as the job manager would make them of the
    job file (`created`), or when that has problems as the file gives them (a SERVICE
    file whose tasks keep volumes makes a STATEFUL job)."""
    new = created or body
    if new is None:
        return []
    out = []
    for name in ("type", "respool"):
        value = new[name]
        if (created is None and name == "type" and value == "SERVICE"
                and job["type"] == "STATEFUL"):
            continue
        if value != job[name]:
            out.append(f"{name}: an update cannot change it ({job[name]} -> {value})")
    return out


def _forbidden(update: dict[str, Any], trigger: Trigger) -> str:
    """Why the update's read-model state forbids the command ("" when it allows it). An
    unanswered request counts as INITIALIZED (the job manager reads the request first)."""
    state = update["state"]
    if state == "REJECTED":
        return f"the update was rejected ({update['reason']}): nothing to {trigger.value}"
    try:
        if state == "REQUESTED":
            status = UpdateStatus(UpdateState.INITIALIZED)
        else:
            resume = update.get("resume_to")
            status = UpdateStatus(UpdateState(state), UpdateState(resume) if resume else None)
        apply(status, trigger)
    except IllegalUpdateTransition as exc:
        return exc.reason
    except ValueError:
        return f"the update is in an unknown state {state}"
    return ""


def parse_instances(text: str | None, count: int) -> tuple[list[int], list[str]]:
    """"0-3,7" -> ([0, 1, 2, 3, 7], problems); None or "" -> ([], []) (every instance).
    The ranges are read as the task list's `instances` filter reads them (listing)."""
    ranges, problems = parse_instance_ranges(text)
    chosen: set[int] = set()
    for first, last in ranges:
        if last >= count:
            shown = str(first) if first == last else f"{first}-{last}"
            problems.append(f"{shown} is outside 0-{count - 1}")
            continue
        chosen.update(range(first, last + 1))
    return sorted(chosen), problems
