"""Event bodies for tests, built by helpers named by their shape.

Every helper returns a plain dict matching its schema in schemas/ (test_bus_codec encodes
them all, so a helper that drifts from its schema fails there). Job bodies go through the
real job file parser and validator, so JobCreated bodies look like the ones jobmgr makes:
`job_submitted("j1", instances=3)`, `job_created("j1", instances=3, max_failures=2)`.

Every test folder imports it as `from event_bodies import ...` (pyproject.toml puts
tests/model on pytest's `pythonpath`); it is not a test module itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml

from peloton.jobmgr.domain.validation import validate_submission
from peloton.model.jobfile import parse_job_file

Body = dict[str, Any]

INCARNATION = "inc-1"
PORTS = (31000, 31009)


def _res(cpu: float = 0.0, memory: float = 0.0, disk: float = 0.0, gpu: float = 0.0) -> Body:
    return {"cpu": float(cpu), "memory": float(memory), "disk": float(disk), "gpu": float(gpu)}


# ---------------------------------------------------------------------------- jobs


def job_document(
    instances: int = 3, *, cpu: float = 1.0, mem: float = 64.0, max_failures: int = 0,
    min_running: int = 1, respool: str = "/default", priority: int = 0,
    ports: Sequence[str] = (), grace_s: float | None = None, name: str = "job",
    command: str = "echo hi", instance_cpu: Mapping[int, float] | None = None,
    preemptible: bool = True, revocable: bool = False, constraint: Any = None,
) -> Body:
    """A Peloton v0 job document (what a user writes in YAML), as a dict."""
    default: Body = {
        "resource": {"cpuLimit": cpu, "memLimitMb": mem},
        "command": {"value": command},
        "restartPolicy": {"maxFailures": max_failures},
    }
    if ports:
        default["ports"] = [{"name": p} for p in ports]
    if grace_s is not None:
        default["killGracePeriodSeconds"] = grace_s
    if constraint is not None:
        default["constraint"] = constraint
    doc: Body = {
        "name": name, "owner": "team-test", "instanceCount": instances, "respool": respool,
        "sla": {"priority": priority, "preemptible": preemptible, "revocable": revocable,
                "minimumRunningInstances": min_running},
        "defaultConfig": default,
    }
    if instance_cpu:
        doc["instanceConfig"] = {i: {"resource": {"cpuLimit": c}}
                                 for i, c in instance_cpu.items()}
    return doc


def job_submitted(job_id: str, instances: int = 3, *, at: int = 0, **kw: Any) -> Body:
    """A JobSubmitted body from a job file with `instances` tasks (see job_document)."""
    return parse_job_file(yaml.safe_dump(job_document(instances, **kw)), job_id, at)


def job_created(job_id: str, instances: int = 3, *, at: int = 0, **kw: Any) -> Body:
    """The JobCreated body jobmgr makes for job_submitted(job_id, instances, **kw)."""
    created, problems = validate_submission(job_submitted(job_id, instances, at=at, **kw),
                                            None, None, at)
    assert created is not None, problems
    return created


def job_kill_requested(job_id: str, *instances: int, at: int = 0, reason: str = "",
                       requested_by: str = "tester") -> Body:
    """Kill the whole job (no instances) or just the given instances (JobKillRequested.v2)."""
    return {"job_id": job_id, "at": at, "instances": list(instances), "reason": reason,
            "requested_by": requested_by}


def job_start_requested(job_id: str, *instances: int, at: int = 0,
                        requested_by: str = "tester") -> Body:
    """Start a stopped long-running job (no instances) or some of its instances again."""
    return {"job_id": job_id, "at": at, "instances": list(instances),
            "requested_by": requested_by}


def task_state_changed(
    job_id: str, *changes: tuple[int, str], run: int = 1, previous: str = "PENDING",
    host: str | None = None, at: int = 0,
) -> Body:
    """One change per (instance, state)."""
    return {"job_id": job_id, "at": at, "changes": [
        {"instance": i, "run": run, "state": s, "previous_state": previous, "reason": "",
         "host": host, "exit_code": None, "failures": 0, "not_before_ms": None, "round": -1,
         "pinned_host": None, "config_version": 1}
        for i, s in changes]}


def task_health_changed(job_id: str, *changes: tuple[int, str], run: int = 1,
                        at: int = 0) -> Body:
    """One entry per (instance, health)."""
    return {"job_id": job_id, "at": at, "changes": [
        {"instance": i, "run": run, "health": h, "reason": ""} for i, h in changes]}


def host_drain_progressed(host: str, *waiting: str, at: int = 0) -> Body:
    return {"host": host, "at": at, "reason": f"host {host} is not drained yet: "
            + "; ".join(waiting), "waiting": list(waiting), "moved": ["etl/0: batch"]}


def job_spec_changed(job_id: str, version: int = 2, instances: int = 3,
                     update_id: str = "u1", at: int = 0) -> Body:
    """The JobCreated body of a changed config, with its version (an update's)."""
    return {**job_created(job_id, instances, at=at), "version": version,
            "update_id": update_id}


def job_update_requested(job_id: str, update_id: str = "u1", instances: int = 3,
                         at: int = 0, **settings: Any) -> Body:
    base = {"batch_size": 1, "max_unavailable": None, "max_instance_retries": 0,
            "max_tolerable_instance_failures": 0, "rollback_on_failure": False,
            "start_paused": False, "canary": 0}
    return {"job_id": job_id, "update_id": update_id, "at": at, "requested_by": "tester",
            "config": job_submitted(job_id, instances, at=at), "settings": {**base, **settings},
            "instances": []}


def update_command_requested(job_id: str, command: str = "pause", update_id: str = "u1",
                             at: int = 0) -> Body:
    return {"job_id": job_id, "update_id": update_id, "at": at, "command": command,
            "requested_by": "tester"}


def update_state_changed(job_id: str, state: str = "ROLLING_FORWARD", update_id: str = "u1",
                         at: int = 0) -> Body:
    return {"job_id": job_id, "update_id": update_id, "at": at, "request_at": 0,
            "state": state, "previous_state": "INITIALIZED",
            "reason": "rolling forward to version 2 (3 instance(s)); now: replace instance 0",
            "from_version": 1, "to_version": 2, "done": [], "failed": [], "in_flight": [0],
            "record_json": "{}"}


def job_update_rejected(job_id: str, update_id: str = "u2", at: int = 0) -> Body:
    return {"job_id": job_id, "update_id": update_id, "at": at, "request_at": at,
            "command": "update", "reasons": [f"update: job {job_id} already has update u1"]}


# ---------------------------------------------------------------------------- resmgr


def tasks_admitted(job_id: str, *instances: int, run: int = 1, pool: str = "/default",
                   at: int = 0, pinned_host: str | None = None) -> Body:
    return {"at": at, "pool": pool,
            "tasks": [{"job_id": job_id, "instance": i, "run": run, "pinned_host": pinned_host,
                       "config_version": 1} for i in instances]}


def tasks_preempted(job_id: str, *instances: int, run: int = 1, pool: str = "/default",
                    reason: str = "POOL_OVER_ENTITLEMENT", at: int = 0) -> Body:
    return {"at": at, "pool": pool, "tasks": [
        {"job_id": job_id, "instance": i, "run": run, "reason": reason,
         "detail": "pool /default over entitlement"} for i in instances]}


def entitlement_updated(pools: Mapping[str, str | None], at: int = 0) -> Body:
    """EntitlementUpdated listing `pools` (path -> parent path), all figures zero."""
    zero = _res()
    return {"at": at, "cycle": 1, "capacity": zero, "pools": [
        {"pool": p, "parent": parent, "reservation": zero, "limit": zero, "entitlement": zero,
         "slack_entitlement": zero, "nonslack_entitlement": zero, "allocation": zero,
         "demand": zero} for p, parent in pools.items()]}


# ---------------------------------------------------------------------------- placement


def placement(
    job_id: str, instance: int, host: str, *, run: int = 1, incarnation: str = INCARNATION,
    cpu: float = 1.0, mem: float = 64.0, ports: Mapping[str, int] | None = None,
) -> Body:
    return {"job_id": job_id, "instance": instance, "run": run, "host": host,
            "incarnation": incarnation, "resources": _res(cpu, mem),
            "ports": dict(ports or {}), "config_version": 1}


def placement_made(*placements: Body, round_: int = 1, at: int = 0) -> Body:
    return {"at": at, "round": round_, "placements": list(placements)}


def placement_rejected(job_id: str, instance: int, host: str, *, run: int = 1,
                       reason: str = "stale", at: int = 0, round_: int = 1) -> Body:
    return {"at": at, "rejections": [{"job_id": job_id, "instance": instance, "run": run,
                                      "host": host, "reason": reason, "round": round_}]}


def placement_failed(job_id: str, instance: int, *, run: int = 1, reason: str = "no room",
                     at: int = 0) -> Body:
    return {"at": at, "round": 1, "tasks": [{"job_id": job_id, "instance": instance,
                                             "run": run, "reason": reason}]}


# ---------------------------------------------------------------------------- hosts


def host_registered(
    host: str, *, cpu: float = 4.0, mem: float = 4096.0, disk: float = 10_000.0,
    incarnation: str = INCARNATION, at: int = 0, labels: Mapping[str, str] | None = None,
    ports: tuple[int, int] = PORTS,
) -> Body:
    return {"host": host, "incarnation": incarnation, "at": at,
            "capacity": _res(cpu, mem, disk), "labels": dict(labels or {}),
            "log_url": f"http://{host}:5051", "port_range_begin": ports[0],
            "port_range_end": ports[1], "simulated": True}


def heartbeat(host: str, at: int, *, incarnation: str = INCARNATION,
              running: Iterable[str] = ()) -> Body:
    return {"host": host, "incarnation": incarnation, "at": at, "running": list(running)}


def host_lost(host: str, *, incarnation: str = INCARNATION, reason: str = "gone",
              runs: Iterable[str] = (), at: int = 0) -> Body:
    return {"host": host, "incarnation": incarnation, "at": at, "reason": reason,
            "runs": list(runs)}


def host_maintenance_requested(host: str, command: str = "start_maintenance", *,
                               deadline_ms: int | None = None, requested_by: str = "",
                               at: int = 0) -> Body:
    return {"host": host, "command": command, "deadline_ms": deadline_ms,
            "requested_by": requested_by, "at": at}


def host_state_changed(host: str, state: str = "DRAINING", previous: str = "UP", *,
                       present: bool = True, labels: Mapping[str, str] | None = None,
                       reason: str = "", deadline_ms: int | None = None, request: str = "",
                       at: int = 0) -> Body:
    return {"host": host, "at": at, "state": state, "previous_state": previous,
            "present": present, "labels": dict(labels or {}), "reason": reason,
            "deadline_ms": deadline_ms, "request": request}


def host_maintenance_rejected(host: str, command: str = "complete_maintenance", *,
                              reason: str = "the host is UP: it is not in maintenance",
                              request: str = "", at: int = 0) -> Body:
    return {"host": host, "at": at, "command": command, "reason": reason, "request": request}


def launch(job_id: str, instance: int, *, run: int = 1, cpu: float = 1.0, mem: float = 64.0,
           ports: Mapping[str, int] | None = None, round_: int = 1) -> Body:
    return {"job_id": job_id, "instance": instance, "run": run, "command": "echo hi",
            "env": {}, "resources": _res(cpu, mem), "ports": dict(ports or {}),
            "kill_grace_period_s": 10.0, "round": round_, "health_check_json": None,
            "volume": None, "config_version": 1}


def launch_requested(host: str, *launches: Body, incarnation: str = INCARNATION,
                     at: int = 0) -> Body:
    return {"host": host, "incarnation": incarnation, "at": at, "launches": list(launches)}


def agent_status(
    host: str, job_id: str, instance: int, state: str, *, run: int = 1,
    exit_code: int | None = None, message: str = "", incarnation: str = INCARNATION,
    at: int = 0, health: str = "",
) -> Body:
    """TaskStatusReported with one status."""
    return {"host": host, "incarnation": incarnation, "at": at, "statuses": [
        {"job_id": job_id, "instance": instance, "run": run, "state": state,
         "exit_code": exit_code, "message": message, "sandbox": "", "health": health}]}


def offer(
    host: str, *, cpu: float = 4.0, mem: float = 4096.0, free_cpu: float | None = None,
    free_mem: float | None = None, incarnation: str = INCARNATION, generation: int = 1,
    available: bool = True, used_ports: Iterable[int] = (), ports: tuple[int, int] = PORTS,
    labels: Mapping[str, str] | None = None, slack_cpu: float = 0.0, slack_mem: float = 0.0,
) -> Body:
    """One host's offer (an item of OfferReceived.offers; `slack` since v2, `holds` v3)."""
    return {"host": host, "incarnation": incarnation, "capacity": _res(cpu, mem),
            "free": _res(cpu if free_cpu is None else free_cpu,
                         mem if free_mem is None else free_mem),
            "labels": dict(labels or {}), "generation": generation, "available": available,
            "port_range_begin": ports[0], "port_range_end": ports[1],
            "used_ports": sorted(used_ports), "task_label_counts": {},
            "slack": _res(slack_cpu, slack_mem), "holds": []}


def offer_received(*offers: Body, at: int = 0) -> Body:
    return {"at": at, "offers": list(offers)}


def task_kill_requested(host: str, job_id: str, instance: int, *, run: int = 1,
                        grace_s: float = 10.0, at: int = 0) -> Body:
    return {"host": host, "at": at, "kills": [{"job_id": job_id, "instance": instance,
                                               "run": run, "grace_period_s": grace_s,
                                               "reason": "kill requested"}]}


def task_reconcile_requested(host: str, *runs: tuple[str, int, int], at: int = 0) -> Body:
    """The job manager's question to `host`'s agent about runs (job, instance, run)."""
    return {"host": host, "at": at, "runs": [{"job_id": j, "instance": i, "run": r}
                                             for j, i, r in runs]}


def admission_deferred(job_id: str, instance: int, reason: str, *, run: int = 1,
                       pool: str = "/default", at: int = 0) -> Body:
    return {"at": at, "pool": pool, "tasks": [{"job_id": job_id, "instance": instance,
                                               "run": run, "reason": reason}]}


def job_state_changed(job_id: str, state: str, previous: str, counts: Mapping[str, int],
                      at: int = 0) -> Body:
    return {"job_id": job_id, "at": at, "state": state, "previous_state": previous,
            "task_counts": dict(counts)}


def job_rejected(job_id: str, *reasons: str, name: str = "job", at: int = 0) -> Body:
    return {"job_id": job_id, "at": at, "name": name, "reasons": list(reasons)}


def dead_letter_recorded(reason: str = "garbage", value: bytes = b"\x00") -> Body:
    return {"at": 0, "service": "jobmgr", "source_topic": "job-submitted", "partition": 0,
            "offset": 7, "reason": reason, "key": b"j1", "value": value}
