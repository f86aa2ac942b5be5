"""Placement dry-run files: hosts and tasks in (YAML or JSON), a report out.

Format (every field but names optional unless noted)::

    config: {failureDomainKey: zone, gpuHostsExclusive: false}
    hosts:
      - name: host-a                  # required; with count: N -> host-a-0 .. host-a-(N-1)
        count: 1
        capacity: {cpu: 32, memory: 131072, disk: 500000, gpu: 0}   # required
        free: {...}                   # default: capacity
        slack: {...}                  # free revocable resources, default none
        labels: {zone: us-east1, rack: r1}
        ports: ["31000-31999"]        # or [[31000, 31999]]; free dynamic port ranges
        tasks: {"peloton.job_id=web": 1}   # task-label counts of tasks already there
    jobs:                             # expanded into tasks <name>-0 .. <name>-(N-1)
      - name: web                     # required: the job id
        instances: 3                  # (or instanceCount), default 1
        type: SERVICE                 # BATCH (default: PACK) or SERVICE/STATELESS (SPREAD)
        placementStrategy: SPREAD_JOB # PACK_HOST / SPREAD_JOB (Peloton) or PACK / SPREAD
        resources: {cpu: 1, memory: 1024}   # cpu/memory/disk/gpu or Peloton's
                                            # cpuLimit/memLimitMb/diskLimitMb/gpuLimit
        ports: [http]                 # names, or Peloton's [{name: http, value: 0}]
        constraint: {...}             # see peloton.model.constraint
        labels: {tier: web}
        gang: true                    # all instances placed together or not at all
        revocable: false
        priority: 0
    tasks:                            # single tasks, same fields as jobs plus:
      - id: t1                        # required
        job: batch                    # default: the task id
        gang: g1                      # a gang id shared with other tasks
        gangSize: 2                   # default: number of tasks with that gang id

`load_plan` raises `PlanFileError` listing every problem as "path: reason".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from peloton.model.constraint import Constraint, ConstraintError, parse_constraint
from peloton.model.resources import KINDS, Resources
from peloton.placement.domain import (
    HostView,
    PlacementConfig,
    RoundResult,
    Strategy,
    TaskRequest,
)

__all__ = ["PlanFileError", "Plan", "load_plan", "parse_plan", "report"]

_PELOTON_KINDS = {"cpuLimit": "cpu", "memLimitMb": "memory", "diskLimitMb": "disk",
                  "gpuLimit": "gpu"}
_STRATEGIES = {"PACK": Strategy.PACK, "PACK_HOST": Strategy.PACK,
               "SPREAD": Strategy.SPREAD, "SPREAD_JOB": Strategy.SPREAD}
_SPREAD_TYPES = {"SERVICE", "STATELESS", "STATEFUL", "DAEMON"}
_HOST_FIELDS = {"name", "count", "capacity", "free", "slack", "labels", "ports", "tasks"}
_COMMON = {"resources", "resource", "ports", "constraint", "labels", "revocable", "priority",
           "placementStrategy", "strategy", "type"}
_JOB_FIELDS = _COMMON | {"name", "instances", "instanceCount", "gang"}
_TASK_FIELDS = _COMMON | {"id", "job", "gang", "gangSize"}
_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


class PlanFileError(ValueError):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Plan:
    hosts: list[HostView]
    tasks: list[TaskRequest]
    config: PlacementConfig


def load_plan(path: str | Path) -> Plan:
    """Read and parse a plan file; OSError for unreadable files, PlanFileError else."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PlanFileError([f"not valid YAML/JSON: {exc}"]) from None
    return parse_plan(doc)


