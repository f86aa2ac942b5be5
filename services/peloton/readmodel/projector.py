"""Events -> read-model rows (pure: no I/O, no clock).

Contract: `project(type, body, source)` returns the rows one event contributes; the same
record always yields the same rows, each carrying its source position (topic, partition,
offset, index within the event), so inserting them again after an at-least-once replay
changes nothing. Unknown event types and events the read model does not show (launch and
kill requests, placements: their effect arrives as TaskStateChanged) yield no rows.

Latest-state tables keep one row per entity *facet* (schema.sql), replaced by `version`.
The version lanes, most significant first, are chosen per facet:
- facts confined to one partition of one topic (a job's job-events and task transitions,
  both keyed by job id) order by offset: exact, whatever the producers' clocks say;
- facts about long-lived names that arrive over several topics or partitions (hosts,
  pools, pending reasons) order by event time first, offset as the tie-break, which also
  survives a dev broker restart (offsets start again at 0, times do not).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["SourcePos", "Row", "COLUMNS", "TABLES", "project", "version"]


@dataclass(frozen=True, slots=True)
class SourcePos:
    """Where a record was read: the idempotency key of everything projected from it."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Row:
    table: str
    values: dict[str, Any]


_SRC: dict[str, Any] = {"src_topic": "", "src_partition": 0, "src_offset": 0, "src_index": 0}
_RES_KINDS = ("reservation", "limit", "entitlement", "slack_entitlement",
              "nonslack_entitlement", "allocation", "demand")

# table -> column -> default; the insertable columns of schema.sql, in its order
COLUMNS: Mapping[str, Mapping[str, Any]] = {
    "jobs": {
        "job_id": "", "facet": "", "version": 0, "at": 0, "name": "", "owner": "",
        "description": "", "type": "", "respool": "", "instance_count": 0, "priority": 0,
        "preemptible": False, "labels": {}, "config_json": "", "state": "",
        "previous_state": "", "task_counts": {}, "reasons": [], "kill_instances": [], **_SRC,
    },
    "tasks": {
        "job_id": "", "instance": 0, "facet": "", "version": 0, "at": 0, "run": 0, "state": "",
        "previous_state": "", "host": None, "reason": "", "exit_code": None, "failures": 0,
        "sandbox": "", **_SRC,
    },
    "task_events": {
        "job_id": "", "instance": 0, "at": 0, "run": 0, "state": "", "previous_state": "",
        "host": None, "reason": "", "exit_code": None, "failures": 0, **_SRC,
    },
    "hosts": {
        "host": "", "facet": "", "version": 0, "at": 0, "incarnation": "", "capacity": {},
        "free": {}, "labels": {}, "log_url": "", "port_range_begin": 0, "port_range_end": 0,
        "simulated": False, "available": False, "generation": 0, "running": 0, "reason": "",
        **_SRC,
    },
    "pools": {
        "pool": "", "version": 0, "at": 0, "cycle": 0, "parent": None, "capacity": {},
        **{k: {} for k in _RES_KINDS}, **_SRC,
    },
    "entitlement_history": {
        "pool": "", "at": 0, "cycle": 0, "parent": None, "capacity": {},
        **{k: {} for k in _RES_KINDS}, **_SRC,
    },
    "dead_letters": {
        "at": 0, "service": "", "source_topic": "", "partition": 0, "offset": 0, "reason": "",
        "key": None, "value_size": 0, "value_b64": "", **_SRC,
    },
    "pool_configs": {
        "pool": "", "version": 0, "at": 0, "deleted": False, "parent": None,
        "config_json": "", "request_id": "", **_SRC,
    },
    "pool_requests": {
        "request_id": "", "version": 0, "at": 0, "path": "", "operation": "", "state": "",
        "reasons": [], **_SRC,
    },
    "preemptions": {
        "job_id": "", "instance": 0, "run": 0, "at": 0, "pool": "", "reason": "",
        "detail": "", **_SRC,
    },
}
TABLES: tuple[str, ...] = tuple(COLUMNS)

_LANE = 1 << 64


def version(*lanes: int) -> int:
    """Pack up to four non-negative 64-bit lanes, most significant first, into a UInt256."""
    if len(lanes) > 4:
        raise ValueError("a version has at most four lanes")
    packed = 0
    for lane in lanes:
        if not 0 <= lane < _LANE:
            raise ValueError(f"version lane {lane} out of range")
        packed = packed * _LANE + lane
    return packed << (64 * (4 - len(lanes)))


