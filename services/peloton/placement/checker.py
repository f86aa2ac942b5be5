"""Independent checker of a placement round: is the result safe and complete?

Deliberately written with plain loops and none of the engine's code (no numpy, nothing
from ``placement.domain`` besides the input/output record types), so that a bug in the
engine's vectorised logic cannot hide itself here. Used by the tests and by
``peloton bench placement``.

Checks, per round:
- every task is placed once or reported unplaced, never both; ids and hosts are known;
- per host, placed non-revocable tasks fit in ``free`` and revocable ones in
  ``slack_free``, kind by kind (within EPSILON);
- ports: each placed task gets exactly its named ports, from the host's free ranges,
  and no port twice on one host;
- hard constraints hold when the placements are replayed in order (task-label counts
  start from the host's counts and grow with each placement);
- gangs: all present tasks of a gang are placed, or none; placed gangs are complete.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from peloton.model.constraint import (
    AndConstraint,
    Constraint,
    HostLabelConstraint,
    LabelConstraint,
    MaxPerHostConstraint,
    OrConstraint,
)
from peloton.model.resources import EPSILON
from peloton.placement.domain.types import HostView, RoundResult, TaskRequest

__all__ = ["Violation", "check_round"]

_KINDS = ("cpu", "memory", "disk", "gpu")


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def check_round(
    hosts: Sequence[HostView], tasks: Sequence[TaskRequest], result: RoundResult
) -> list[Violation]:
    """Every violation found (empty when the round is sound)."""
    host_by_name = {h.name: h for h in hosts}
    task_by_id = {t.task_id: t for t in tasks}
    out: list[Violation] = []
    out += _check_accounting(host_by_name, task_by_id, result)
    out += _check_resources(host_by_name, task_by_id, result)
    out += _check_ports(host_by_name, task_by_id, result)
    out += _check_constraints(host_by_name, task_by_id, result)
    out += _check_gangs(tasks, result)
    return out


def _check_accounting(
    hosts: Mapping[str, HostView], tasks: Mapping[str, TaskRequest], result: RoundResult
) -> list[Violation]:
    out: list[Violation] = []
    placed: set[str] = set()
    for p in result.placements:
        if p.task_id not in tasks:
            out.append(Violation("unknown-task", p.task_id))
        if p.host not in hosts:
            out.append(Violation("unknown-host", f"{p.task_id} on {p.host}"))
        if p.task_id in placed:
            out.append(Violation("placed-twice", p.task_id))
        placed.add(p.task_id)
        if p.task_id in result.unplaced:
            out.append(Violation("placed-and-unplaced", p.task_id))
    for task_id in result.unplaced:
        if task_id not in tasks:
            out.append(Violation("unknown-task", task_id))
    for task_id in tasks:
        if task_id not in placed and task_id not in result.unplaced:
            out.append(Violation("unaccounted", task_id))
    return out


def _check_resources(
    hosts: Mapping[str, HostView], tasks: Mapping[str, TaskRequest], result: RoundResult
) -> list[Violation]:
    used: dict[tuple[str, bool], list[float]] = {}
    for p in result.placements:
        task = tasks.get(p.task_id)
        if task is None or p.host not in hosts:
            continue
        total = used.setdefault((p.host, task.revocable), [0.0, 0.0, 0.0, 0.0])
        for i, kind in enumerate(_KINDS):
            total[i] += getattr(task.resources, kind)
    out: list[Violation] = []
    for (name, revocable), total in sorted(used.items()):
        host = hosts[name]
        budget = host.slack_free if revocable else host.free
        pool = "slack" if revocable else "non-slack"
        for i, kind in enumerate(_KINDS):
            if total[i] > getattr(budget, kind) + EPSILON:
                out.append(Violation(
                    "over-committed",
                    f"{name} {pool} {kind}: {total[i]:g} placed > {getattr(budget, kind):g} free",
                ))
    return out


def _check_ports(
    hosts: Mapping[str, HostView], tasks: Mapping[str, TaskRequest], result: RoundResult
) -> list[Violation]:
    out: list[Violation] = []
    taken: dict[str, set[int]] = {}
    for p in result.placements:
        task = tasks.get(p.task_id)
        host = hosts.get(p.host)
        if task is None or host is None:
            continue
        if sorted(p.ports) != sorted(task.ports):
            out.append(Violation("ports", f"{p.task_id} got ports {sorted(p.ports)}, "
                                          f"asked for {sorted(task.ports)}"))
        used = taken.setdefault(p.host, set())
        for name, port in p.ports.items():
            if not any(lo <= port <= hi for lo, hi in host.ports_free):
                out.append(Violation("ports", f"{p.task_id} {name}={port} not free on {p.host}"))
            if port in used:
                out.append(Violation("ports", f"{p.task_id} {name}={port} reused on {p.host}"))
            used.add(port)
    return out


def _check_constraints(
    hosts: Mapping[str, HostView], tasks: Mapping[str, TaskRequest], result: RoundResult
) -> list[Violation]:
    out: list[Violation] = []
    counts: dict[str, dict[str, int]] = {}
    for p in result.placements:
        task = tasks.get(p.task_id)
        host = hosts.get(p.host)
        if task is None or host is None:
            continue
        on_host = counts.get(p.host)
        if on_host is None:
            on_host = counts[p.host] = dict(host.task_label_counts)
        if task.constraint is not None and not _holds(task.constraint, host, on_host, task):
            out.append(Violation("constraint", f"{p.task_id} on {p.host}: {task.constraint}"))
        for label in _labels_of(task):
            on_host[label] = on_host.get(label, 0) + 1
    return out


def _labels_of(task: TaskRequest) -> list[str]:
    labels = {k: v for k, v in task.labels.items()}
    labels["peloton.job_id"] = task.job_id
    return [f"{k}={v}" for k, v in labels.items()]


def _host_label(host: HostView, key: str) -> str | None:
    if key == "hostname":
        return host.name
    return host.labels.get(key)


def _compare(condition: str, count: int, requirement: int) -> bool:
    if condition == "CONDITION_LESS_THAN":
        return count < requirement
    if condition == "CONDITION_EQUAL":
        return count == requirement
    return count > requirement


def _holds(c: Constraint, host: HostView, counts: Mapping[str, int], task: TaskRequest) -> bool:
    """Hard constraints only; soft ones (spread, prefer) never fail."""
    if isinstance(c, AndConstraint):
        return all(_holds(x, host, counts, task) for x in c.constraints)
    if isinstance(c, OrConstraint):
        return any(_holds(x, host, counts, task) for x in c.constraints)
    if isinstance(c, LabelConstraint):
        if c.kind.value == "HOST":
            count = 1 if _host_label(host, c.key) == c.value else 0
        else:
            count = counts.get(f"{c.key}={c.value}", 0)
        return _compare(c.condition.value, count, c.requirement)
    if isinstance(c, HostLabelConstraint):
        value = _host_label(host, c.key)
        op = c.op.value
        if op == "exists":
            return value is not None
        if op == "notExists":
            return value is None
        if op == "equals":
            return value == c.values[0]
        if op == "in":
            return value in c.values
        return value not in c.values
    if isinstance(c, MaxPerHostConstraint):
        return counts.get(f"peloton.job_id={task.job_id}", 0) < c.count
    return True


def _check_gangs(tasks: Sequence[TaskRequest], result: RoundResult) -> list[Violation]:
    placed = {p.task_id for p in result.placements}
    members: dict[str, list[TaskRequest]] = {}
    for t in tasks:
        if t.gang_id is not None:
            members.setdefault(t.gang_id, []).append(t)
    out: list[Violation] = []
    for gang_id, gang in sorted(members.items()):
        n = sum(1 for t in gang if t.task_id in placed)
        if 0 < n < len(gang):
            out.append(Violation("gang", f"{gang_id}: {n} of {len(gang)} tasks placed"))
        elif n and n < max(t.gang_size for t in gang):
            out.append(Violation("gang", f"{gang_id}: placed with {n} tasks, "
                                         f"gang_size {max(t.gang_size for t in gang)}"))
    return out
