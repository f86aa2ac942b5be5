"""Validation of JobSubmitted bodies into JobCreated bodies (pure).

Anyone may publish a JobSubmitted record, so the job manager checks every field again and
answers with all the problems it found, each as "field: reason" in the job file's own
field names. Limits follow Peloton's validator (at most 100,000 instances, maxFailures at
most 100, revocable implies preemptible, a controller task only on instance 0).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection
from typing import Any

from peloton.model.constraint import ConstraintError, parse_constraint
from peloton.model.health import HealthCheck, HealthCheckError

__all__ = ["validate_submission", "MAX_INSTANCES", "MAX_FAILURES_CAP", "DEFAULT_GRACE_S"]

MAX_INSTANCES = 100_000
MAX_FAILURES_CAP = 100
DEFAULT_GRACE_S = 10.0
SUPPORTED_TYPES = ("BATCH", "SERVICE", "STATEFUL", "DAEMON")
LONG_RUNNING = ("SERVICE", "STATEFUL", "DAEMON")  # instances run until stopped
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_STRATEGIES = {None: "PACK", "PACK": "PACK", "PACK_HOST": "PACK",
               "SPREAD": "SPREAD", "SPREAD_JOB": "SPREAD"}


def _merge(default: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(default)
    merged.update({k: v for k, v in override.items() if v is not None})
    return merged


def _task_spec(cfg: dict[str, Any], path: str, problems: list[str],
               sla: dict[str, Any]) -> dict[str, Any]:
    cpu = cfg.get("cpu_limit")
    if cpu is None or not math.isfinite(cpu) or cpu <= 0:
        problems.append(f"{path}.resource.cpuLimit: must be > 0 (got {cpu})")
        cpu = 0.0
    for field, name in (("mem_limit_mb", "memLimitMb"), ("disk_limit_mb", "diskLimitMb"),
                        ("gpu_limit", "gpuLimit")):
        value = cfg.get(field)
        if value is not None and (not math.isfinite(value) or value < 0):
            problems.append(f"{path}.resource.{name}: must be >= 0 "
                            f"(got {value})")
            cfg = {**cfg, field: 0.0}
    gpu = cfg.get("gpu_limit") or 0.0
    if gpu != int(gpu):
        problems.append(f"{path}.resource.gpuLimit: must be a whole number of GPUs (got {gpu})")
    command = cfg.get("command")
    if not command or not str(command).strip():
        problems.append(f"{path}.command.value: must not be empty")
    max_failures = cfg.get("max_failures") or 0
    if not 0 <= max_failures <= MAX_FAILURES_CAP:
        problems.append(f"{path}.restartPolicy.maxFailures: must be 0..{MAX_FAILURES_CAP} "
                        f"(got {max_failures})")
    constraint_json = cfg.get("constraint_json")
    if constraint_json is not None:
        try:
            parse_constraint(json.loads(constraint_json))
        except (ConstraintError, json.JSONDecodeError) as exc:
            problems.append(f"{path}.constraint: {exc}")
    grace = cfg.get("kill_grace_period_s")
    if grace is not None and (not math.isfinite(grace) or grace < 0):
        problems.append(f"{path}.killGracePeriodSeconds: must be >= 0 (got {grace})")
    health = _check_health(cfg.get("health_check_json"), path, problems)
    revocable = bool(cfg.get("revocable")) or bool(sla["revocable"])
    if cfg.get("revocable") and not sla["preemptible"]:
        problems.append(f"{path}.revocable: revocable tasks need a preemptible job "
                        "(sla.preemptible)")
    return {
        "resources": {"cpu": cpu, "memory": cfg.get("mem_limit_mb") or 0.0,
                      "disk": cfg.get("disk_limit_mb") or 0.0, "gpu": gpu},
        "command": str(command or ""),
        "env": dict(cfg.get("env") or {}),
        "constraint_json": constraint_json,
        "max_failures": max_failures,
        "labels": dict(cfg.get("labels") or {}),
        "ports": list(cfg.get("ports") or []),
        "kill_grace_period_s": DEFAULT_GRACE_S if grace is None else grace,
        "controller": bool(cfg.get("controller")),
        "revocable": revocable,
        "health_check_json": health,
        "volume": cfg.get("volume") or None,
    }


def _check_health(raw: str | None, path: str, problems: list[str]) -> str | None:
    """The healthCheck JSON a job file parser produced, checked again (anyone may publish
    a JobSubmitted) and normalised."""
    if raw is None:
        return None
    try:
        check = HealthCheck.from_body(json.loads(raw), f"{path}.healthCheck")
    except (HealthCheckError, json.JSONDecodeError) as exc:
        problems.append(str(exc) if isinstance(exc, HealthCheckError)
                        else f"{path}.healthCheck: not valid JSON")
        return None
    return json.dumps(check.to_body(), sort_keys=True)


def _check_type(sub: dict[str, Any], tasks: list[tuple[str, dict[str, Any]]],
                problems: list[str]) -> str:
    """The job type rules (Peloton's, plus STATEFUL and DAEMON) and the type JobCreated
    carries: a SERVICE whose tasks keep a volume is STATEFUL."""
    kind, n, sla = sub["type"], sub["instance_count"], sub["sla"]
    volumes = [path for path, t in tasks if t["volume"]]
    if kind not in LONG_RUNNING:
        for path, t in tasks:
            if t["health_check_json"]:
                problems.append(f"{path}.healthCheck: only SERVICE, STATEFUL and DAEMON "
                                "tasks take a health check (a batch task's exit is its "
                                "result)")
            if t["volume"]:
                problems.append(f"{path}.volume: only SERVICE and STATEFUL jobs keep a "
                                "volume (use type: STATEFUL)")
        return kind
    if sla["minimum_running_instances"] > 1 or sla["maximum_running_instances"]:
        problems.append("sla.minimumRunningInstances: SERVICE, STATEFUL and DAEMON jobs "
                        "are not gang scheduled and take no running-instance bounds")
    if kind == "DAEMON":
        if n:
            problems.append(f"instanceCount: a DAEMON job runs one instance on every "
                            f"matching host; do not set it (got {n})")
        problems.extend(f"{path}.volume: a DAEMON job keeps no volume" for path in volumes)
        return kind
    if kind == "STATEFUL" and len(volumes) < len(tasks):
        missing = [path for path, t in tasks if not t["volume"]]
        problems.append(f"{missing[0]}.volume: a STATEFUL job needs a volume "
                        "{containerPath: ...} on every task")
    return "STATEFUL" if volumes else kind


def _check_controller(sub: dict[str, Any], n: int, problems: list[str]) -> None:
    """Peloton: only instance 0 may be a controller task (a default of true must be
    turned off for every other instance)."""
    overrides = sub["instance_config"]
    for key in sorted(overrides, key=lambda k: (len(k), k)):
        if key.isdigit() and int(key) > 0 and overrides[key].get("controller"):
            problems.append(f"instanceConfig.{key}.controller: only instance 0 may be a "
                            "controller task")
    if sub["default_config"].get("controller") and n > 1:
        off = sum(1 for k, v in overrides.items()
                  if k.isdigit() and 0 < int(k) < n and v.get("controller") is False)
        if off < n - 1:
            problems.append("defaultConfig.controller: only instance 0 may be a controller "
                            "task (set controller in instanceConfig.0 instead)")


def _check_sla(sub: dict[str, Any], n: int, problems: list[str]) -> int:
    sla = sub["sla"]
    if sla["revocable"] and not sla["preemptible"]:
        problems.append("sla.revocable: revocable jobs must also be preemptible")
    min_running = sla["minimum_running_instances"]
    if not 1 <= min_running <= max(n, 1):
        problems.append(f"sla.minimumRunningInstances: must be 1..instanceCount ({n}), "
                        f"got {min_running}")
    max_running = sla["maximum_running_instances"]
    if max_running and not min_running <= max_running <= n:
        problems.append("sla.maximumRunningInstances: must be 0 (no cap) or between "
                        f"minimumRunningInstances and instanceCount, got {max_running}")
    if sla["priority"] < 0:
        problems.append(f"sla.priority: must be >= 0, got {sla['priority']}")
    return min_running if (min_running > 1 and not sla["revocable"]) else 1


def validate_submission(
    sub: dict[str, Any], known_pools: Collection[str] | None, leaf_pools: Collection[str] | None,
    now_ms: int,
) -> tuple[dict[str, Any] | None, list[str]]:
    """Return (JobCreated body, []) or (None, problems).

    `known_pools`/`leaf_pools`: the pool paths the job manager has seen from the resource
    manager, or None before it has seen any (then the pool is not checked here; the
    resource manager keeps such tasks pending with a reason).
    """
    problems: list[str] = []
    if not _JOB_ID.match(sub["job_id"]):
        problems.append("job_id: 1-128 letters, digits, '.', '_' or '-', starting with a "
                        "letter or digit")
    if not sub["name"].strip():
        problems.append("name: must not be empty")
    if sub["type"] not in SUPPORTED_TYPES:
        problems.append(f"type: must be one of {', '.join(SUPPORTED_TYPES)}, got {sub['type']}")
    n = sub["instance_count"]
    if sub["type"] == "DAEMON":
        pass  # no instanceCount: one instance per matching host (see _check_type)
    elif not 1 <= n <= MAX_INSTANCES:
        problems.append(f"instanceCount: must be 1..{MAX_INSTANCES}, got {n}")
    pool = sub["respool"]
    if known_pools is not None and pool not in known_pools:
        problems.append(f"respool: resource pool {pool} does not exist")
    elif leaf_pools is not None and known_pools is not None and pool not in leaf_pools:
        problems.append(f"respool: {pool} has child pools; jobs go to leaf pools")
    strategy = _STRATEGIES.get(sub.get("placement_strategy"))
    if strategy is None:
        problems.append(f"placementStrategy: must be PACK_HOST or SPREAD_JOB, got "
                        f"{sub.get('placement_strategy')}")
    gang_size = _check_sla(sub, n, problems)
    default_cfg = sub["default_config"]
    _check_controller(sub, n, problems)
    default_task = _task_spec(default_cfg, "defaultConfig", problems, sub["sla"])
    instance_tasks: dict[str, Any] = {}
    for key in sorted(sub["instance_config"], key=lambda k: (len(k), k)):
        if not key.isdigit() or int(key) >= max(n, 0):
            problems.append(f"instanceConfig.{key}: not an instance number in 0..{n - 1}")
            continue
        merged = _merge(default_cfg, sub["instance_config"][key])
        spec = _task_spec(merged, f"instanceConfig.{key}", problems, sub["sla"])
        if spec != default_task:
            instance_tasks[str(int(key))] = spec
    tasks = [("defaultConfig", default_task)] + [
        (f"instanceConfig.{k}", t) for k, t in instance_tasks.items()]
    job_type = _check_type(sub, tasks, problems)
    max_unavailable = sub["sla"].get("maximum_unavailable_instances")
    if max_unavailable is not None and (max_unavailable < 0 or (
            job_type != "DAEMON" and max_unavailable > n)):
        problems.append(f"sla.maximumUnavailableInstances: must be 0..instanceCount ({n}), "
                        f"got {max_unavailable}")
    if problems:
        return None, problems
    sla = sub["sla"]
    return {
        "job_id": sub["job_id"], "at": now_ms, "name": sub["name"], "owner": sub["owner"],
        "type": job_type, "respool": pool, "labels": dict(sub["labels"]),
        "instance_count": n, "priority": sla["priority"], "preemptible": sla["preemptible"],
        "revocable": sla["revocable"], "gang_size": gang_size,
        "placement_strategy": strategy, "default_task": default_task,
        "instance_tasks": instance_tasks, "max_unavailable": max_unavailable,
    }, []


def check_job_document(body: dict[str, Any]) -> dict[str, Any]:
    """Validate a JobSubmitted body before it is published (API, CLI): the same checks the
    job manager makes, except the pool (only the resource manager knows the pool tree).
    Raises JobFileError listing every problem."""
    from peloton.model.jobfile import JobFileError

    _, problems = validate_submission(body, None, None, body["submitted_at"])
    if problems:
        raise JobFileError(problems)
    return body
