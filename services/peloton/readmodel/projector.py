"""Events -> read-model rows (pure: no I/O, no clock).

Contract: `project(type, body, source)` returns the rows one event contributes; the same
record always yields the same rows, each carrying its source position (topic, partition,
offset, index within the event), so inserting them again after an at-least-once replay
changes nothing. Unknown event types and events the read model does not show (launch and
kill requests, placements: their effect arrives as TaskStateChanged) yield no rows.
History tables (task_events, job_events, host_offers, task_waits, preemptions, ...) get one row per
fact, for Grafana's time series; latest-state tables one row per entity facet.

Latest-state tables keep one row per entity *facet* (schema.sql), replaced by `version`.
The version lanes, most significant first, are chosen per facet:
- facts confined to one partition of one topic (a job's job-events and task transitions,
  both keyed by job id) order by offset: exact, whatever the producers' clocks say;
- facts about long-lived names that arrive over several topics or partitions (hosts,
  pools, pending reasons, updates) order by event time first, offset as the tie-break,
  which also survives a dev broker restart (offsets start again at 0, times do not).
A job's spec is JobCreated's (lane 1) until a JobSpecChanged (lane 2, then its config
version) replaces it; an update's `state` facet is the job manager's newest
UpdateStateChanged (or REJECTED), its `request` facet the user's JobUpdateRequested, its
`first` facet the earliest of them (the update's created_at).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from peloton.model.joinedchanges import explode

__all__ = ["SourcePos", "Row", "COLUMNS", "TABLES", "project", "version", "preemptor"]


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
        "sandbox": "", "config_version": 1, **_SRC,
    },
    "job_events": {
        "job_id": "", "at": 0, "tier": 0, "state": "", "previous_state": "",
        "task_counts": {}, "reasons": [], **_SRC,
    },
    "task_events": {
        "job_id": "", "instance": 0, "at": 0, "run": 0, "state": "", "previous_state": "",
        "host": None, "reason": "", "exit_code": None, "failures": 0, "config_version": 1,
        **_SRC,
    },
    "updates": {
        "job_id": "", "update_id": "", "facet": "", "version": 0, "at": 0, "state": "",
        "previous_state": "", "reason": "", "command": "", "from_version": 0,
        "to_version": 0, "from_instance_count": 0, "to_instance_count": 0, "done": [],
        "failed": [], "in_flight": [], "resume_to": "", "settings_json": "",
        "requested_by": "", **_SRC,
    },
    "hosts": {
        "host": "", "facet": "", "version": 0, "at": 0, "incarnation": "", "capacity": {},
        "free": {}, "labels": {}, "log_url": "", "port_range_begin": 0, "port_range_end": 0,
        "simulated": False, "available": False, "generation": 0, "running": 0, "reason": "",
        **_SRC,
    },
    "host_states": {
        "host": "", "version": 0, "at": 0, "state": "", "previous_state": "",
        "present": False, "labels": {}, "reason": "", "deadline": None, **_SRC,
    },
    "host_events": {
        "host": "", "at": 0, "kind": "", "state": "", "previous_state": "", "present": False,
        "command": "", "reason": "", "deadline": None, **_SRC,
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
        "detail": "", "preemptor": "", **_SRC,
    },
    "host_offers": {
        "host": "", "at": 0, "incarnation": "", "capacity": {}, "free": {},
        "available": False, "generation": 0, **_SRC,
    },
    "task_waits": {
        "job_id": "", "instance": 0, "run": 0, "at": 0, "pool": "", "stage": "",
        "reason": "", **_SRC,
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
        _row("job_events", src, 0, job_id=jid, at=at, tier=0, state="SUBMITTED"),
    ]


def _spec_row(b: dict[str, Any], src: SourcePos, spec_version: int, lanes: int) -> Row:
    """The job's 'spec' facet from a JobCreated or JobSpecChanged body: config_json holds
    all a job file gives (so a restart can rebuild it), and the config `version`."""
    config = {"default_task": b["default_task"], "instance_overrides": sorted(b["instance_tasks"]),
              "instance_tasks": b["instance_tasks"], "gang_size": b["gang_size"],
              "placement_strategy": b["placement_strategy"], "revocable": b["revocable"],
              "max_unavailable": b.get("max_unavailable"), "version": spec_version}
    return _row("jobs", src, 0, job_id=b["job_id"], facet="spec", version=lanes, at=b["at"],
                name=b["name"], owner=b["owner"], type=b["type"], respool=b["respool"],
                instance_count=_nonneg(b["instance_count"]), priority=b["priority"],
                preemptible=b["preemptible"], labels=b["labels"],
                config_json=json.dumps(config, sort_keys=True))


def _job_created(b: dict[str, Any], src: SourcePos) -> list[Row]:
    jid, at = b["job_id"], b["at"]
    return [
        _spec_row(b, src, 1, version(1, src.offset)),
        _row("jobs", src, 0, job_id=jid, facet="created", version=version(src.offset), at=at),
        _row("jobs", src, 0, job_id=jid, facet="state", version=version(1, src.offset), at=at,
             state="PENDING", previous_state="SUBMITTED"),
        _row("job_events", src, 0, job_id=jid, at=at, tier=1, state="PENDING",
             previous_state="SUBMITTED"),
    ]


def _job_spec_changed(b: dict[str, Any], src: SourcePos) -> list[Row]:
    """A later config version replaces the spec: lane 2 outranks JobCreated's lane 1 (also
    rows an older projector wrote), then the config version, then the offset."""
    return [_spec_row(b, src, b["version"], version(2, _nonneg(b["version"]), src.offset))]


def _job_rejected(b: dict[str, Any], src: SourcePos) -> list[Row]:
    fact = dict(job_id=b["job_id"], at=b["at"], state="REJECTED",
                previous_state="SUBMITTED", reasons=list(b["reasons"]))
    return [_row("jobs", src, 0, facet="state", version=version(1, src.offset), **fact),
            _row("job_events", src, 0, tier=1, **fact)]


def _job_state_changed(b: dict[str, Any], src: SourcePos) -> list[Row]:
    fact = dict(job_id=b["job_id"], at=b["at"], state=b["state"],
                previous_state=b["previous_state"],
                task_counts={k: _nonneg(v) for k, v in b["task_counts"].items()})
    return [_row("jobs", src, 0, facet="state", version=version(1, src.offset), **fact),
            _row("job_events", src, 0, tier=1, **fact)]


def _job_kill_requested(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_row("jobs", src, 0, job_id=b["job_id"], facet="kill",
                 version=version(b["at"], src.offset), at=b["at"],
                 kill_instances=list(b["instances"]), reasons=[b["reason"]] if b["reason"] else [])]


# ---- tasks -----------------------------------------------------------------------------
def _task_state_changed(b: dict[str, Any], src: SourcePos) -> list[Row]:
    """Every change of every job the record holds (`model.joinedchanges`: a record may
    join several jobs'), indexed in order across them."""
    rows: list[Row] = []
    changes = ((part, ch) for part in explode("TaskStateChanged", dict(b))
               for ch in part["changes"])
    for i, (part, ch) in enumerate(changes):
        common = dict(job_id=part["job_id"], instance=ch["instance"], at=part["at"],
                      run=ch["run"], state=ch["state"], previous_state=ch["previous_state"],
                      host=ch["host"], reason=ch["reason"], exit_code=ch["exit_code"],
                      failures=ch["failures"], config_version=_nonneg(ch.get("config_version", 1)))
        rows.append(_row("tasks", src, i, facet="state",
                         version=version(ch["run"], src.offset, i), **common))
        rows.append(_row("task_events", src, i, **common))
    return rows


def _task_health_changed(b: dict[str, Any], src: SourcePos) -> list[Row]:
    """A run's health, as a facet of its task (the health sits in `state`)."""
    return [_row("tasks", src, i, job_id=b["job_id"], instance=ch["instance"],
                 facet="health", version=version(ch["run"], src.offset, i), at=b["at"],
                 run=ch["run"], state=ch["health"], reason=ch["reason"])
            for i, ch in enumerate(b["changes"])]


def _pending_reasons(tasks: list[dict[str, Any]], at: int, src: SourcePos,
                     reason: Callable[[dict[str, Any]], str]) -> list[Row]:
    return [_row("tasks", src, i, job_id=t["job_id"], instance=t["instance"], facet="reason",
                 version=version(t["run"], at, src.offset, i), at=at, run=t["run"],
                 reason=reason(t))
            for i, t in enumerate(tasks)]


def _waits(tasks: list[dict[str, Any]], at: int, src: SourcePos, pool: str,
           stage: str) -> list[Row]:
    """The `task_waits` history rows of a batch of wait notes (one per task)."""
    return [_row("task_waits", src, i, job_id=t["job_id"], instance=t["instance"],
                 run=t["run"], at=at, pool=pool, stage=stage, reason=t["reason"])
            for i, t in enumerate(tasks)]


def _tasks_admitted(b: dict[str, Any], src: SourcePos) -> list[Row]:
    pool = b["pool"]
    return _pending_reasons(b["tasks"], b["at"], src, lambda t: f"admitted to pool {pool}")


def _admission_deferred(b: dict[str, Any], src: SourcePos) -> list[Row]:
    pool = b["pool"]
    return (_pending_reasons(b["tasks"], b["at"], src,
                             lambda t: f"waiting for admission to pool {pool}: {t['reason']}")
            + _waits(b["tasks"], b["at"], src, pool, "admission"))


def _placement_failed(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return (_pending_reasons(b["tasks"], b["at"], src,
                             lambda t: f"waiting for placement: {t['reason']}")
            + _waits(b["tasks"], b["at"], src, "", "placement"))


def _task_status_reported(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_row("tasks", src, i, job_id=s["job_id"], instance=s["instance"], facet="status",
                 version=version(s["run"], b["at"], src.offset, i), at=b["at"], run=s["run"],
                 state=s["state"], host=b["host"], reason=s["message"],
                 exit_code=s["exit_code"], sandbox=s["sandbox"])
            for i, s in enumerate(b["statuses"])]


# ---- updates ---------------------------------------------------------------------------
# An update's facts come from two topics (the user's request, the job manager's answers on
# job-events): order by event time, then offset. The job manager's state outranks its
# rejection (lane 1 over 0: a reused update id is refused without ending the update).
_TOP = _LANE - 1
_SETTINGS = {"batchSize": "batch_size", "maxUnavailable": "max_unavailable",
             "maxInstanceRetries": "max_instance_retries",
             "maxTolerableInstanceFailures": "max_tolerable_instance_failures",
             "rollbackOnFailure": "rollback_on_failure", "startPaused": "start_paused",
             "canary": "canary"}


def _first_seen(b: dict[str, Any], src: SourcePos, at: int) -> Row:
    """The earliest fact about an update wins this facet (reversed lanes)."""
    at = min(_nonneg(at), _TOP)
    return _row("updates", src, 0, job_id=b["job_id"], update_id=b["update_id"],
                facet="first", version=version(_TOP - at, _TOP - src.offset), at=at)


def _update_requested(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_row("updates", src, 0, job_id=b["job_id"], update_id=b["update_id"],
                 facet="request", version=version(_nonneg(b["at"]), src.offset), at=b["at"],
                 state="REQUESTED", requested_by=b["requested_by"],
                 to_instance_count=_nonneg(b["config"]["instance_count"]),
                 settings_json=json.dumps(b["settings"], sort_keys=True)),
            _first_seen(b, src, b["at"])]


def _update_state_changed(b: dict[str, Any], src: SourcePos) -> list[Row]:
    try:
        record = json.loads(b["record_json"])["update"]
        counts = (_nonneg(int(record["old_count"])), _nonneg(int(record["new_count"])))
        resume_to = record["status"].get("resume_to") or ""
        settings = {_SETTINGS[k]: v for k, v in record["settings"].items() if k in _SETTINGS}
    except (ValueError, KeyError, TypeError, AttributeError):  # shown without the record
        counts, resume_to, settings = (0, 0), "", {}
    return [_row("updates", src, 0, job_id=b["job_id"], update_id=b["update_id"],
                 facet="state", version=version(1, _nonneg(b["at"]), src.offset), at=b["at"],
                 state=b["state"], previous_state=b["previous_state"], reason=b["reason"],
                 from_version=b["from_version"], to_version=b["to_version"],
                 from_instance_count=counts[0], to_instance_count=counts[1],
                 done=list(b["done"]), failed=list(b["failed"]),
                 in_flight=list(b["in_flight"]), resume_to=resume_to,
                 settings_json=json.dumps(settings, sort_keys=True) if settings else ""),
            _first_seen(b, src, b["at"])]


def _job_update_rejected(b: dict[str, Any], src: SourcePos) -> list[Row]:
    """A refused request ends its update REJECTED; a refused command is kept as the
    update's newest refused command (one naming no update is not shown)."""
    reason = "; ".join(b["reasons"])
    if b["command"] != "update":
        if not b["update_id"]:
            return []
        return [_row("updates", src, 0, job_id=b["job_id"], update_id=b["update_id"],
                     facet="command", version=version(_nonneg(b["at"]), src.offset),
                     at=b["at"], state="REJECTED", command=b["command"], reason=reason)]
    return [_row("updates", src, 0, job_id=b["job_id"], update_id=b["update_id"],
                 facet="state", version=version(0, _nonneg(b["at"]), src.offset), at=b["at"],
                 state="REJECTED", command="update", reason=reason),
            _first_seen(b, src, b["at"])]


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
    rows: list[Row] = []
    for i, o in enumerate(b["offers"]):
        rows.append(_row("hosts", src, i, host=o["host"], facet="offer",
                         version=version(b["at"], _nonneg(o["generation"]), src.offset, i),
                         at=b["at"], incarnation=o["incarnation"], capacity=o["capacity"],
                         free=o["free"], labels=o["labels"], available=o["available"],
                         generation=o["generation"], port_range_begin=o["port_range_begin"],
                         port_range_end=o["port_range_end"]))
        rows.append(_row("host_offers", src, i, host=o["host"], at=b["at"],
                         incarnation=o["incarnation"], capacity=o["capacity"], free=o["free"],
                         available=o["available"], generation=o["generation"]))
    return rows


# host-events is keyed by host, but offsets start again after a dev broker restart: order
# a host's state by event time, then offset (as the other host facets).
def _host_state_changed(b: dict[str, Any], src: SourcePos) -> list[Row]:
    common = dict(host=b["host"], at=b["at"], state=b["state"],
                  previous_state=b["previous_state"], present=b["present"],
                  reason=b["reason"], deadline=b["deadline_ms"])
    return [_row("host_states", src, 0, version=version(b["at"], src.offset),
                 labels=b["labels"], **common),
            _row("host_events", src, 0, kind="STATE_CHANGED", **common)]


def _host_drain_progressed(b: dict[str, Any], src: SourcePos) -> list[Row]:
    moved = "; ".join(b["moved"])
    return [_row("host_events", src, 0, host=b["host"], at=b["at"], kind="DRAIN",
                 reason=f"{b['reason']} (moved: {moved})" if moved else b["reason"])]


def _host_maintenance_rejected(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_row("host_events", src, 0, host=b["host"], at=b["at"], kind="REJECTED",
                 command=b["command"], reason=b["reason"])]


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


# resmgr's HIGHER_PRIORITY_IN_POOL detail: "for gang <gang id> (priority <n>) in <pool>: ..."
_PREEMPTOR = re.compile(r"^for gang (.+) \(priority -?\d+\) in ", re.DOTALL)


def preemptor(detail: str) -> str:
    """Whom a preemption made room for, from the resource manager's detail ('' if none)."""
    m = _PREEMPTOR.match(detail)
    return m.group(1) if m else ""


def _tasks_preempted(b: dict[str, Any], src: SourcePos) -> list[Row]:
    return [_row("preemptions", src, i, job_id=t["job_id"], instance=t["instance"],
                 run=t["run"], at=b["at"], pool=b["pool"], reason=t["reason"],
                 detail=t["detail"], preemptor=preemptor(t["detail"]))
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
    "JobSpecChanged": _job_spec_changed,
    "JobUpdateRequested": _update_requested,
    "UpdateStateChanged": _update_state_changed,
    "JobUpdateRejected": _job_update_rejected,
    "JobRejected": _job_rejected,
    "JobStateChanged": _job_state_changed,
    "JobKillRequested": _job_kill_requested,
    "TaskStateChanged": _task_state_changed,
    "TaskHealthChanged": _task_health_changed,
    "TasksAdmitted": _tasks_admitted,
    "AdmissionDeferred": _admission_deferred,
    "PlacementFailed": _placement_failed,
    "TaskStatusReported": _task_status_reported,
    "HostRegistered": _host_registered,
    "HostStatusReported": _host_status_reported,
    "HostLost": _host_lost,
    "OfferReceived": _offer_received,
    "HostStateChanged": _host_state_changed,
    "HostMaintenanceRejected": _host_maintenance_rejected,
    "HostDrainProgressed": _host_drain_progressed,
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
