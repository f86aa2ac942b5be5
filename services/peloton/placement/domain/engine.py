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
placed task only to emit the `Placement` record. Two refinements, both deterministic:
- big clusters (``partial_scan_from`` hosts or more) filter only a sample of blocks of
  hosts until the strategy has enough (scan.py), falling back to every host when the
  sample turns out short;
- small rounds on small clusters pack runs of simple PACK groups jointly, host by host
  (jointpack.py), which mixes complementary shapes and uses fewer hosts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from peloton.model.constraint import HOSTNAME_LABEL, JOB_LABEL
from peloton.placement.domain.evaluator import host_names, task_labels
from peloton.placement.domain.framework import (
    AssignPlugin,
    Attempt,
    CycleState,
    FilterPlugin,
    PlacementConfig,
    Registry,
    Status,
    TaskGroup,
    Unit,
)
from peloton.placement.domain.grouping import build_units
from peloton.placement.domain.hostindex import FloatArray, HostTable, IntArray
from peloton.placement.domain.jointpack import is_simple, pack_jointly
from peloton.placement.domain.registry import DEFAULT_REGISTRY
from peloton.placement.domain.types import (
    Code,
    HostView,
    RoundResult,
    Strategy,
    TaskRequest,
)

__all__ = ["place", "DEFAULT_CONFIG"]

DEFAULT_CONFIG = PlacementConfig()
_NONE = np.zeros(0, dtype=np.int64)


def place(
    hosts: Sequence[HostView] | HostTable,
    tasks: Sequence[TaskRequest],
    config: PlacementConfig = DEFAULT_CONFIG,
) -> RoundResult:
    """Place one round of tasks on hosts; see the module docstring for the guarantees.

    ``hosts`` may be a prebuilt `HostTable`: `place` never mutates it, so a caller may
    keep one across rounds and `HostTable.update` the rows of the hosts that changed in
    between (the placement service does: rebuilding 10,000 rows costs more than a round).
    """
    table = hosts if isinstance(hosts, HostTable) else HostTable(hosts)
    registry = config.registry or DEFAULT_REGISTRY
    state = CycleState(table, config)
    max_capacity = table.capacity.max(axis=1) if len(table) else np.zeros(4)
    units, invalid = build_units(tasks, max_capacity)
    table.prefetch_task_labels(_task_labels_read(units))
    result = RoundResult()
    for task_id, status in invalid.items():
        _refuse_task(result, task_id, status)
    everyone = np.arange(len(table), dtype=np.int64)
    # small rounds on small clusters: pack simple groups jointly (jointpack.py)
    joint = config.joint_pack_max_tasks if (
        len(tasks) <= config.joint_pack_max_tasks and len(table) < config.partial_scan_from
    ) else 0
    i = 0
    while i < len(units):
        run = _joint_run(units, i, joint)
        if len(run) > 1 and _place_jointly(state, registry, run, everyone, result):
            i += len(run)
            continue
        _place_unit(state, registry, units[i], everyone, result)
        i += 1
    return result


def _joint_run(units: list[Unit], start: int, max_tasks: int) -> list[Unit]:
    """The simple units from ``start`` on, at one priority, within the task budget."""
    run: list[Unit] = []
    tasks = 0
    for unit in units[start:]:
        if not is_simple(unit) or unit.groups[0].priority != units[start].groups[0].priority:
            break
        tasks += unit.task_count
        if tasks > max_tasks:
            return []  # too big to pack jointly: group by group
        run.append(unit)
    return run


def _place_jointly(
    state: CycleState, registry: Registry, run: list[Unit], everyone: IntArray,
    result: RoundResult,
) -> bool:
    """Pack a run of simple groups jointly; False (nothing changed) when some task would
    not fit, so the group-by-group path places what it can and explains the rest."""
    groups = [u.groups[0] for u in run]
    found = []
    for g in groups:
        filters = [p for p in registry.filter if p.applies(state, g)]
        hosts, limits, _ = _filter(state, g, filters, everyone)
        if hosts.size == 0:
            return False
        found.append((hosts, limits))
    cand = np.unique(np.concatenate([h for h, _ in found]))
    allowed = np.zeros((len(groups), cand.size), dtype=np.int64)
    for row, (hosts, limits) in enumerate(found):
        allowed[row, np.searchsorted(cand, hosts)] = limits
    table = state.table
    free = state.free[:, cand]
    inv = table.inv_capacity[:, cand]
    freeness = free[0] * inv[0] + free[1] * inv[1]
    order = np.lexsort((cand, freeness, table.has_gpu[cand]))
    counts = pack_jointly(free, inv, np.stack([g.request for g in groups]), allowed,
                          np.array([g.size for g in groups], dtype=np.int64), order)
    if counts is None:
        return False
    for row, g in enumerate(groups):
        chosen = counts[row].nonzero()[0]
        attempt = _reserve(state, registry, Attempt(g, cand[chosen], counts[row, chosen]))
        result.placements.extend(registry.bind.bind(state, attempt))
        for task_id in g.task_ids[attempt.placed:]:
            _refuse_task(result, task_id, attempt.shortfall)
    return True


