"""Rolling updates in the job manager: requests, commands and the roll itself (pure).

Contract:
- `request` decides a JobUpdateRequested: every problem at once as ``field: reason``
  (unknown job, a job type that is not updated in place, a second update while one is
  under way, an invalid config or settings, a changed type or pool) gives
  JobUpdateRejected and changes nothing. Else the new config becomes the job's next
  version (JobSpecChanged) and the update starts (UpdateStateChanged, INITIALIZED, then
  the planner's first step).
- `command` decides an UpdateCommandRequested (pause, resume, abort, rollback) with the
  update state machine; an illegal one is rejected with the machine's reason.
- `roll` runs the planner (`updates.domain.rolling.plan`) for a job's live update over
  the job's instances and carries out its actions, and it drives every instance in
  flight to its goal on each call, so an action lost to a crash is carried out again
  (actions are idempotent: "instance i runs version v", "instance i goes"):
  ADD starts a new instance at the target version; UPDATE takes the instance's current
  run away (a preemption with reason UPDATE, or at once when it is not on a host) and
  its next run starts at the target version (a stateful instance stays on its volume's
  host); REMOVE kills the instance for good. The update record is published (and
  folded) only when it changed, before the task changes it causes.
- An instance's goal version (`goal_version`) is the update's target while the update
  has touched it in its current direction, else the version of its current run: new
  runs (restarts, retries, requeues) start at the goal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from peloton.jobmgr.domain import kills
from peloton.jobmgr.domain.records import Batch, JobRecord, TaskRecord, change
from peloton.jobmgr.domain.retries import PREEMPTED
from peloton.jobmgr.domain.validation import validate_submission
from peloton.model.event import Event
from peloton.model.spec import JobType
from peloton.model.taskstate import ENDING, ON_HOST, TERMINAL, TaskState
from peloton.updates.domain.rolling import (
    ActionKind,
    Health,
    InstanceView,
    Update,
    UpdateSettings,
    UpdateSpecError,
    plan,
)
from peloton.updates.domain.rolling import (
    command as apply_command,
)
from peloton.updates.domain.states import IllegalUpdateTransition, Trigger

if TYPE_CHECKING:
    from peloton.jobmgr.domain.book import JobBook

__all__ = ["UpdateRecord", "request", "command", "roll", "goal_version", "UPDATABLE"]

S = TaskState
UPDATABLE = (JobType.SERVICE, JobType.STATEFUL)
UPDATE = "UPDATE"


@dataclass(frozen=True, slots=True)
class UpdateRecord:
    """A job's newest update as its UpdateStateChanged events left it."""

    job_id: str
    update_id: str
    update: Update
    reason: str = ""
    command_at: int = 0  # the newest command this update has answered

    def to_json(self) -> str:
        return json.dumps({"update": self.update.to_dict(), "command_at": self.command_at},
                          sort_keys=True)

    @classmethod
    def from_event(cls, body: dict[str, Any]) -> UpdateRecord:
        data = json.loads(body["record_json"])
        return cls(body["job_id"], body["update_id"], Update.from_dict(data["update"]),
                   body["reason"], int(data["command_at"]))

    @property
    def live(self) -> bool:
        return not self.update.status.terminal


def goal_version(book: JobBook, job: JobRecord, task: TaskRecord) -> int:
    rec = book.updates.get(job.job_id)
    if rec is not None and rec.live and task.instance in rec.update.progress.touched:
        return rec.update.target[1]
    return task.config_version


# ---- requests and commands -------------------------------------------------------------
def request(book: JobBook, body: dict[str, Any], now_ms: int) -> list[Event]:
    job_id, update_id = body["job_id"], body["update_id"]
    job = book.jobs.get(job_id)
    problems: list[str] = []
    if job is None or job_id in book.ended:
        problems.append(f"job_id: no running job {job_id}")
        return [_rejected(body, problems, now_ms)]
    if job.spec.type not in UPDATABLE:
        problems.append(f"type: only SERVICE and STATEFUL jobs are updated in place "
                        f"(job {job_id} is {job.spec.type})")
    rec = book.updates.get(job_id)
    if rec is not None and rec.live:
        problems.append(f"update: job {job_id} already has update {rec.update_id} "
                        f"({rec.update.status}); pause, abort or wait for it")
    config = {**body["config"], "job_id": job_id}
    created, found = validate_submission(config, book.pools, book.leaf_pools, now_ms)
    problems.extend(f"config.{p}" for p in found)
    settings = _settings(body["settings"], job, problems)
    if created is not None:
        for name in ("type", "respool"):
            if created[name] != job.spec.get(name):
                problems.append(f"config.{name}: an update cannot change it "
                                f"({job.spec.get(name)} -> {created[name]})")
    only = frozenset(int(i) for i in body.get("instances") or ())
    problems.extend(f"instances: no instance {i} in job {job_id}"
                    for i in sorted(only) if not 0 <= i < len(job.tasks))
    if problems or created is None or settings is None:
        return [_rejected(body, problems, now_ms)]
    version = max(job.versions) + 1
    spec_event = Event("JobSpecChanged", job_id, {**created, "version": version,
                                                  "update_id": update_id})
    book.apply(spec_event.type, spec_event.body)
    update = Update(settings, job.spec_of(version - 1).instance_count, version - 1,
                    created["instance_count"], version, only=only)
    first = UpdateRecord(job_id, update_id, update, "created")
    events = [spec_event, _state_event(first, None, now_ms, int(body["at"]))]
    book.apply(events[-1].type, events[-1].body)
    return events + book.roll_now(job_id, now_ms)


