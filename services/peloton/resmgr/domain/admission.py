"""Admission control: which pending gangs of each leaf pool may start now.

Contract of `admit(pools, queues, state)`:
- Per pool (pools in path order), gangs are scanned in priority order: higher priority
  first, then by `seq` (FIFO), then by gang id. The scan is a pure function of its inputs.
- A gang is admitted when all of its checks pass against the pool's allocation *plus what
  this scan already admitted*:
    * entitlement: non-revocable work: nonslack allocation + gang <= nonslack entitlement;
      revocable work: slack allocation + gang <= slack entitlement (all four kinds);
    * non-preemptible work: non-preemptible allocation + gang <= reservation;
    * controller tasks: controller allocation + gang <= controller% x reservation (only
      when the pool sets a controller limit).
  So admitted work never exceeds the entitlement when the allocation did not already.
- A gang with fewer tasks than `min_members` is not admitted ("waiting for N more gang
  members") and does not hold anything up.
- Head-of-line blocking and starvation (our choice, better than Peloton's side queues):
  a gang that does not fit never stops the scan; smaller and other-class work behind it
  is still admitted (backfill). To keep a big gang from starving behind a stream of
  small ones, each blocked gang ages by one per cycle (`AdmissionState.blocked_cycles`).
  Once it has been blocked for `max_skips` cycles it *reserves*: for the rest of the
  scan, gangs behind it that draw on a budget it failed on ("nonslack", "slack",
  "reservation", "controller") are held back, so released resources accumulate for it.
  Other budgets keep flowing (e.g. revocable work past a blocked non-revocable gang). A
  gang that could never fit even in an empty pool (larger than the budget's ceiling,
  e.g. above the whole entitlement) does not reserve, so it cannot block a pool forever.
- Every gang left pending gets one human-readable reason in `pending_reasons`. Its
  figures (`cpu 40/38`: the pool's allocation plus the gang, and the budget) and the
  reserving gang it names change with every admission in the pool; what it says does
  not (`reason_key`): the resource manager republishes a task's reason only when that
  changes, so a deep queue is not re-explained at every admission (cycle.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from peloton.model.quickinit import quick_init
from peloton.model.resources import Resources

from .entitlement import PoolEntitlement
from .pooltree import PoolTree

__all__ = [
    "Gang",
    "PoolAllocation",
    "PoolAdmissionView",
    "AdmissionState",
    "AdmissionResult",
    "admit",
    "admission_views",
    "gang_order",
    "format_shortfall",
    "reason_key",
]

_ZERO = Resources()


@quick_init
@dataclass(frozen=True, slots=True)
class Gang:
    """Tasks that must start together (a task that is not part of a gang is a gang of one).

    `resources` is the gang's total; `min_members` is minimumRunningInstances (0 means
    "as many as task_ids"); `seq` is the caller's arrival sequence number for FIFO order.
    """

    gang_id: str
    task_ids: tuple[str, ...]
    pool: str
    priority: int
    seq: int
    resources: Resources
    preemptible: bool = True
    revocable: bool = False
    controller: bool = False
    min_members: int = 0


@quick_init
@dataclass(frozen=True, slots=True)
class PoolAllocation:
    """What a pool's running/admitted tasks hold, by class.

    nonslack: non-revocable tasks; slack: revocable tasks; non_preemptible and controller
    are subsets of those (used by the reservation and controller checks).
    """

    nonslack: Resources = _ZERO
    slack: Resources = _ZERO
    non_preemptible: Resources = _ZERO
    controller: Resources = _ZERO

    def plus(self, gang: Gang) -> PoolAllocation:
        r = gang.resources
        return PoolAllocation(
            self.nonslack + r if not gang.revocable else self.nonslack,
            self.slack + r if gang.revocable else self.slack,
            self.non_preemptible + r if not gang.preemptible else self.non_preemptible,
            self.controller + r if gang.controller else self.controller,
        )

    @property
    def total(self) -> Resources:
        return self.nonslack + self.slack


@dataclass(frozen=True, slots=True)
class PoolAdmissionView:
    """One leaf pool as admission (and preemption) sees it in a cycle."""

    entitlement: Resources
    slack_entitlement: Resources
    nonslack_entitlement: Resources
    reservation: Resources
    allocation: PoolAllocation = PoolAllocation()
    controller_limit: Resources | None = None


@dataclass(frozen=True, slots=True)
class AdmissionState:
    """Carried from cycle to cycle: how many cycles each still-pending gang was blocked."""

    blocked_cycles: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AdmissionResult:
    admitted: list[Gang]
    pending_reasons: dict[str, str]
    state: AdmissionState
    allocations: dict[str, PoolAllocation]


def gang_order(gang: Gang) -> tuple[int, int, str]:
    """Sort key of a pool's queue: priority (higher first), seq, gang id."""
    return (-gang.priority, gang.seq, gang.gang_id)