def _task_labels_read(units: list[Unit]) -> set[str]:
    """Task labels whose per-host counts the round will (likely) read."""
    out: set[str] = set()
    for unit in units:
        for g in unit.groups:
            if g.strategy is Strategy.SPREAD or g.spread_key is not None:
                out.add(f"{JOB_LABEL}={g.job_id}")
            if g.hard_dynamic is not None:
                out |= task_labels(g.hard_dynamic, g.job_id)
            for p in g.preferences:
                out |= task_labels(p.constraint, g.job_id)
    return out


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


_Stage = tuple[FilterPlugin, int]
"""A filter that ran and how many hosts were left after it."""


def _attempt(
    state: CycleState, registry: Registry, group: TaskGroup, everyone: IntArray
) -> Attempt:
    """Filter, tier, score and assign one group; nothing is reserved yet."""
    if everyone.size == 0:
        return Attempt(group, _NONE, _NONE, Status(Code.UNRESOLVABLE, "no hosts in this round"))
    filters = [plugin for plugin in registry.filter if plugin.applies(state, group)]
    assigner = registry.assign[group.strategy]
    counts = None
    named = _named_hosts(state, group)
    if named is not None:  # a pinned run: its hosts only (the filters leave no other)
        hosts, limits, stages = _filter(state, group, filters, named)
        if hosts.size == 0:
            return Attempt(group, _NONE, _NONE, _no_host(state, group, everyone.size, stages))
        counts = _assign(state, registry, group, hosts, limits)
    elif everyone.size >= state.config.partial_scan_from and not assigner.needs_all_hosts(
            group):
        found = _partial_scan(state, group, filters, assigner)
        if found is not None:
            hosts, limits, stages, complete = found
            counts = _assign(state, registry, group, hosts, limits)
            if not complete and int(counts.sum()) < group.size:
                counts = None  # the sample was not enough after all: look at every host
    if counts is None:  # full scan: also the diagnosis when a partial scan found nothing
        hosts, limits, stages = _filter(state, group, filters, everyone)
        if hosts.size == 0:
            return Attempt(group, _NONE, _NONE, _no_host(state, group, everyone.size, stages))
        counts = _assign(state, registry, group, hosts, limits)
    chosen = counts.nonzero()[0]
    attempt = Attempt(group, hosts[chosen], counts[chosen])
    if attempt.placed < group.size:
        attempt.shortfall = Status(
            Code.UNSCHEDULABLE,
            f"only {attempt.placed} of {group.size} tasks of this shape fit: the "
            f"{hosts.size} host(s) with {_headline(state, group, stages)} have no more room",
        )
    return attempt


def _named_hosts(state: CycleState, group: TaskGroup) -> IntArray | None:
    """The hosts (in table order) a group's hard constraint allows by name, when it names
    some that are in the round, else None. The host-constraint filter keeps no other host,
    so filtering just these gives the same hosts (and, with the host-constraint filter
    first as in the default registry, the same per-filter counts) at a fraction of the
    cost of a scan: a daemon job pins a run to every host."""
    names = None if group.hard_static is None else host_names(group.hard_static)
    if not names:
        return None
    vocab = state.table.label_codes(HOSTNAME_LABEL)[1]
    found = sorted(vocab[n] for n in names if n in vocab)
    return np.array(found, dtype=np.int64) if found else None