def _settings(raw: dict[str, Any], job: JobRecord, problems: list[str]) -> UpdateSettings | None:
    sla = job.spec.get("max_unavailable")
    cap = raw.get("max_unavailable")
    if cap is None and sla is not None:
        cap = max(1, int(sla))  # the job's own budget bounds its updates too
    try:
        return UpdateSettings(
            batch_size=int(raw.get("batch_size", 0)), max_unavailable=cap,
            max_instance_retries=int(raw.get("max_instance_retries", 0)),
            max_tolerable_instance_failures=int(raw.get("max_tolerable_instance_failures", 0)),
            rollback_on_failure=bool(raw.get("rollback_on_failure", False)),
            start_paused=bool(raw.get("start_paused", False)),
            canary=int(raw.get("canary", 0)))
    except UpdateSpecError as exc:
        problems.append(f"settings.{exc}")
        return None


def command(book: JobBook, body: dict[str, Any], now_ms: int) -> list[Event]:
    job_id, at = body["job_id"], int(body["at"])
    rec = book.updates.get(job_id)
    if rec is None or (body["update_id"] and body["update_id"] != rec.update_id):
        which = body["update_id"] or "any update"
        return [_rejected(body, [f"update_id: job {job_id} has no update {which}"], now_ms,
                          body["command"])]
    try:
        trigger = Trigger(body["command"])
        if trigger not in (Trigger.PAUSE, Trigger.RESUME, Trigger.ABORT, Trigger.ROLLBACK):
            raise ValueError(trigger)
        update = apply_command(rec.update, trigger)
    except IllegalUpdateTransition as exc:
        return [_rejected(body, [f"command: {exc}"], now_ms, body["command"])]
    except ValueError:
        return [_rejected(body, [f"command: must be pause, resume, abort or rollback, got "
                                 f"{body['command']}"], now_ms, body["command"])]
    new = replace(rec, update=update, reason=f"{body['command']} requested by "
                  f"{body.get('requested_by') or 'a user'}", command_at=at)
    event = _state_event(new, rec, now_ms, at)
    book.apply(event.type, event.body)
    return [event, *book.roll_now(job_id, now_ms)]


def _rejected(body: dict[str, Any], problems: list[str], now_ms: int,
              what: str = "update") -> Event:
    return Event("JobUpdateRejected", body["job_id"], {
        "job_id": body["job_id"], "update_id": body["update_id"], "at": now_ms,
        "request_at": int(body["at"]), "command": what, "reasons": problems})


def _state_event(rec: UpdateRecord, old: UpdateRecord | None, now_ms: int,
                 request_at: int = 0) -> Event:
    p = rec.update.progress
    return Event("UpdateStateChanged", rec.job_id, {
        "job_id": rec.job_id, "update_id": rec.update_id, "at": now_ms,
        "request_at": request_at, "state": rec.update.status.state.value,
        "previous_state": "" if old is None else old.update.status.state.value,
        "reason": rec.reason, "from_version": rec.update.old_version,
        "to_version": rec.update.new_version, "done": sorted(p.done),
        "failed": sorted(p.failed), "in_flight": p.in_flight,
        "record_json": rec.to_json()})


# ---- the roll --------------------------------------------------------------------------
def instance_views(job: JobRecord) -> dict[int, InstanceView]:
    views: dict[int, InstanceView] = {}
    for task in job.tasks:
        if task.kill_requested and task.state in TERMINAL:
            if task.instance >= job.spec.instance_count:
                continue  # removed by an update: not an instance any more
            views[task.instance] = InstanceView(task.config_version, Health.STOPPED)
            continue  # stopped by a user: it takes a new version without running
        views[task.instance] = InstanceView(task.config_version, _health(job, task),
                                            None, task.version_failures)
    return views


