"""The job book as plain JSON-able data and back (pure).

`book_to_data(book)` holds everything the book cannot rebuild from the tail of the log:
the jobs (their JobCreated body, state, kill flag, end time, and one positional row per
task, fields in `TASK_FIELDS` order), rejected submissions, undecided submissions, kill
intents, the pool names, the forgotten ids and the rejections held for placements not
read yet. The derived indexes (watched runs, ended jobs, controller ends, task counts)
are rebuilt by `book_from_data`, which raises KeyError / TypeError / ValueError on data
it cannot read. Bump `SNAPSHOT_VERSION` whenever this shape changes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from peloton.jobmgr.domain.book import JobBook
from peloton.jobmgr.domain.folding import HeldRejections
from peloton.jobmgr.domain.hosts import HostTable
from peloton.jobmgr.domain.records import JobRecord, Outgoing, TaskRecord
from peloton.jobmgr.domain.retention import ForgottenIds
from peloton.jobmgr.domain.timeouts import WATCHED, Timeouts
from peloton.jobmgr.domain.updates import UpdateRecord
from peloton.model.backoff import RestartBackoff
from peloton.model.spec import LONG_RUNNING, JobSpec, JobType
from peloton.model.taskstate import ON_HOST, TERMINAL, JobState, task_state

__all__ = ["SNAPSHOT_VERSION", "TASK_FIELDS", "book_to_data", "book_from_data"]

SNAPSHOT_VERSION = 4  # 2: placed_round per task; 3: long-running jobs (health, backoff,
#                        pins, config versions, updates, hosts); 4: outgoing runs (drains),
#                        in-place restarts
TASK_FIELDS = ("run", "state", "host", "failures", "reason", "exit_code", "kill_requested",
               "since", "round", "not_before_ms", "placement_attempts", "unreached_run",
               "placed_round", "health", "backoff", "pinned_host", "volume_host",
               "config_version", "version_failures", "outgoing", "in_place")


def _task_row(t: TaskRecord) -> list[Any]:
    return [t.run, t.state.value, t.host, t.failures, t.reason, t.exit_code,
            t.kill_requested, t.since, t.round, t.not_before_ms, t.placement_attempts,
            t.unreached_run, t.placed_round, t.health, t.backoff.to_dict(), t.pinned_host,
            t.volume_host, t.config_version, t.version_failures,
            None if t.outgoing is None else t.outgoing.to_row(), t.in_place]


def _task(instance: int, row: list[Any]) -> TaskRecord:
    if len(row) != len(TASK_FIELDS):
        raise ValueError(f"task row of {len(row)} fields, expected {len(TASK_FIELDS)}")
    (run, state, host, failures, reason, exit_code, kill_requested, since, round_,
     not_before_ms, attempts, unreached, placed_round, health, backoff, pinned,
     volume_host, config_version, version_failures, outgoing, in_place) = row
    return TaskRecord(
        instance, int(run), task_state(state), None if host is None else str(host),
        int(failures), str(reason), None if exit_code is None else int(exit_code),
        bool(kill_requested), int(since), int(round_),
        None if not_before_ms is None else int(not_before_ms), int(attempts), int(unreached),
        int(placed_round), str(health), RestartBackoff.from_dict(_mapping(backoff, "backoff")),
        None if pinned is None else str(pinned),
        None if volume_host is None else str(volume_host), int(config_version),
        int(version_failures), Outgoing.from_row(outgoing), bool(in_place))


def book_to_data(book: JobBook) -> dict[str, Any]:
    return {
        "jobs": {job_id: {"spec": job.spec.to_body(), "state": job.state.value,
                          "kill_requested": job.kill_requested, "ended_at": job.ended_at,
                          "tasks": [_task_row(t) for t in job.tasks],
                          "versions": {str(v): spec.to_body() for v, spec
                                       in sorted(job.versions.items()) if v > 1}}
                 for job_id, job in sorted(book.jobs.items())},
        "rejected": {job_id: [reasons, book.rejected_at[job_id]]
                     for job_id, reasons in sorted(book.rejected.items())},
        "submitted": {job_id: body for job_id, body in sorted(book.submitted.items())},
        "kill_intents": {job_id: [None if intent is None else sorted(intent),
                                  book.intent_at.get(job_id, 0)]
                         for job_id, intent in sorted(book.kill_intents.items())},
        "pools": None if book.pools is None else sorted(book.pools),
        "leaf_pools": None if book.leaf_pools is None else sorted(book.leaf_pools),
        "forgotten": book.forgotten.to_data(),
        "held_rejections": book.held.to_data(),
        "hosts": book.hosts.to_data(),
        "drain_reasons": dict(sorted(book.drain_reasons.items())),
        "updates": {job_id: [rec.update_id, rec.reason, rec.to_json()]
                    for job_id, rec in sorted(book.updates.items())},
        "update_inbox": {job_id: [[t, b] for t, b in inbox]
                         for job_id, inbox in sorted(book.update_inbox.items())},
        "answered_at": dict(sorted(book.answered_at.items())),
        "start_at": dict(sorted(book.start_at.items())),
        "kill_spared": {j: sorted(v) for j, v in sorted(book.kill_spared.items())},
    }


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"{what}: expected a mapping, got {type(value).__name__}")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{what}: expected a list, got {type(value).__name__}")
    return value


def _names(value: Any, what: str) -> set[str] | None:
    return None if value is None else {str(v) for v in _list(value, what)}


def book_from_data(data: dict[str, Any], retention_ms: int,
                   timeouts: Timeouts | None = None) -> JobBook:
    try:
        return _book_from_data(_mapping(data, "snapshot"), retention_ms, timeouts)
    except AttributeError as exc:  # a field of the wrong type deep inside a spec
        raise TypeError(f"unreadable job manager snapshot: {exc}") from exc


def _book_from_data(data: dict[str, Any], retention_ms: int,
                    timeouts: Timeouts | None) -> JobBook:
    book = JobBook(retention_ms, timeouts)
    for job_id, raw in _mapping(data["jobs"], "jobs").items():
        raw = _mapping(raw, f"jobs.{job_id}")
        spec = JobSpec.from_body(_mapping(raw["spec"], f"jobs.{job_id}.spec"))
        tasks = [_task(i, _list(row, f"jobs.{job_id}.tasks.{i}"))
                 for i, row in enumerate(_list(raw["tasks"], f"jobs.{job_id}.tasks"))]
        daemon = spec.type == JobType.DAEMON  # its instances come and go with hosts
        if spec.job_id != job_id or (len(tasks) != spec.instance_count
                                     and spec.type not in LONG_RUNNING):
            raise ValueError(f"job {job_id}: spec and tasks do not match")
        versions = {1: spec, **{int(v): JobSpec.from_body(_mapping(b, f"jobs.{job_id}.v{v}"))
                                for v, b in _mapping(raw["versions"], "versions").items()}}
        job = JobRecord(job_id, versions[max(versions)], tasks, JobState(raw["state"]),
                        Counter(t.state for t in tasks), bool(raw["kill_requested"]),
                        None if raw["ended_at"] is None else int(raw["ended_at"]), versions)
        book.jobs[job_id] = job
        if daemon:
            book.daemon_jobs.add(job_id)
        if job.ended_at is not None:
            book.ended[job_id] = job.ended_at
        if job.has_controller and tasks[0].state in TERMINAL:
            book.controller_ended.add(job_id)
        for t in tasks:
            if t.state in WATCHED:
                book.watched[(job_id, t.instance)] = None
            if t.state in ON_HOST and t.host:
                book.on_host.setdefault(t.host, {})[(job_id, t.instance)] = None
            if t.outgoing is not None:
                book.outgoing.setdefault(t.outgoing.host, {})[(job_id, t.instance)] = None
    for job_id, (reasons, at) in _mapping(data["rejected"], "rejected").items():
        book.rejected[job_id] = [str(r) for r in _list(reasons, f"rejected.{job_id}")]
        book.rejected_at[job_id] = int(at)
    book.submitted = {str(k): dict(_mapping(v, f"submitted.{k}"))
                      for k, v in _mapping(data["submitted"], "submitted").items()}
    for job_id, (intent, at) in _mapping(data["kill_intents"], "kill_intents").items():
        book.kill_intents[job_id] = (None if intent is None else
                                     {int(i) for i in _list(intent, f"kill_intents.{job_id}")})
        book.intent_at[job_id] = int(at)
    book.pools = _names(data["pools"], "pools")
    book.leaf_pools = _names(data["leaf_pools"], "leaf_pools")
    forgotten = data["forgotten"]
    if not isinstance(forgotten, str):
        raise TypeError("forgotten: expected base64 text")
    book.forgotten = ForgottenIds.from_data(forgotten)
    book.held = HeldRejections.from_data(
        [_list(row, "held_rejections row") for row in
         _list(data["held_rejections"], "held_rejections")])
    book.hosts = HostTable.from_data(_mapping(data["hosts"], "hosts"))
    for job_id, (update_id, reason, record) in _mapping(data["updates"], "updates").items():
        book.updates[job_id] = UpdateRecord.from_event(
            {"job_id": job_id, "update_id": update_id, "reason": reason, "record_json": record})
    book.update_inbox = {str(j): [(str(t), dict(b)) for t, b in _list(v, "update_inbox")]
                         for j, v in _mapping(data["update_inbox"], "update_inbox").items()}
    book.answered_at = {str(j): int(v) for j, v in
                        _mapping(data["answered_at"], "answered_at").items()}
    book.start_at = {str(j): int(v) for j, v in _mapping(data["start_at"], "start_at").items()}
    book.kill_spared = {str(j): {int(i) for i in _list(v, "kill_spared")}
                        for j, v in _mapping(data["kill_spared"], "kill_spared").items()}
    book.drain_reasons = {str(k): str(v) for k, v in
                          _mapping(data["drain_reasons"], "drain_reasons").items()}
    return book