def parse_plan(doc: Any) -> Plan:
    r = _Reader()
    top = r.mapping(doc, "", {"config", "hosts", "jobs", "tasks"})
    config = _config(r, top.get("config"))
    hosts = [h for i, raw in enumerate(r.items(top.get("hosts"), "hosts"))
             for h in _hosts(r, raw, f"hosts[{i}]")]
    tasks = [t for i, raw in enumerate(r.items(top.get("jobs"), "jobs"))
             for t in _job(r, raw, f"jobs[{i}]")]
    loose = [t for i, raw in enumerate(r.items(top.get("tasks"), "tasks"))
             for t in _task(r, raw, f"tasks[{i}]")]
    tasks += _fill_gang_sizes(loose)
    if not r.problems:
        _check_unique(r, [h.name for h in hosts], "hosts", "host name")
        _check_unique(r, [t.task_id for t in tasks], "tasks", "task id")
    if r.problems:
        raise PlanFileError(r.problems)
    return Plan(hosts, tasks, config)


def report(plan: Plan, result: RoundResult) -> dict[str, Any]:
    """The JSON-ready outcome: placements, unplaced tasks with code and reason, summary."""
    return {
        "placements": [
            {"task": p.task_id, "host": p.host, "ports": dict(p.ports)}
            for p in result.placements
        ],
        "unplaced": [
            {"task": task_id, "code": result.codes[task_id].value, "reason": reason}
            for task_id, reason in sorted(result.unplaced.items())
        ],
        "summary": {
            "hosts": len(plan.hosts),
            "tasks": len(plan.tasks),
            "placed": len(result.placements),
            "unplaced": len(result.unplaced),
            "hosts_used": len({p.host for p in result.placements}),
        },
    }