def _row(table: str, src: SourcePos, index: int, **values: Any) -> Row:
    defaults = COLUMNS[table]
    unknown = set(values) - set(defaults)
    if unknown:
        raise KeyError(f"{table}: unknown columns {sorted(unknown)}")
    out = dict(defaults)
    out.update(values)
    out.update(src_topic=src.topic, src_partition=src.partition, src_offset=src.offset,
               src_index=index)
    return Row(table, out)


def _nonneg(value: int) -> int:
    return max(0, value)


# ---- jobs ------------------------------------------------------------------------------
def _job_submitted(b: dict[str, Any], src: SourcePos) -> list[Row]:
    jid, at = b["job_id"], b["submitted_at"]
    config = {k: v for k, v in b["default_config"].items() if v is not None}
    spec = dict(name=b["name"], owner=b["owner"], type=b["type"], respool=b["respool"],
                instance_count=_nonneg(b["instance_count"]), priority=b["sla"]["priority"],
                preemptible=b["sla"]["preemptible"], labels=b["labels"],
                config_json=json.dumps({"default_config": config,
                                        "instance_overrides": sorted(b["instance_config"])},
                                       sort_keys=True))
    return [
        _row("jobs", src, 0, job_id=jid, facet="spec", version=version(0, src.offset), at=at,
             **spec),
        _row("jobs", src, 0, job_id=jid, facet="submitted", version=version(src.offset),
             at=at, description=b["description"]),
        # lowest tier: any jobmgr fact about the job replaces "SUBMITTED"
        _row("jobs", src, 0, job_id=jid, facet="state", version=version(0, src.offset),
             at=at, state="SUBMITTED"),
    ]


def _job_created(b: dict[str, Any], src: SourcePos) -> list[Row]:
    jid, at = b["job_id"], b["at"]
    config = {"default_task": b["default_task"], "instance_overrides": sorted(b["instance_tasks"]),
              "gang_size": b["gang_size"], "placement_strategy": b["placement_strategy"]}
    return [
        _row("jobs", src, 0, job_id=jid, facet="spec", version=version(1, src.offset), at=at,
             name=b["name"], owner=b["owner"], type=b["type"], respool=b["respool"],
             instance_count=_nonneg(b["instance_count"]), priority=b["priority"],
             preemptible=b["preemptible"], labels=b["labels"],
             config_json=json.dumps(config, sort_keys=True)),
        _row("jobs", src, 0, job_id=jid, facet="created", version=version(src.offset), at=at),
        _row("jobs", src, 0, job_id=jid, facet="state", version=version(1, src.offset), at=at,
             state="PENDING", previous_state="SUBMITTED"),
    ]


def _job_rejected(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_row("jobs", src, 0, job_id=b["job_id"], facet="state",
                 version=version(1, src.offset), at=b["at"], state="REJECTED",
                 previous_state="SUBMITTED", reasons=list(b["reasons"]))]


def _job_state_changed(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_row("jobs", src, 0, job_id=b["job_id"], facet="state",
                 version=version(1, src.offset), at=b["at"], state=b["state"],
                 previous_state=b["previous_state"],
                 task_counts={k: _nonneg(v) for k, v in b["task_counts"].items()})]


def _job_kill_requested(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_row("jobs", src, 0, job_id=b["job_id"], facet="kill",
                 version=version(b["at"], src.offset), at=b["at"],
                 kill_instances=list(b["instances"]), reasons=[b["reason"]] if b["reason"] else [])]


# ---- tasks -----------------------------------------------------------------------------
def _task_state_changed(b: dict[str, Any], src: SourcePos) -> list[Row]:
    rows: list[Row] = []
    for i, ch in enumerate(b["changes"]):
        common = dict(job_id=b["job_id"], instance=ch["instance"], at=b["at"], run=ch["run"],
                      state=ch["state"], previous_state=ch["previous_state"], host=ch["host"],
                      reason=ch["reason"], exit_code=ch["exit_code"], failures=ch["failures"])
        rows.append(_row("tasks", src, i, facet="state",
                         version=version(ch["run"], src.offset, i), **common))
        rows.append(_row("task_events", src, i, **common))
    return rows