def _health(job: JobRecord, task: TaskRecord) -> Health:
    if task.state != S.RUNNING:
        return Health.NOT_RUNNING
    healthy = task.health == "HEALTHY" or (not job.health_checked(task) and task.health == "")
    return Health.HEALTHY if healthy else Health.UNHEALTHY


def roll(book: JobBook, job_id: str, batch: Batch, now_ms: int) -> list[Event]:
    """One planner step for the job's live update; returns its UpdateStateChanged (if the
    record changed), already applied; the task changes go into `batch`."""
    rec = book.updates.get(job_id)
    job = book.jobs.get(job_id)
    if rec is None or job is None or not rec.live:
        return []
    views = instance_views(job)
    goals = {i: goal_version(book, job, job.tasks[i]) for i in views}
    views = {i: replace(v, goal_version=goals[i]) for i, v in views.items()}
    step = plan(rec.update, views)
    events: list[Event] = []
    if step.update != rec.update or step.reason != rec.reason:
        new = replace(rec, update=step.update, reason=step.reason)
        events.append(_state_event(new, rec, now_ms))
        book.apply(events[-1].type, events[-1].body)
        rec = new
    if rec.live:
        _drive(book, job, rec, batch)
    return events


def _drive(book: JobBook, job: JobRecord, rec: UpdateRecord, batch: Batch) -> None:
    """Carry out (again) what every in-flight instance still needs."""
    count, version = rec.update.target
    why = f"update {rec.update_id}: "
    for i in rec.update.progress.in_flight:
        kind = rec.update.progress.touched[i]
        if i >= len(job.tasks):
            if kind is ActionKind.ADD and not _added(batch, job.job_id, i):
                _add(job, i, version, why, batch)
            continue
        task = job.tasks[i]
        cur = batch.pending(job.job_id, task)
        if kind is ActionKind.REMOVE:
            if not task.kill_requested:
                kills.carry_out(book, job, [i], batch, why + f"remove instance {i}")
        elif task.config_version != version and cur.run == task.run and not (
                cur.state in ENDING or cur.state in TERMINAL or task.kill_requested):
            _replace(book, job, task, version, why, batch)
        elif (task.config_version != version and task.kill_requested
              and cur.state in TERMINAL and cur.run == task.run):
            _restamp(job, task, version, why, batch)


def _restamp(job: JobRecord, task: TaskRecord, version: int, why: str, batch: Batch) -> None:
    """A stopped instance takes `version` without running: its ended run is said again at
    that version (a KILLED -> KILLED change), so its next run, when started, runs it."""
    if any(c["instance"] == task.instance and c.get("config_version") == version
           for c in batch.changes.get(job.job_id, ())):
        return
    cur = batch.pending(job.job_id, task)
    ch = change(task.instance, cur.run, cur.state, cur.state,
                why + f"stopped instance {task.instance} takes version {version} (it runs "
                "it when started)", cur.host, task.exit_code, cur.failures)
    ch["config_version"] = version
    batch.add(job.job_id, ch)


def _added(batch: Batch, job_id: str, instance: int) -> bool:
    return any(c["instance"] == instance for c in batch.changes.get(job_id, ()))


def _add(job: JobRecord, i: int, version: int, why: str, batch: Batch) -> None:
    first = change(i, 1, S.PENDING, S.INITIALIZED, why + f"start instance {i} at version "
                   f"{version}", None, None, 0)
    first["config_version"] = version
    batch.add(job.job_id, first)


def _replace(book: JobBook, job: JobRecord, task: TaskRecord, version: int, why: str,
             batch: Batch) -> None:
    cur = batch.pending(job.job_id, task)
    reason = why + f"replace instance {task.instance} with version {version}"
    if cur.state in ON_HOST or cur.state in (S.READY, S.PLACING, S.PLACED):
        if cur.state in (S.LAUNCHING, S.PLACED):
            return  # on its way to the host: replaced once it runs (next step)
        kills.preempt(book, batch, [{"job_id": job.job_id, "instance": task.instance,
                                     "run": cur.run, "reason": UPDATE, "detail": reason}])
    else:  # PENDING or INITIALIZED (waiting, or backing off): a new run at once
        book.emit(batch, job, task, S.KILLED, cur, f"{PREEMPTED} ({UPDATE}: {reason})",
                  None, None)

