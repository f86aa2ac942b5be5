"""Preemption: which running or admitted tasks to take back, and why.

Two named stages, both pure; each victim carries a `(reason_code, detail)` pair.

Stage 1, between pools (`plan_pool_preemption`), reason "POOL_OVER_ENTITLEMENT":
- A pool is over when its non-slack allocation exceeds its non-slack entitlement or its
  slack allocation exceeds its slack entitlement in any kind. `PreemptionState` counts
  consecutive over cycles per pool (reset when the pool is not over). When the count
  reaches `sustained_cycles` the pool is processed and its count restarts at 0.
- Victims free the excess: revocable tasks first, measured against the slack excess,
  then non-revocable tasks against the non-slack excess. Within each group: READY before
  PLACING before RUNNING (see `STATE_RANK`), then lowest priority, then most recently
  started (`started_seq` higher = later). A task that frees none of the still-over kinds
  is skipped. Non-preemptible tasks are never chosen. If the pool's preemptible tasks
  hold at least the excess, the victims free at least the excess in every kind.

Stage 2, within a pool (`plan_in_pool_preemption`), reason "HIGHER_PRIORITY_IN_POOL":
- Pending gangs are visited in admission order. A gang that fits the pool's entitlement
  on its own, but not the pool's free entitlement (entitlement - allocation), may take
  back lower-priority preemptible tasks of the same pool and class (revocable or not),
  lowest priority first. Victims are chosen only if they free enough for the gang;
  otherwise nothing is preempted for it. Gangs that fit are counted as if admitted, so
  later gangs see less room.

`plan_preemption` runs stage 1 then stage 2 (stage 2 never reuses stage-1 victims).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from peloton.model.resources import EPSILON, KINDS, Resources
from peloton.model.taskstate import TaskState

from .admission import Gang, PoolAdmissionView, format_shortfall, gang_order

__all__ = [
    "POOL_OVER_ENTITLEMENT",
    "HIGHER_PRIORITY_IN_POOL",
    "STATE_RANK",
    "TaskView",
    "Victim",
    "PreemptionState",
    "PreemptionPlan",
    "plan_pool_preemption",
    "plan_in_pool_preemption",
    "plan_preemption",
]

POOL_OVER_ENTITLEMENT = "POOL_OVER_ENTITLEMENT"
HIGHER_PRIORITY_IN_POOL = "HIGHER_PRIORITY_IN_POOL"

#: Task states that hold allocation, cheapest to take back first. Others are never victims
#: (the resource manager offers only `taskstate.VICTIMS`).
STATE_RANK: Mapping[str, int] = {
    TaskState.READY: 0,
    TaskState.PLACING: 1,
    TaskState.PLACED: 2,
    TaskState.LAUNCHING: 3,
    TaskState.LAUNCHED: 3,
    TaskState.STARTING: 4,
    TaskState.RUNNING: 4,
}


@dataclass(frozen=True, slots=True)
class TaskView:
    """A task that holds allocation in a leaf pool."""

    task_id: str
    pool: str
    state: str
    priority: int
    resources: Resources
    preemptible: bool = True
    revocable: bool = False
    started_seq: int = 0


@dataclass(frozen=True, slots=True)
class Victim:
    task_id: str
    pool: str
    reason: tuple[str, str]


@dataclass(frozen=True, slots=True)
class PreemptionState:
    """Consecutive entitlement cycles each pool has been over its entitlement."""

    over_cycles: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PreemptionPlan:
    victims: list[Victim]
    state: PreemptionState


def plan_pool_preemption(
    pools: Mapping[str, PoolAdmissionView],
    tasks: Iterable[TaskView],
    state: PreemptionState | None = None,
    *,
    sustained_cycles: int = 5,
) -> PreemptionPlan:
    """Stage 1 (see module doc). Pools are processed in path order."""
    previous = (state or PreemptionState()).over_cycles
    by_pool = _tasks_by_pool(tasks)
    counts: dict[str, int] = {}
    victims: list[Victim] = []
    for path in sorted(pools):
        view = pools[path]
        slack_excess = _excess(view.allocation.slack, view.slack_entitlement)
        nonslack_excess = _excess(view.allocation.nonslack, view.nonslack_entitlement)
        if slack_excess.is_zero() and nonslack_excess.is_zero():
            continue
        count = previous.get(path, 0) + 1
        if count < sustained_cycles:
            counts[path] = count
            continue
        candidates = sorted(
            (t for t in by_pool.get(path, ()) if t.preemptible and t.state in STATE_RANK),
            key=_stage1_order,
        )
        for revocable, excess, ent in (
            (True, slack_excess, view.slack_entitlement),
            (False, nonslack_excess, view.nonslack_entitlement),
        ):
            alloc = view.allocation.slack if revocable else view.allocation.nonslack
            detail = (
                f"pool {path} over {'slack ' if revocable else ''}entitlement for "
                f"{count} cycles: {format_shortfall(alloc, ent)}"
            )
            chosen = _cover([t for t in candidates if t.revocable == revocable], excess)
            victims += [Victim(t.task_id, path, (POOL_OVER_ENTITLEMENT, detail)) for t in chosen]
    return PreemptionPlan(victims, PreemptionState(counts))


def plan_in_pool_preemption(
    pools: Mapping[str, PoolAdmissionView],
    queues: Mapping[str, Sequence[Gang]],
    tasks: Iterable[TaskView],
    *,
    exclude: frozenset[str] = frozenset(),
) -> list[Victim]:
    """Stage 2 (see module doc).

    Tasks in `exclude` are already being preempted (e.g. by stage 1): they are never
    chosen again and what they hold counts as freed.
    """
    by_pool = _tasks_by_pool(tasks)
    victims: list[Victim] = []
    for path in sorted(queues):
        view = pools.get(path)
        if view is None:
            continue
        taken = set(exclude)
        going = [t for t in by_pool.get(path, ()) if t.task_id in exclude]
        room = {
            False: view.nonslack_entitlement
            - view.allocation.nonslack
            + _sum(t.resources for t in going if not t.revocable),
            True: view.slack_entitlement
            - view.allocation.slack
            + _sum(t.resources for t in going if t.revocable),
        }
        for gang in sorted(queues[path], key=gang_order):
            if len(gang.task_ids) < gang.min_members or not _other_checks_pass(gang, view):
                continue
            budget = room[gang.revocable]
            ceiling = view.slack_entitlement if gang.revocable else view.nonslack_entitlement
            if gang.resources.fits_in(budget):
                room[gang.revocable] = budget - gang.resources
                continue
            if not gang.resources.fits_in(ceiling):
                continue
            candidates = sorted(
                (
                    t
                    for t in by_pool.get(path, ())
                    if t.preemptible
                    and t.revocable == gang.revocable
                    and t.priority < gang.priority
                    and t.state in STATE_RANK
                    and t.task_id not in taken
                ),
                key=_stage2_order,
            )
            shortfall = _excess(gang.resources, budget)
            chosen = _cover(candidates, shortfall)
            freed = _sum(t.resources for t in chosen)
            if not shortfall.fits_in(freed):
                continue  # cannot make room: preempting would only waste work
            detail = (
                f"for gang {gang.gang_id} (priority {gang.priority}) in {path}: "
                f"needs {format_shortfall(gang.resources, budget)}"
            )
            victims += [Victim(t.task_id, path, (HIGHER_PRIORITY_IN_POOL, detail)) for t in chosen]
            taken.update(t.task_id for t in chosen)
            room[gang.revocable] = budget + freed - gang.resources
    return victims


def plan_preemption(
    pools: Mapping[str, PoolAdmissionView],
    tasks: Sequence[TaskView],
    queues: Mapping[str, Sequence[Gang]],
    state: PreemptionState | None = None,
    *,
    sustained_cycles: int = 5,
    in_pool: bool = True,
) -> PreemptionPlan:
    """Stage 1, then (if `in_pool`) stage 2 on the tasks stage 1 left alone."""
    plan = plan_pool_preemption(pools, tasks, state, sustained_cycles=sustained_cycles)
    if not in_pool:
        return plan
    first = frozenset(v.task_id for v in plan.victims)
    second = plan_in_pool_preemption(pools, queues, tasks, exclude=first)
    return PreemptionPlan(plan.victims + second, plan.state)


# --------------------------------------------------------------------------- helpers


def _stage1_order(t: TaskView) -> tuple[int, int, int, str]:
    return (STATE_RANK[t.state], t.priority, -t.started_seq, t.task_id)


def _stage2_order(t: TaskView) -> tuple[int, int, int, str]:
    return (t.priority, STATE_RANK[t.state], -t.started_seq, t.task_id)


def _cover(ordered: Sequence[TaskView], deficit: Resources) -> list[TaskView]:
    """Take tasks in order, skipping those that free no still-positive kind of `deficit`."""
    chosen: list[TaskView] = []
    remaining = {k: deficit.get(k) for k in KINDS}
    for task in ordered:
        if all(v <= EPSILON for v in remaining.values()):
            break
        helps = [k for k, v in remaining.items() if v > EPSILON and task.resources.get(k) > 0]
        if not helps:
            continue
        chosen.append(task)
        for k in KINDS:
            remaining[k] = max(0.0, remaining[k] - task.resources.get(k))
    return chosen


def _excess(have: Resources, allowed: Resources) -> Resources:
    return (have - allowed).clamp_non_negative()


def _sum(items: Iterable[Resources]) -> Resources:
    total = Resources()
    for r in items:
        total = total + r
    return total


def _tasks_by_pool(tasks: Iterable[TaskView]) -> dict[str, list[TaskView]]:
    out: dict[str, list[TaskView]] = {}
    for t in tasks:
        out.setdefault(t.pool, []).append(t)
    return out


def _other_checks_pass(gang: Gang, view: PoolAdmissionView) -> bool:
    """Reservation and controller checks, which preempting preemptible work cannot fix."""
    alloc = view.allocation
    if not gang.preemptible and not (alloc.non_preemptible + gang.resources).fits_in(
        view.reservation
    ):
        return False
    return not (
        gang.controller
        and view.controller_limit is not None
        and not (alloc.controller + gang.resources).fits_in(view.controller_limit)
    )