@lru_cache(maxsize=4096)
def format_shortfall(need: Resources, have: Resources) -> str:
    """ "cpu 40/38, memory 300/256" for every kind where need exceeds have. Memoized: a
    full pool tells thousands of queued gangs of a few sizes the same shortfall."""
    return ", ".join(f"{k} {_num(need.get(k))}/{_num(have.get(k))}" for k in need.exceeding(have))


_FIGURES = re.compile(r"(?<=[a-z_]) -?[0-9][0-9.e+-]*/-?[0-9][0-9.e+-]*")
_HELD = re.compile(r"^held back: gang .+ has waited too long and reserves the (\w+) budget$")


@lru_cache(maxsize=4096)
def reason_key(reason: str | None) -> str | None:
    """What a pending reason says, without what changes as the pool admits work: the
    figures of each shortfall (`pool over entitlement: cpu 40/38` -> `pool over
    entitlement: cpu`) and the gang that reserves a budget (`held back: nonslack`).
    Memoized: a queue's thousands of reasons are a few texts."""
    if reason is None:
        return None
    held = _HELD.match(reason)
    if held is not None:
        return f"held back: {held[1]}"
    return _FIGURES.sub("", reason)


def admit(
    pools: Mapping[str, PoolAdmissionView],
    queues: Mapping[str, Sequence[Gang]],
    state: AdmissionState | None = None,
    *,
    max_skips: int = 3,
) -> AdmissionResult:
    """Decide admissions for one cycle (see module doc). Pure; does not modify inputs.

    Returns the admitted gangs (pool path order, then queue order), a reason for every
    gang not admitted, the next `AdmissionState`, and each pool's allocation after the
    admissions.
    """
    previous = (state or AdmissionState()).blocked_cycles
    admitted: list[Gang] = []
    reasons: dict[str, str] = {}
    blocked: dict[str, int] = {}
    allocations: dict[str, PoolAllocation] = {}
    for path in sorted(queues):
        view = pools.get(path)
        if view is None:
            for gang in queues[path]:
                reasons[gang.gang_id] = f"unknown pool {path}"
            continue
        alloc = view.allocation
        barrier: dict[str, tuple[str, int]] = {}  # budget -> (gang id, age) reserving it
        for gang in sorted(queues[path], key=gang_order):
            missing = _missing_members(gang)
            if missing:
                reasons[gang.gang_id] = f"waiting for {missing} more gang members"
                continue
            held = [b for b in _budgets(gang) if b in barrier] if barrier else None
            if held:
                if gang.gang_id in previous:  # waiting behind a reservation keeps its age
                    blocked[gang.gang_id] = previous[gang.gang_id]
                # no age in the text: a reason that changes every cycle would be
                # republished every cycle for every task behind the holder
                reasons[gang.gang_id] = _held_back(barrier[held[0]][0], held[0])
                continue
            failures = _check(gang, view, alloc)
            if not failures:
                admitted.append(gang)
                alloc = alloc.plus(gang)
                continue
            reasons[gang.gang_id] = "; ".join(text for _, text in failures)
            age = previous.get(gang.gang_id, 0) + 1
            blocked[gang.gang_id] = age
            if age >= max_skips and _could_ever_fit(gang, view):
                for budget, _ in failures:
                    barrier.setdefault(budget, (gang.gang_id, age))
        allocations[path] = alloc
    return AdmissionResult(admitted, reasons, AdmissionState(blocked), allocations)


