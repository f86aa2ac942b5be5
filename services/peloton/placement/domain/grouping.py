"""Tasks -> groups of identical tasks -> units (gangs or single groups), in placement order.

Tasks with the same job, gang, resources, port names, constraint, strategy, revocability,
priority and task labels form one group (Peloton's batch strategy does the same); a
group is filtered and scored once, whatever its size. Groups sharing a gang id form one
unit, placed all together or not at all.

Order (deterministic, independent of input order): higher priority first; gangs before
loose groups (they need room at once); larger tasks before smaller ones (first-fit
decreasing packs better), GPU tasks first of all; then job id and the smallest task id,
which is unique, so the order is total. Within a group tasks are sorted by task id.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from itertools import groupby
from operator import attrgetter, itemgetter

import numpy as np

from peloton.model.constraint import (
    JOB_LABEL,
    AndConstraint,
    ConstraintError,
    HardConstraint,
    PreferConstraint,
    SpreadConstraint,
    split_constraint,
)
from peloton.placement.domain.evaluator import hard_parts, is_static
from peloton.placement.domain.framework import Status, TaskGroup, Unit
from peloton.placement.domain.hostindex import FloatArray
from peloton.placement.domain.types import Code, PlacementInputError, Strategy, TaskRequest

__all__ = ["build_units"]

_Key = tuple[Hashable, ...]
_FIELDS = itemgetter(slice(1, None))
"""Everything that makes two tasks identical: all of a `TaskRequest` but its task id."""
_TASK_ID = attrgetter("task_id")


def build_units(
    tasks: Sequence[TaskRequest], max_capacity: FloatArray
) -> tuple[list[Unit], dict[str, Status]]:
    """Units in placement order, and the tasks refused as INVALID with their reason.

    ``max_capacity`` (per kind, over hosts) normalises sizes for the decreasing order.
    Raises PlacementInputError on duplicate task ids.
    """
    buckets: dict[_Key, list[str]] = {}
    firsts: dict[_Key, TaskRequest] = {}
    # Constraints and label maps compare slowly (Python-level __eq__/__hash__) and are
    # usually shared by a job's tasks: number each distinct value once, by object id
    # first (the objects outlive this call, so ids are stable here).
    by_id: dict[int, int] = {}
    by_value: dict[Hashable, int] = {}
    # A job's tasks usually come one after another and share their field objects: runs of
    # tasks whose fields equal (a C-level identity check when they are the same objects)
    # are found by groupby in C, and only each run's first task builds a key.
    for _, run in groupby(tasks, _FIELDS):
        t = next(run)
        c_id = by_id.get(id(t.constraint))
        if c_id is None:
            c_id = by_id[id(t.constraint)] = by_value.setdefault(
                ("c", t.constraint), len(by_value))
        l_id = -1 if not t.labels else by_id.get(id(t.labels))
        if l_id is None:
            l_id = by_id[id(t.labels)] = by_value.setdefault(
                ("l", tuple(sorted(t.labels.items()))), len(by_value))
        r = t.resources
        key: _Key = (
            t.job_id, t.gang_id, t.gang_size, r.cpu, r.memory, r.disk, r.gpu, t.ports,
            c_id, t.strategy, t.revocable, t.priority, l_id,
        )
        ids = buckets.get(key)
        if ids is None:
            ids = buckets[key] = []
            firsts[key] = t
        ids.append(t.task_id)
        ids.extend(map(_TASK_ID, run))  # noqa: B031 (the rest of the run, after next())
    seen = sum(len(v) for v in buckets.values())
    if seen != len(set(map(_TASK_ID, tasks))):
        raise PlacementInputError(f"duplicate task ids: {_duplicates(tasks)}")

    invalid: dict[str, Status] = {}
    groups: list[TaskGroup] = []
    for key, ids in buckets.items():
        ids.sort()
        group_or_reason = _make_group(firsts[key], tuple(ids))
        if isinstance(group_or_reason, str):
            bad = Status(Code.INVALID, group_or_reason)
            invalid.update(dict.fromkeys(ids, bad))
        else:
            groups.append(group_or_reason)
    return _order_units(groups, max_capacity), invalid


def _make_group(t: TaskRequest, ids: tuple[str, ...]) -> TaskGroup | str:
    values = (t.resources.cpu, t.resources.memory, t.resources.disk, t.resources.gpu)
    if not all(math.isfinite(v) and v >= 0 for v in values):
        return f"resources must be finite and non-negative, got {t.resources}"
    if len(set(t.ports)) != len(t.ports) or not all(t.ports):
        return f"port names must be distinct and non-empty, got {list(t.ports)}"
    if t.gang_size < 1:
        return f"gang_size must be at least 1, got {t.gang_size}"
    try:
        strategy = Strategy(t.strategy)
    except ValueError:
        return f"unknown strategy {t.strategy!r} (expected PACK or SPREAD)"
    try:
        hard, soft = split_constraint(t.constraint)
    except ConstraintError as err:
        return f"invalid constraint: {err}"
    static, dynamic = _split_static(hard)
    spread = [s.key for s in soft if isinstance(s, SpreadConstraint)]
    kinds = tuple(k for k, v in enumerate(values) if v > 0)
    labels = {f"{k}={v}" for k, v in t.labels.items() if k != JOB_LABEL}
    labels.add(f"{JOB_LABEL}={t.job_id}")
    return TaskGroup(
        ordinal=0, job_id=t.job_id, task_ids=ids, resources=t.resources,
        request=np.array(values, dtype=np.float64),
        kinds=kinds, kind_index=np.array(kinds, dtype=np.int64),
        kind_request=np.array([[values[k]] for k in kinds], dtype=np.float64).reshape(-1, 1),
        ports=t.ports, strategy=strategy,
        revocable=t.revocable, priority=t.priority,
        gang_id=t.gang_id, gang_size=t.gang_size if t.gang_id is not None else 1,
        hard_static=static, hard_dynamic=dynamic,
        preferences=tuple(s for s in soft if isinstance(s, PreferConstraint)),
        spread_key=spread[-1] if spread else None, labels=frozenset(labels),
    )


def _split_static(
    hard: HardConstraint | None,
) -> tuple[HardConstraint | None, HardConstraint | None]:
    if hard is None:
        return None, None
    parts = hard_parts(hard) if isinstance(hard, AndConstraint) else [hard]
    static = [p for p in parts if is_static(p)]
    dynamic = [p for p in parts if not is_static(p)]
    return _join(static), _join(dynamic)


def _join(parts: list[HardConstraint]) -> HardConstraint | None:
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else AndConstraint(tuple(parts))


def _order_units(groups: list[TaskGroup], max_capacity: FloatArray) -> list[Unit]:
    scale = np.where(max_capacity > 0, max_capacity, 1.0)
    # one vectorised pass for every group's normalised size (the sort keys read it often)
    requests = np.array([g.request for g in groups], dtype=np.float64).reshape(-1, len(scale))
    sizes = (requests / scale).max(axis=1).tolist() if groups else []
    size = {id(g): s for g, s in zip(groups, sizes, strict=True)}
    gpu = {id(g): float(r) for g, r in zip(groups, requests[:, 3].tolist(), strict=True)}

    def group_key(g: TaskGroup) -> tuple[float, float, str, str]:
        return (-gpu[id(g)], -size[id(g)], g.job_id, g.task_ids[0])

    gangs: dict[str, list[TaskGroup]] = {}
    keyed: list[tuple[tuple[int, int, float, float, str, str], Unit]] = []
    for g in groups:
        if g.gang_id is None:
            keyed.append(((-g.priority, 1, -gpu[id(g)], -size[id(g)], g.job_id, g.task_ids[0]),
                          Unit(None, 1, [g])))
        else:
            gangs.setdefault(g.gang_id, []).append(g)
    for gang_id, members in gangs.items():
        members.sort(key=group_key)
        unit = Unit(gang_id, max(m.gang_size for m in members), members)
        keyed.append(((
            -max(m.priority for m in members), 0,
            -max(gpu[id(m)] for m in members), -max(size[id(m)] for m in members),
            members[0].job_id, min(m.task_ids[0] for m in members),
        ), unit))
    keyed.sort(key=itemgetter(0))
    units = [unit for _, unit in keyed]
    ordinal = 0
    for u in units:
        for g in u.groups:
            g.ordinal = ordinal
            ordinal += 1
    return units


def _duplicates(tasks: Sequence[TaskRequest]) -> str:
    seen: set[str] = set()
    dups: set[str] = set()
    for t in tasks:
        (dups if t.task_id in seen else seen).add(t.task_id)
    return ", ".join(sorted(dups)[:5])
