"""One placement round: `place(hosts, tasks, config) -> RoundResult`.

Contract:
- Pure: no I/O, clock or randomness; the inputs are not mutated.
- Deterministic: the same hosts and tasks give the same result, whatever their order
  (hosts are sorted by name, tasks grouped and ordered by stable keys, see grouping.py).
- Safe: no host gets more than its ``free`` (non-revocable tasks) or ``slack_free``
  (revocable tasks) in any kind, or more ports than it has free; hard constraints hold
  for every placement, evaluated when it is placed, i.e. replaying ``placements`` in
  order; a gang is placed whole or not at all.
- Complete: every task is either in ``placements`` or in ``unplaced`` (with a reason and
  a `Code`), never both.
- Malformed rounds (duplicate host names or task ids) raise PlacementInputError; a
  malformed task is reported INVALID and the rest of the round goes on.

The cycle (see framework.py) runs once per unit; its cost is a handful of numpy
operations over the candidate hosts per group of identical tasks, plus Python work per
placed task only to emit the `Placement` record.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from peloton.placement.domain.framework import (
    Attempt,
    CycleState,
    PlacementConfig,
    Registry,
    Status,
    TaskGroup,
    Unit,
)
from peloton.placement.domain.grouping import build_units
from peloton.placement.domain.hostindex import FloatArray, HostTable, IntArray
from peloton.placement.domain.registry import DEFAULT_REGISTRY
from peloton.placement.domain.types import Code, HostView, RoundResult, TaskRequest

__all__ = ["place", "DEFAULT_CONFIG"]

DEFAULT_CONFIG = PlacementConfig()
_NONE = np.zeros(0, dtype=np.int64)


def place(
    hosts: Sequence[HostView] | HostTable,
    tasks: Sequence[TaskRequest],
    config: PlacementConfig = DEFAULT_CONFIG,
) -> RoundResult:
    """Place one round of tasks on hosts; see the module docstring for the guarantees.

    ``hosts`` may be a prebuilt `HostTable` (it is read-only, so a caller may reuse one
    table for what-if runs).
    """
    table = hosts if isinstance(hosts, HostTable) else HostTable(hosts)
    registry = config.registry or DEFAULT_REGISTRY
    state = CycleState(table, config)
    max_capacity = table.capacity.max(axis=1) if len(table) else np.zeros(4)
    units, invalid = build_units(tasks, max_capacity)
    result = RoundResult()
    for task_id, status in invalid.items():
        _refuse_task(result, task_id, status)
    everyone = np.arange(len(table), dtype=np.int64)
    for unit in units:
        _place_unit(state, registry, unit, everyone, result)
    return result


def _place_unit(
    state: CycleState, registry: Registry, unit: Unit, everyone: IntArray, result: RoundResult
) -> None:
    for pre in registry.prefilter:
        status = pre.prefilter(state, unit)
        if not status.ok:
            _refuse_unit(result, unit, status)
            return
    attempts = [_reserve(state, registry, _attempt(state, registry, g, everyone))
                for g in unit.groups]
    for permit in registry.permit:
        status = permit.permit(state, unit, attempts)
        if not status.ok:
            for attempt in reversed(attempts):
                _unreserve(state, registry, attempt, len(registry.reserve))
            _refuse_unit(result, unit, status)
            return
    for attempt in attempts:
        result.placements.extend(registry.bind.bind(state, attempt))
        for task_id in attempt.group.task_ids[attempt.placed:]:
            _refuse_task(result, task_id, attempt.shortfall)


def _attempt(
    state: CycleState, registry: Registry, group: TaskGroup, everyone: IntArray
) -> Attempt:
    """Filter, tier, score and assign one group; nothing is reserved yet."""
    if everyone.size == 0:
        return Attempt(group, _NONE, _NONE, Status(Code.UNRESOLVABLE, "no hosts in this round"))
    hosts = everyone
    limits = np.full(hosts.size, group.size, dtype=np.int64)
    stages: list[tuple[str, str, bool, int]] = []
    for plugin in registry.filter:
        requirement = plugin.requirement(state, group)
        if requirement is None:
            continue
        allowed = plugin.filter(state, group, hosts)
        keep = allowed > 0
        if not keep.all():
            hosts, allowed, limits = hosts[keep], allowed[keep], limits[keep]
        limits = np.minimum(limits, allowed)
        stages.append((plugin.name, requirement, plugin.static, int(hosts.size)))
        if hosts.size == 0:
            return Attempt(group, _NONE, _NONE, _no_host(len(everyone), stages))
    counts = _assign(state, registry, group, hosts, limits)
    chosen = np.flatnonzero(counts)
    attempt = Attempt(group, hosts[chosen], counts[chosen])
    if attempt.placed < group.size:
        attempt.shortfall = Status(
            Code.UNSCHEDULABLE,
            f"only {attempt.placed} of {group.size} tasks of this shape fit: the "
            f"{hosts.size} host(s) with {_headline(stages)} have no more room",
        )
    return attempt


def _assign(
    state: CycleState, registry: Registry, group: TaskGroup, hosts: IntArray, limits: IntArray
) -> IntArray:
    scores = _scores(state, registry, group, hosts)
    assigner = registry.assign[group.strategy]
    tiers = _tiers(state, registry, group, hosts)
    if tiers is None:
        return assigner.assign(state, group, hosts, limits, scores, group.size)
    counts = np.zeros(hosts.size, dtype=np.int64)
    remaining = group.size
    for tier in range(int(tiers.max()) + 1):
        sel = np.flatnonzero(tiers == tier)
        if sel.size == 0:
            continue
        got = assigner.assign(state, group, hosts[sel], limits[sel], scores[sel], remaining)
        counts[sel] = got
        remaining -= int(got.sum())
        if remaining == 0:
            break
    return counts


def _tiers(
    state: CycleState, registry: Registry, group: TaskGroup, hosts: IntArray
) -> IntArray | None:
    total: IntArray | None = None
    for plugin in registry.tier:
        tier = plugin.tier(state, group, hosts)
        if tier is not None and tier.any():
            total = tier if total is None else total + tier
    return total


def _scores(
    state: CycleState, registry: Registry, group: TaskGroup, hosts: IntArray
) -> FloatArray:
    total: FloatArray = np.zeros(hosts.size, dtype=np.float64)
    for plugin, weight in registry.score:
        score = plugin.score(state, group, hosts)
        if score is not None:
            total += weight * score
    return total


def _reserve(state: CycleState, registry: Registry, attempt: Attempt) -> Attempt:
    if attempt.placed == 0:
        return attempt
    for done, plugin in enumerate(registry.reserve):
        status = plugin.reserve(state, attempt.group, attempt.hosts, attempt.counts)
        if not status.ok:
            _unreserve(state, registry, attempt, done)
            return Attempt(attempt.group, _NONE, _NONE, status)
    return attempt


def _unreserve(state: CycleState, registry: Registry, attempt: Attempt, done: int) -> None:
    """Undo the first ``done`` reserve plugins for ``attempt``, last first."""
    if attempt.placed == 0:
        return
    for plugin in reversed(registry.reserve[:done]):
        plugin.unreserve(state, attempt.group, attempt.hosts, attempt.counts)


def _no_host(total: int, stages: list[tuple[str, str, bool, int]]) -> Status:
    detail = "; ".join(f"{req}: {left}" for _, req, _, left in stages)
    code = Code.UNRESOLVABLE if stages[-1][2] else Code.UNSCHEDULABLE
    return Status(code, f"no host with {_headline(stages)} ({total} hosts; {detail})")


def _headline(stages: list[tuple[str, str, bool, int]]) -> str:
    """The requirements in words; capacity is implied by free resources unless it is
    the requirement that failed."""
    last = len(stages) - 1
    words = [req for i, (name, req, _, _) in enumerate(stages)
             if name != "capacity" or i == last]
    return " and ".join(words) if words else "room for the task"


def _refuse_unit(result: RoundResult, unit: Unit, status: Status) -> None:
    for group in unit.groups:
        for task_id in group.task_ids:
            _refuse_task(result, task_id, status)


def _refuse_task(result: RoundResult, task_id: str, status: Status) -> None:
    result.unplaced[task_id] = status.reason
    result.codes[task_id] = status.code

