"""Peloton v0 job files (YAML) -> JobSubmitted event bodies.

Accepts the fields Peloton users already have: name, owner, description, labels (a list of
{key, value} or a map), instanceCount, respoolID / respool (a pool path), sla {priority,
preemptible, revocable, minimumRunningInstances, maximumRunningInstances}, defaultConfig
{resource {cpuLimit, memLimitMb, diskLimitMb, gpuLimit}, command {value, environment},
constraint, restartPolicy {maxFailures}, labels, ports, killGracePeriodSeconds, controller,
revocable, healthCheck (see `model.health`), volume {containerPath, sizeMB}},
sla.maximumUnavailableInstances,
instanceConfig {N: overrides}, placementStrategy, type.

`JobFileError` lists every problem as "field.path: reason"; the job manager validates
the resulting event again (anyone may publish one), with the same field names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from peloton.model.health import HealthCheck, HealthCheckError

__all__ = ["JobFileError", "parse_job_file", "job_document_to_submitted"]


class JobFileError(ValueError):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


_TOP = {
    "name", "owner", "owningTeam", "description", "labels", "instanceCount", "respoolID",
    "respool", "sla", "defaultConfig", "instanceConfig", "placementStrategy", "type",
    "ldapGroups",
}
_SLA = {"priority", "preemptible", "revocable", "minimumRunningInstances",
        "maximumRunningInstances", "maxRunningTime", "maximumUnavailableInstances"}
_TASK = {"name", "resource", "command", "constraint", "restartPolicy", "labels", "ports",
         "killGracePeriodSeconds", "healthCheck", "controller", "revocable", "volume"}
_VOLUME = {"containerPath", "sizeMB"}
_RESOURCE = {"cpuLimit", "memLimitMb", "diskLimitMb", "gpuLimit", "fdLimit"}


class _Reader:
    """Collects problems instead of stopping at the first."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def mapping(self, value: Any, path: str, allowed: set[str]) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problems.append(f"{path or 'job file'}: must be a mapping, "
                                 f"got {type(value).__name__}")
            return {}
        for key in sorted(set(map(str, value)) - allowed):
            where = f"{path}.{key}" if path else key
            self.problems.append(f"{where}: unknown field")
        return value

    def number(self, value: Any, path: str) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.problems.append(f"{path}: must be a number, got {value!r}")
            return None
        return float(value)

    def integer(self, value: Any, path: str) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.problems.append(f"{path}: must be an integer, got {value!r}")
            return None
        return value

    def boolean(self, value: Any, path: str) -> bool | None:
        if value is None:
            return None
        if not isinstance(value, bool):
            self.problems.append(f"{path}: must be true or false, got {value!r}")
            return None
        return value

    def text(self, value: Any, path: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            self.problems.append(f"{path}: must be a string, got {type(value).__name__}")
            return None
        return str(value)

    def labels(self, value: Any, path: str) -> dict[str, str] | None:
        if value is None:
            return None
        if isinstance(value, Mapping):
            return {str(k): str(v) for k, v in value.items()}
        if isinstance(value, list):
            out: dict[str, str] = {}
            for i, item in enumerate(value):
                if not isinstance(item, Mapping) or "key" not in item:
                    self.problems.append(f"{path}[{i}]: must be {{key: ..., value: ...}}")
                    continue
                out[str(item["key"])] = str(item.get("value", ""))
            return out
        self.problems.append(f"{path}: must be a list of {{key, value}} or a mapping")
        return None


def _task_config(r: _Reader, raw: Any, path: str) -> dict[str, Any]:
    cfg = r.mapping(raw, path, _TASK)
    res = r.mapping(cfg.get("resource"), f"{path}.resource", _RESOURCE)
    cmd = cfg.get("command")
    command: str | None = None
    env: dict[str, str] | None = None
    if isinstance(cmd, str):
        command = cmd
    elif cmd is not None:
        c = r.mapping(cmd, f"{path}.command", {"value", "shell", "environment", "arguments"})
        command = r.text(c.get("value"), f"{path}.command.value")
        env_raw = c.get("environment")
        if env_raw is not None:
            variables = env_raw.get("variables") if isinstance(env_raw, Mapping) else env_raw
            if isinstance(variables, list):
                env = {str(v.get("name")): str(v.get("value", "")) for v in variables
                       if isinstance(v, Mapping) and v.get("name")}
            elif isinstance(variables, Mapping):
                env = {str(k): str(v) for k, v in variables.items()}
            else:
                r.problems.append(
                    f"{path}.command.environment: must list {{name, value}} variables")
    constraint = cfg.get("constraint")
    restart = r.mapping(cfg.get("restartPolicy"), f"{path}.restartPolicy", {"maxFailures"})
    ports_raw = cfg.get("ports")
    ports: list[str] | None = None
    if ports_raw is not None and not isinstance(ports_raw, list):
        r.problems.append(f"{path}.ports: must be a list of {{name, envName}}")
    elif ports_raw is not None:
        ports = []
        for i, p in enumerate(ports_raw):
            if not isinstance(p, Mapping) or not p.get("name"):
                r.problems.append(f"{path}.ports[{i}]: must be {{name: ..., envName: ...}}")
                continue
            ports.append(f"{p['name']}:{p.get('envName') or 'PORT_' + str(p['name']).upper()}")
    return {
        "cpu_limit": r.number(res.get("cpuLimit"), f"{path}.resource.cpuLimit"),
        "mem_limit_mb": r.number(res.get("memLimitMb"), f"{path}.resource.memLimitMb"),
        "disk_limit_mb": r.number(res.get("diskLimitMb"), f"{path}.resource.diskLimitMb"),
        "gpu_limit": r.number(res.get("gpuLimit"), f"{path}.resource.gpuLimit"),
        "command": command,
        "env": env,
        "constraint_json": (json.dumps(constraint, sort_keys=True)
                            if constraint is not None else None),
        "max_failures": r.integer(restart.get("maxFailures"), f"{path}.restartPolicy.maxFailures"),
        "labels": r.labels(cfg.get("labels"), f"{path}.labels"),
        "ports": ports,
        "kill_grace_period_s": r.number(cfg.get("killGracePeriodSeconds"),
                                        f"{path}.killGracePeriodSeconds"),
        # None = as defaultConfig (JobSubmitted.v2); the job manager checks where they may be
        "controller": r.boolean(cfg.get("controller"), f"{path}.controller"),
        "revocable": r.boolean(cfg.get("revocable"), f"{path}.revocable"),
        "health_check_json": _health_check(r, cfg.get("healthCheck"), f"{path}.healthCheck"),
        "volume": _volume(r, cfg.get("volume"), f"{path}.volume"),
    }


def _health_check(r: _Reader, raw: Any, path: str) -> str | None:
    """Peloton's healthCheck block, validated here so every problem is reported at once;
    carried as JSON of its normalised form (defaults filled in)."""
    if raw is None:
        return None
    try:
        return json.dumps(HealthCheck.from_body(raw, path).to_body(), sort_keys=True)
    except HealthCheckError as exc:
        r.problems.append(str(exc))
        return None


def _volume(r: _Reader, raw: Any, path: str) -> str | None:
    """Peloton's `volume {containerPath, sizeMB}` (a task with one is STATEFUL); a bare
    string is taken as the container path."""
    if raw is None or isinstance(raw, str):
        return raw or None
    v = r.mapping(raw, path, _VOLUME)
    r.number(v.get("sizeMB"), f"{path}.sizeMB")
    container = r.text(v.get("containerPath"), f"{path}.containerPath")
    if isinstance(raw, Mapping) and not container:
        r.problems.append(f"{path}.containerPath: must name the path the task sees")
    return container


def job_document_to_submitted(doc: Any, job_id: str, now_ms: int) -> dict[str, Any]:
    """Convert a parsed job document to a JobSubmitted body, or raise JobFileError."""
    r = _Reader()
    top = r.mapping(doc, "", _TOP)
    if not isinstance(doc, Mapping):
        raise JobFileError(r.problems or ["job file: must be a mapping"])
    sla = r.mapping(top.get("sla"), "sla", _SLA)
    instance_config: dict[str, Any] = {}
    raw_ic = top.get("instanceConfig")
    if raw_ic is not None:
        if not isinstance(raw_ic, Mapping):
            r.problems.append("instanceConfig: must map instance numbers to overrides")
        else:
            for key, override in raw_ic.items():
                instance_config[str(key)] = _task_config(r, override, f"instanceConfig.{key}")
    name = r.text(top.get("name"), "name")
    instance_count = r.integer(top.get("instanceCount"), "instanceCount")
    body = {
        "job_id": job_id,
        "submitted_at": now_ms,
        "name": name or "",
        "owner": r.text(top.get("owner") or top.get("owningTeam"), "owner") or "",
        "description": r.text(top.get("description"), "description") or "",
        "type": (r.text(top.get("type"), "type") or "BATCH").upper(),
        "labels": r.labels(top.get("labels"), "labels") or {},
        "instance_count": instance_count if instance_count is not None else 0,
        "respool": r.text(top.get("respool") or top.get("respoolID"), "respool") or "/default",
        "sla": {
            "priority": r.integer(sla.get("priority"), "sla.priority") or 0,
            "preemptible": _default(r.boolean(sla.get("preemptible"), "sla.preemptible"), True),
            "revocable": _default(r.boolean(sla.get("revocable"), "sla.revocable"), False),
            "minimum_running_instances": r.integer(
                sla.get("minimumRunningInstances"), "sla.minimumRunningInstances") or 1,
            "maximum_running_instances": r.integer(
                sla.get("maximumRunningInstances"), "sla.maximumRunningInstances") or 0,
            "maximum_unavailable_instances": r.integer(
                sla.get("maximumUnavailableInstances"), "sla.maximumUnavailableInstances"),
        },
        "default_config": _task_config(r, top.get("defaultConfig"), "defaultConfig"),
        "instance_config": instance_config,
        "placement_strategy": r.text(top.get("placementStrategy"), "placementStrategy"),
    }
    if r.problems:
        raise JobFileError(r.problems)
    return body


def _default(value: bool | None, default: bool) -> bool:
    return default if value is None else value


def parse_job_file(text: str, job_id: str, now_ms: int) -> dict[str, Any]:
    """Parse YAML or JSON job text into a JobSubmitted body (raises JobFileError)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise JobFileError([f"not valid YAML: {exc}"]) from exc
    return job_document_to_submitted(doc, job_id, now_ms)