class _Reader:
    """Collects every problem instead of stopping at the first."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, path: str, reason: str) -> None:
        self.problems.append(f"{path}: {reason}" if path else reason)

    def mapping(self, value: Any, path: str, allowed: set[str]) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.fail(path, f"must be a mapping, got {type(value).__name__}")
            return {}
        for key in sorted(str(k) for k in value if k not in allowed):
            self.fail(f"{path}.{key}" if path else key, "unknown field")
        return value

    def items(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(path, f"must be a list, got {type(value).__name__}")
            return []
        return value

    def text(self, value: Any, path: str, default: str | None = None) -> str | None:
        if value is None:
            if default is None:
                self.fail(path, "is required")
            return default
        if isinstance(value, bool) or not isinstance(value, str | int) or str(value) == "":
            self.fail(path, f"must be a non-empty string, got {value!r}")
            return default
        return str(value)

    def integer(self, value: Any, path: str, default: int, minimum: int) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(path, f"must be an integer >= {minimum}, got {value!r}")
            return default
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if value is None:
            return False
        if not isinstance(value, bool):
            self.fail(path, f"must be true or false, got {value!r}")
            return False
        return value

    def resources(self, value: Any, path: str, required: bool = False) -> Resources | None:
        if value is None:
            if required:
                self.fail(path, "is required")
            return None
        m = self.mapping(value, path, set(KINDS) | set(_PELOTON_KINDS) | {"fdLimit"})
        amounts: dict[str, float] = {}
        for key, raw in m.items():
            if key == "fdLimit" or key not in set(KINDS) | set(_PELOTON_KINDS):
                continue
            kind = _PELOTON_KINDS.get(key, key)
            if isinstance(raw, bool) or not isinstance(raw, int | float) or raw < 0:
                self.fail(f"{path}.{key}", f"must be a non-negative number, got {raw!r}")
                continue
            amounts[kind] = float(raw)
        return Resources.from_mapping(amounts)

    def labels(self, value: Any, path: str) -> dict[str, str]:
        if value is None:
            return {}
        pairs: list[tuple[Any, Any, str]] = []
        if isinstance(value, list):  # Peloton's [{key, value}] form
            for i, item in enumerate(value):
                m = self.mapping(item, f"{path}[{i}]", {"key", "value"})
                pairs.append((m.get("key"), m.get("value", ""), f"{path}[{i}]"))
        elif isinstance(value, Mapping):
            pairs = [(k, v, f"{path}.{k}") for k, v in value.items()]
        else:
            self.fail(path, f"must be a mapping of label keys to values, got {value!r}")
        out: dict[str, str] = {}
        for key, val, sub in pairs:
            if isinstance(key, bool) or not isinstance(key, str | int) or str(key) == "":
                self.fail(sub, f"label key must be a non-empty string, got {key!r}")
            elif isinstance(val, bool) or not isinstance(val, str | int | float):
                self.fail(sub, f"label value must be a string, got {val!r}")
            else:
                out[str(key)] = str(val)
        return out


def _config(r: _Reader, value: Any) -> PlacementConfig:
    m = r.mapping(value, "config", {"failureDomainKey", "gpuHostsExclusive"})
    key = m.get("failureDomainKey", "zone")
    if key is not None and not isinstance(key, str):
        r.fail("config.failureDomainKey", f"must be a label key or null, got {key!r}")
        key = "zone"
    return PlacementConfig(failure_domain_key=key,
                           gpu_hosts_exclusive=r.boolean(m.get("gpuHostsExclusive"),
                                                         "config.gpuHostsExclusive"))


def _hosts(r: _Reader, raw: Any, path: str) -> list[HostView]:
    if not isinstance(raw, Mapping):
        r.fail(path, f"must be a mapping, got {raw!r}")
        return []
    m = r.mapping(raw, path, _HOST_FIELDS)
    name = r.text(m.get("name"), f"{path}.name")
    count = r.integer(m.get("count"), f"{path}.count", 1, 1)
    capacity = r.resources(m.get("capacity"), f"{path}.capacity", required=True)
    free = r.resources(m.get("free"), f"{path}.free")
    slack = r.resources(m.get("slack"), f"{path}.slack") or Resources()
    labels = r.labels(m.get("labels"), f"{path}.labels")
    ports = _ports(r, m.get("ports"), f"{path}.ports")
    counts = _task_counts(r, m.get("tasks"), f"{path}.tasks")
    if name is None or capacity is None:
        return []
    names = [name] if "count" not in m else [f"{name}-{i}" for i in range(count)]
    return [HostView(n, capacity, free if free is not None else capacity, slack, labels,
                     counts, ports) for n in names]


def _ports(r: _Reader, value: Any, path: str) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for i, item in enumerate(r.items(value, path)):
        sub = f"{path}[{i}]"
        pair: tuple[Any, Any] | None = None
        if isinstance(item, str) and (match := _RANGE.match(item)):
            pair = (int(match.group(1)), int(match.group(2)))
        elif isinstance(item, int) and not isinstance(item, bool):
            pair = (item, item)
        elif isinstance(item, list) and len(item) == 2:
            pair = (item[0], item[1])
        ok = pair is not None and all(
            isinstance(x, int) and not isinstance(x, bool) and 0 < x < 65536 for x in pair
        )
        if not ok or pair is None or pair[0] > pair[1]:
            r.fail(sub, f'must be a port range like "31000-31999" or [31000, 31999], '
                        f"got {item!r}")
            continue
        out.append((pair[0], pair[1]))
    return tuple(out)


def _task_counts(r: _Reader, value: Any, path: str) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        r.fail(path, f'must map "key=value" task labels to counts, got {value!r}')
        return {}
    out: dict[str, int] = {}
    for label, count in value.items():
        if not isinstance(label, str) or "=" not in label:
            r.fail(f"{path}.{label}", 'must be a "key=value" task label')
        else:
            out[label] = r.integer(count, f"{path}.{label}", 0, 0)
    return out


@dataclass
class _Common:
    resources: Resources
    ports: tuple[str, ...]
    constraint: Constraint | None
    labels: dict[str, str]
    strategy: Strategy
    revocable: bool
    priority: int


def _common(r: _Reader, m: Mapping[str, Any], path: str) -> _Common:
    res = r.resources(m.get("resources", m.get("resource")), f"{path}.resources") or Resources()
    constraint = None
    if m.get("constraint") is not None:
        try:
            constraint = parse_constraint(m["constraint"], f"{path}.constraint")
        except ConstraintError as exc:
            r.fail(exc.path, exc.reason)
    job_type = str(m.get("type", "BATCH")).upper()
    if job_type not in _SPREAD_TYPES | {"BATCH"}:
        r.fail(f"{path}.type", f"unknown job type {m.get('type')!r} (expected BATCH, "
                               "SERVICE, STATELESS, STATEFUL or DAEMON)")
    default = Strategy.SPREAD if job_type in _SPREAD_TYPES else Strategy.PACK
    strategy = default
    raw = m.get("placementStrategy", m.get("strategy"))
    if raw is not None:
        if str(raw).upper() not in _STRATEGIES:
            r.fail(f"{path}.placementStrategy",
                   f"unknown strategy {raw!r} (expected PACK_HOST, SPREAD_JOB, PACK, SPREAD)")
        else:
            strategy = _STRATEGIES[str(raw).upper()]
    return _Common(
        res, _port_names(r, m.get("ports"), f"{path}.ports"), constraint,
        r.labels(m.get("labels"), f"{path}.labels"), strategy,
        r.boolean(m.get("revocable"), f"{path}.revocable"),
        r.integer(m.get("priority"), f"{path}.priority", 0, -(2**31)),
    )


def _port_names(r: _Reader, value: Any, path: str) -> tuple[str, ...]:
    names: list[str] = []
    for i, item in enumerate(r.items(value, path)):
        if isinstance(item, Mapping):  # Peloton: {name, value: 0, envName}
            m = r.mapping(item, f"{path}[{i}]", {"name", "value", "envName"})
            if m.get("value", 0) not in (0, None):
                r.fail(f"{path}[{i}].value", "only dynamic ports (value 0) are placed here")
            item = m.get("name")
        name = r.text(item, f"{path}[{i}]")
        if name is not None:
            if name in names:
                r.fail(f"{path}[{i}]", f"duplicate port name {name!r}")
            names.append(name)
    return tuple(names)


def _job(r: _Reader, raw: Any, path: str) -> list[TaskRequest]:
    if not isinstance(raw, Mapping):
        r.fail(path, f"must be a mapping, got {raw!r}")
        return []
    m = r.mapping(raw, path, _JOB_FIELDS)
    name = r.text(m.get("name"), f"{path}.name")
    count = r.integer(m.get("instances", m.get("instanceCount")), f"{path}.instances", 1, 1)
    gang = r.boolean(m.get("gang"), f"{path}.gang")
    c = _common(r, m, path)
    if name is None:
        return []
    return [
        TaskRequest(f"{name}-{i}", name, c.resources, c.ports, c.constraint, c.labels,
                    name if gang else None, count if gang else 1, c.strategy, c.revocable,
                    c.priority)
        for i in range(count)
    ]


def _task(r: _Reader, raw: Any, path: str) -> list[TaskRequest]:
    if not isinstance(raw, Mapping):
        r.fail(path, f"must be a mapping, got {raw!r}")
        return []
    m = r.mapping(raw, path, _TASK_FIELDS)
    task_id = r.text(m.get("id"), f"{path}.id")
    job = r.text(m.get("job"), f"{path}.job", task_id or "")
    gang = r.text(m.get("gang"), f"{path}.gang", "") or None
    size = r.integer(m.get("gangSize"), f"{path}.gangSize", 0, 1)
    c = _common(r, m, path)
    if task_id is None:
        return []
    return [TaskRequest(task_id, job or task_id, c.resources, c.ports, c.constraint, c.labels,
                        gang, size, c.strategy, c.revocable, c.priority)]


def _fill_gang_sizes(tasks: list[TaskRequest]) -> list[TaskRequest]:
    """A gang without gangSize needs all its tasks in the file (size 0 = not given)."""
    members: dict[str, int] = {}
    for t in tasks:
        if t.gang_id is not None:
            members[t.gang_id] = members.get(t.gang_id, 0) + 1
    out = []
    for t in tasks:
        size = t.gang_size
        if size == 0:
            size = members[t.gang_id] if t.gang_id is not None else 1
        out.append(TaskRequest(t.task_id, t.job_id, t.resources, t.ports, t.constraint,
                               t.labels, t.gang_id, size, t.strategy, t.revocable,
                               t.priority))
    return out


def _check_unique(r: _Reader, names: list[str], path: str, what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            r.fail(path, f"duplicate {what} {name!r}")
        seen.add(name)