def _pending_reasons(tasks: list[dict[str, Any]], at: int, src: SourcePos,
                     reason: Callable[[dict[str, Any]], str]) -> list[Row]:
    return [_row("tasks", src, i, job_id=t["job_id"], instance=t["instance"], facet="reason",
                 version=version(t["run"], at, src.offset, i), at=at, run=t["run"],
                 reason=reason(t))
            for i, t in enumerate(tasks)]


def _tasks_admitted(b: dict[str, Any], src: SourcePos) -> list[Row]:
    pool = b["pool"]
    return _pending_reasons(b["tasks"], b["at"], src, lambda t: f"admitted to pool {pool}")


def _admission_deferred(b: dict[str, Any], src: SourcePos) -> list[Row]:
    pool = b["pool"]
    return _pending_reasons(b["tasks"], b["at"], src,
                            lambda t: f"waiting for admission to pool {pool}: {t['reason']}")


def _placement_failed(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return _pending_reasons(b["tasks"], b["at"], src,
                            lambda t: f"waiting for placement: {t['reason']}")


def _task_status_reported(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_row("tasks", src, i, job_id=s["job_id"], instance=s["instance"], facet="status",
                 version=version(s["run"], b["at"], src.offset, i), at=b["at"], run=s["run"],
                 state=s["state"], host=b["host"], reason=s["message"],
                 exit_code=s["exit_code"], sandbox=s["sandbox"])
            for i, s in enumerate(b["statuses"])]


# ---- hosts -----------------------------------------------------------------------------
def _host_registered(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_row("hosts", src, 0, host=b["host"], facet="registration",
                 version=version(b["at"], src.offset), at=b["at"], incarnation=b["incarnation"],
                 capacity=b["capacity"], labels=b["labels"], log_url=b["log_url"],
                 port_range_begin=b["port_range_begin"], port_range_end=b["port_range_end"],
                 simulated=b["simulated"])]


def _host_status_reported(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_row("hosts", src, 0, host=b["host"], facet="heartbeat",
                 version=version(b["at"], src.offset), at=b["at"], incarnation=b["incarnation"],
                 running=len(b["running"]))]


def _host_lost(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_row("hosts", src, 0, host=b["host"], facet="lost",
                 version=version(b["at"], src.offset), at=b["at"], incarnation=b["incarnation"],
                 reason=b["reason"], running=len(b["runs"]))]


def _offer_received(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_row("hosts", src, i, host=o["host"], facet="offer",
                 version=version(b["at"], _nonneg(o["generation"]), src.offset, i), at=b["at"],
                 incarnation=o["incarnation"], capacity=o["capacity"], free=o["free"],
                 labels=o["labels"], available=o["available"], generation=o["generation"],
                 port_range_begin=o["port_range_begin"], port_range_end=o["port_range_end"])
            for i, o in enumerate(b["offers"])]


# ---- pools, dead letters ---------------------------------------------------------------
def _entitlement_updated(b: dict[str, Any], src: SourcePos) -> list[Row]:
    rows: list[Row] = []
    for i, p in enumerate(b["pools"]):
        values = dict(pool=p["pool"], at=b["at"], cycle=b["cycle"], parent=p["parent"],
                      capacity=b["capacity"], **{k: p[k] for k in _RES_KINDS})
        rows.append(_row("pools", src, i, version=version(b["at"], src.offset), **values))
        rows.append(_row("entitlement_history", src, i, **values))
    return rows


# ---- pool configs, pool requests, preemptions -------------------------------------------
# A pool's config and a request's outcome come from one single-partition topic each, but
# the broker may restart (offsets start again): order by event time, then offset. The
# resmgr's answer to a request outranks the request itself (first lane).
_OPERATIONS = {"ResourcePoolCreateRequested": "CREATE", "ResourcePoolUpdateRequested": "UPDATE",
               "ResourcePoolDeleteRequested": "DELETE", "ResourcePoolCreated": "CREATE",
               "ResourcePoolUpdated": "UPDATE", "ResourcePoolDeleted": "DELETE"}


def _pool_requested(etype: str) -> Callable[[dict[str, Any], SourcePos], list[Row]]:
    def rows(b: dict[str, Any], src: SourcePos) -> list[Row]:
        return [_row("pool_requests", src, 0, request_id=b["request_id"],
                     version=version(0, b["at"], src.offset), at=b["at"], path=b["path"],
                     operation=_OPERATIONS[etype], state="REQUESTED")]
    return rows


def _answered(etype: str, b: dict[str, Any], src: SourcePos, path: str, state: str,
              reasons: list[str], index: int) -> Row:
    operation = b["operation"] if state == "REJECTED" else _OPERATIONS[etype]
    return _row("pool_requests", src, index, request_id=b["request_id"],
                version=version(1, b["at"], src.offset), at=b["at"], path=path,
                operation=operation, state=state, reasons=reasons)


def _pool_config_row(b: dict[str, Any], src: SourcePos, index: int, pool: str,
                     parent: str | None, config: dict[str, Any] | None) -> Row:
    return _row("pool_configs", src, index, pool=pool,
                version=version(b["at"], src.offset, index), at=b["at"],
                deleted=config is None, parent=parent, request_id=b["request_id"],
                config_json="" if config is None else json.dumps(config, sort_keys=True))


def _pool_created(b: dict[str, Any], src: SourcePos) -> list[Row]:
    p = b["pool"]
    return [_pool_config_row(b, src, 0, p["path"], p["parent"], p["config"]),
            _answered("ResourcePoolCreated", b, src, p["path"], "ACCEPTED", [], 0)]


def _pool_updated(b: dict[str, Any], src: SourcePos) -> list[Row]:
    rows = [_pool_config_row(b, src, i, path, None, None)
            for i, path in enumerate(b["removed"])]
    rows += [_pool_config_row(b, src, len(rows) + i, p["path"], p["parent"], p["config"])
             for i, p in enumerate(b["pools"])]
    return rows + [_answered("ResourcePoolUpdated", b, src, b["path"], "ACCEPTED", [], 0)]


def _pool_deleted(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_pool_config_row(b, src, 0, b["path"], None, None),
            _answered("ResourcePoolDeleted", b, src, b["path"], "ACCEPTED", [], 0)]


def _pool_rejected(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_answered("ResourcePoolRequestRejected", b, src, b["path"], "REJECTED",
                      list(b["reasons"]), 0)]


def _tasks_preempted(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_row("preemptions", src, i, job_id=t["job_id"], instance=t["instance"],
                 run=t["run"], at=b["at"], pool=b["pool"], reason=t["reason"],
                 detail=t["detail"])
            for i, t in enumerate(b["tasks"])]


def _dead_letter_recorded(b: dict[str, Any], src: SourcePos) -> list[Row]:
    key: bytes | None = b["key"]
    value: bytes = b["value"]
    return [_row("dead_letters", src, 0, at=b["at"], service=b["service"],
                 source_topic=b["source_topic"], partition=_nonneg(b["partition"]),
                 offset=_nonneg(b["offset"]), reason=b["reason"],
                 key=None if key is None else key.decode("utf-8", "replace"),
                 value_size=len(value), value_b64=base64.b64encode(value[:65536]).decode())]


_PROJECTIONS: Mapping[str, Callable[[dict[str, Any], SourcePos], list[Row]]] = {
    "JobSubmitted": _job_submitted,
    "JobCreated": _job_created,
    "JobRejected": _job_rejected,
    "JobStateChanged": _job_state_changed,
    "JobKillRequested": _job_kill_requested,
    "TaskStateChanged": _task_state_changed,
    "TasksAdmitted": _tasks_admitted,
    "AdmissionDeferred": _admission_deferred,
    "PlacementFailed": _placement_failed,
    "TaskStatusReported": _task_status_reported,
    "HostRegistered": _host_registered,
    "HostStatusReported": _host_status_reported,
    "HostLost": _host_lost,
    "OfferReceived": _offer_received,
    "EntitlementUpdated": _entitlement_updated,
    "DeadLetterRecorded": _dead_letter_recorded,
    "ResourcePoolCreateRequested": _pool_requested("ResourcePoolCreateRequested"),
    "ResourcePoolUpdateRequested": _pool_requested("ResourcePoolUpdateRequested"),
    "ResourcePoolDeleteRequested": _pool_requested("ResourcePoolDeleteRequested"),
    "ResourcePoolCreated": _pool_created,
    "ResourcePoolUpdated": _pool_updated,
    "ResourcePoolDeleted": _pool_deleted,
    "ResourcePoolRequestRejected": _pool_rejected,
    "TasksPreempted": _tasks_preempted,
}


def project(etype: str, body: dict[str, Any], source: SourcePos) -> list[Row]:
    """The rows one event contributes (deterministic; [] for events not shown)."""
    fn = _PROJECTIONS.get(etype)
    return fn(body, source) if fn is not None else []