def admission_views(
    tree: PoolTree,
    entitlements: Mapping[str, PoolEntitlement],
    allocations: Mapping[str, PoolAllocation],
) -> dict[str, PoolAdmissionView]:
    """A view for every leaf pool, from the tree, this cycle's entitlements and allocations.

    Pools without an entitlement yet get zero entitlement (nothing is admitted there).
    """
    views: dict[str, PoolAdmissionView] = {}
    for path in tree.leaves():
        config = tree.config(path)
        ent = entitlements.get(path)
        views[path] = PoolAdmissionView(
            entitlement=ent.entitlement if ent else _ZERO,
            slack_entitlement=ent.slack_entitlement if ent else _ZERO,
            nonslack_entitlement=ent.nonslack_entitlement if ent else _ZERO,
            reservation=config.reservation,
            allocation=allocations.get(path, PoolAllocation()),
            controller_limit=config.controller_limit(),
        )
    return views


@lru_cache(maxsize=1024)
def _held_back(holder: str, budget: str) -> str:
    """The reason of a gang queued behind `holder`'s reservation of `budget` (one text
    for the thousands of gangs behind it)."""
    return f"held back: gang {holder} has waited too long and reserves the {budget} budget"


def _missing_members(gang: Gang) -> int:
    return max(0, gang.min_members - len(gang.task_ids))


def _budgets(gang: Gang) -> tuple[str, ...]:
    return _BUDGETS[(bool(gang.revocable), bool(gang.preemptible), bool(gang.controller))]


_BUDGETS: dict[tuple[bool, bool, bool], tuple[str, ...]] = {
    (revocable, preemptible, controller): (
        ("slack" if revocable else "nonslack",)
        + (() if preemptible else ("reservation",)) + (("controller",) if controller else ()))
    for revocable in (False, True) for preemptible in (False, True)
    for controller in (False, True)}


def _check(gang: Gang, view: PoolAdmissionView, alloc: PoolAllocation) -> list[tuple[str, str]]:
    """(budget, reason) for every check the gang fails; [] when it may be admitted."""
    r = gang.resources
    failures: list[tuple[str, str]] = []
    if gang.revocable:
        need = alloc.slack + r
        if not need.fits_in(view.slack_entitlement):
            failures.append(
                (
                    "slack",
                    "pool over slack entitlement: "
                    + format_shortfall(need, view.slack_entitlement),
                )
            )
    else:
        need = alloc.nonslack + r
        if not need.fits_in(view.nonslack_entitlement):
            failures.append(
                (
                    "nonslack",
                    "pool over entitlement: " + format_shortfall(need, view.nonslack_entitlement),
                )
            )
    if not gang.preemptible:
        need = alloc.non_preemptible + r
        if not need.fits_in(view.reservation):
            failures.append(
                (
                    "reservation",
                    "non-preemptible work beyond reservation: "
                    + format_shortfall(need, view.reservation),
                )
            )
    if gang.controller and view.controller_limit is not None:
        need = alloc.controller + r
        if not need.fits_in(view.controller_limit):
            failures.append(
                (
                    "controller",
                    "controller tasks beyond controller limit: "
                    + format_shortfall(need, view.controller_limit),
                )
            )
    return failures


def _could_ever_fit(gang: Gang, view: PoolAdmissionView) -> bool:
    """Whether the gang fits every ceiling it is checked against, in an empty pool."""
    r = gang.resources
    ceiling = view.slack_entitlement if gang.revocable else view.nonslack_entitlement
    if not r.fits_in(ceiling):
        return False
    if not gang.preemptible and not r.fits_in(view.reservation):
        return False
    return not (
        gang.controller
        and view.controller_limit is not None
        and not r.fits_in(view.controller_limit)
    )


def _num(x: float) -> str:
    return f"{round(x, 3):g}"