def _filter(
    state: CycleState, group: TaskGroup, filters: list[FilterPlugin], hosts: IntArray
) -> tuple[IntArray, IntArray, list[_Stage]]:
    """Run the filters over ``hosts``: survivors, their task limits (at most the group's
    size), per-stage counts."""
    limits: IntArray | None = None
    stages: list[_Stage] = []
    for plugin in filters:
        allowed = plugin.filter(state, group, hosts)
        if allowed is not None:
            keep = allowed > 0
            if not keep.all():
                hosts, allowed = hosts[keep], allowed[keep]
                if limits is not None:
                    limits = limits[keep]
            limits = np.minimum(allowed, group.size if limits is None else limits)
        stages.append((plugin, int(hosts.size)))
        if hosts.size == 0:
            break
    if limits is None:
        limits = np.full(hosts.size, group.size, dtype=np.int64)
    return hosts, limits, stages


def _partial_scan(
    state: CycleState, group: TaskGroup, filters: list[FilterPlugin], assigner: AssignPlugin
) -> tuple[IntArray, IntArray, list[_Stage], bool] | None:
    """Visit blocks (scan.py) until the assigner has enough feasible hosts; None if none
    was found. The flag says whether every eligible block was visited."""
    found: list[tuple[IntArray, IntArray]] = []
    stages: list[_Stage] = []
    hosts, limits = _NONE, _NONE
    complete = True
    steps = state.blocks().steps(state.pool(group), group.revocable, group,
                                 assigner.emptiest_first)
    for visit in steps:
        got_hosts, got_limits, stages = _filter(state, group, filters, visit)
        if got_hosts.size:
            found.append((got_hosts, got_limits))
            if len(found) == 1:
                hosts, limits = got_hosts, got_limits
            else:
                hosts = np.concatenate((hosts, got_hosts))
                limits = np.concatenate((limits, got_limits))
            if assigner.enough(state, group, hosts, limits):
                complete = False
                break
    if not found:
        return None
    if len(found) > 1:
        order = np.argsort(hosts, kind="stable")
        hosts, limits = hosts[order], limits[order]
    return hosts, limits, [(plugin, int(hosts.size)) for plugin, _ in stages], complete


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
        sel = (tiers == tier).nonzero()[0]
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
    total: FloatArray | None = None
    for plugin, weight in registry.score:
        score = plugin.score(state, group, hosts)
        if score is not None:
            weighted = score if weight == 1.0 else weight * score
            total = weighted if total is None else total + weighted
    return np.zeros(hosts.size, dtype=np.float64) if total is None else total


def _reserve(state: CycleState, registry: Registry, attempt: Attempt) -> Attempt:
    if attempt.placed == 0:
        return attempt
    for done, plugin in enumerate(registry.reserve):
        status = plugin.reserve(state, attempt.group, attempt.hosts, attempt.counts)
        if not status.ok:
            _unreserve(state, registry, attempt, done)
            return Attempt(attempt.group, _NONE, _NONE, status)
    state.resources_changed(attempt.group, attempt.hosts)
    return attempt


def _unreserve(state: CycleState, registry: Registry, attempt: Attempt, done: int) -> None:
    """Undo the first ``done`` reserve plugins for ``attempt``, last first."""
    if attempt.placed == 0:
        return
    for plugin in reversed(registry.reserve[:done]):
        plugin.unreserve(state, attempt.group, attempt.hosts, attempt.counts)
    state.resources_changed(attempt.group, attempt.hosts, grew=True)


def _no_host(state: CycleState, group: TaskGroup, total: int, stages: list[_Stage]) -> Status:
    detail = "; ".join(f"{plugin.describe(state, group)}: {left}" for plugin, left in stages)
    code = Code.UNRESOLVABLE if stages[-1][0].static else Code.UNSCHEDULABLE
    return Status(
        code, f"no host with {_headline(state, group, stages)} ({total} hosts; {detail})"
    )


def _headline(state: CycleState, group: TaskGroup, stages: list[_Stage]) -> str:
    """The requirements in words; capacity is implied by free resources unless it is
    the requirement that failed."""
    last = len(stages) - 1
    words = [plugin.describe(state, group) for i, (plugin, _) in enumerate(stages)
             if plugin.name != "capacity" or i == last]
    return " and ".join(words) if words else "room for the task"


def _refuse_unit(result: RoundResult, unit: Unit, status: Status) -> None:
    for group in unit.groups:
        for task_id in group.task_ids:
            _refuse_task(result, task_id, status)


def _refuse_task(result: RoundResult, task_id: str, status: Status) -> None:
    result.unplaced[task_id] = status.reason
    result.codes[task_id] = status.code

