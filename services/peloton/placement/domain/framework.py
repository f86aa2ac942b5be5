"""Extension points of the placement cycle, in the style of the Kubernetes scheduler.

One round (``engine.place``) walks *units*: a gang, or one group of identical tasks.
For each group of a unit:

1. **PreFilter** (per unit): may refuse the whole unit up front (e.g. gang incomplete).
2. **Filter**: each plugin relevant to the group (``applies``) returns, for
   each candidate host, how many tasks of the group the host can take (0 = rejected).
   Candidates narrow plugin by plugin; the surviving counts are the minimum. A plugin
   marked ``static`` depends only on the cluster's shape, so a group it empties is
   UNRESOLVABLE rather than UNSCHEDULABLE.
3. **Tier**: hosts are tried tier by tier (0 first); e.g. GPU hosts are demoted for tasks
   needing no GPU, so they are used only when no other host fits.
4. **Score**: weighted sum of plugin scores per candidate (higher is better).
5. **Assign**: the group's strategy turns counts and scores into how many tasks go where.
6. **Reserve**: the plugins update the round's scratch state; Unreserve undoes it.
7. **Permit** (per unit): may reject the unit after all its groups are reserved; then
   every group is unreserved (gangs: all or nothing).
8. **Bind**: turns reservations into `Placement` records (with concrete ports).

Plugins never raise for a task that does not fit: they return counts or a `Status`.
All plugin work is vectorised over candidate hosts (numpy); nothing loops over all
hosts per task. `CycleState` is the per-round scratch state, computed once and reused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from peloton.model.constraint import HardConstraint, PreferConstraint
from peloton.model.resources import Resources
from peloton.placement.domain.hostindex import FloatArray, HostTable, IntArray
from peloton.placement.domain.ports import PortPool
from peloton.placement.domain.scan import BlockIndex
from peloton.placement.domain.types import Code, Placement, Strategy

__all__ = [
    "BIG",
    "Status",
    "OK",
    "TaskGroup",
    "Unit",
    "Attempt",
    "CycleState",
    "PreFilterPlugin",
    "FilterPlugin",
    "TierPlugin",
    "ScorePlugin",
    "AssignPlugin",
    "ReservePlugin",
    "PermitPlugin",
    "BindPlugin",
    "Registry",
    "PlacementConfig",
]

BIG = 10**12
"""A per-host task count meaning "no limit from this plugin"."""


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS


OK = Status()


@dataclass(slots=True)
class TaskGroup:
    """Tasks with identical needs, placed together. ``request`` is the resource vector
    as an array and ``kinds`` the indices of its non-zero kinds (also as an array,
    ``kind_index``, with ``kind_request`` their amounts as a column); ``hard_static`` is the
    part of the hard constraint that reads host labels only, ``hard_dynamic`` the part
    that reads task-label counts; ``labels`` are the ``key=value`` task labels every task
    of the group carries (with ``peloton.job_id``)."""

    ordinal: int
    job_id: str
    task_ids: tuple[str, ...]
    resources: Resources
    request: FloatArray
    kinds: tuple[int, ...]
    kind_index: IntArray
    kind_request: FloatArray
    ports: tuple[str, ...]
    strategy: Strategy
    revocable: bool
    priority: int
    gang_id: str | None
    gang_size: int
    hard_static: HardConstraint | None
    hard_dynamic: HardConstraint | None
    preferences: tuple[PreferConstraint, ...]
    spread_key: str | None
    labels: frozenset[str]

    @property
    def size(self) -> int:
        return len(self.task_ids)


@dataclass(slots=True)
class Unit:
    """What is placed or refused as a whole: a gang (several groups) or one group."""

    gang_id: str | None
    gang_size: int
    groups: list[TaskGroup]

    @property
    def task_count(self) -> int:
        return sum(g.size for g in self.groups)


@dataclass(slots=True)
class Attempt:
    """One group's reservation in the current unit: ``counts[i]`` tasks on ``hosts[i]``;
    ``shortfall`` explains why fewer than ``group.size`` were reserved."""

    group: TaskGroup
    hosts: IntArray
    counts: IntArray
    shortfall: Status = OK
    placed: int = -1
    """Tasks reserved (the sum of counts; computed when not given)."""

    def __post_init__(self) -> None:
        if self.placed < 0:
            self.placed = int(self.counts.sum())


@dataclass(frozen=True, slots=True)
class PlacementConfig:
    """Round knobs. ``failure_domain_key`` is the host label SPREAD balances over (as well
    as hosts); ``gpu_hosts_exclusive`` forbids GPU hosts to tasks needing no GPU (Peloton's
    rule) instead of merely using them last; ``registry`` None means the default one."""


    failure_domain_key: str | None = "zone"
    gpu_hosts_exclusive: bool = False
    registry: Registry | None = None
    partial_scan_from: int = 2048
    """Clusters with at least this many hosts use partial scans (scan.py) where allowed."""
    scan_block: int = 256
    joint_pack_max_tasks: int = 400
    """Rounds of at most this many tasks on clusters below ``partial_scan_from`` hosts
    pack runs of simple PACK groups jointly (jointpack.py); 0 turns that off."""


class CycleState:
    """Per-round scratch state: what is still free, task-label counts, ports handed out.

    Arrays are indexed by host position in ``table`` (resources: [kind, host]). Only
    plugins' Reserve/Unreserve mutate it; everything else reads.
    """

    __slots__ = ("table", "config", "free", "_slack", "_port_counts", "_port_next",
                 "port_pools", "port_grants", "_task_counts", "_reserved", "_blocks")

    def __init__(self, table: HostTable, config: PlacementConfig) -> None:
        self.table = table
        self.config = config
        self.free: FloatArray = table.free.copy()
        self._slack: FloatArray | None = None
        self._port_counts: IntArray | None = None
        self._port_next: IntArray | None = None
        self.port_pools: dict[int, PortPool] = {}
        """Hosts whose ports are handed out by an allocator (see `port_next`)."""
        self.port_grants: dict[int, IntArray] = {}
        """group ordinal -> port numbers [task, port name] of its reserved tasks, in the
        order of the reservation's hosts and counts (the order Bind assigns task ids)."""
        self._task_counts: dict[str, IntArray] = {}
        self._reserved: dict[str, dict[int, tuple[IntArray, IntArray]]] = {}
        """label -> group ordinal -> (hosts, counts) reserved this round."""
        self._blocks: BlockIndex | None = None

    @property
    def slack(self) -> FloatArray:
        """Live free slack resources, [kind, host] (copied from the table on first use)."""
        if self._slack is None:
            self._slack = self.table.slack.copy()
        return self._slack

    @property
    def port_counts(self) -> IntArray:
        """Live number of free ports per host."""
        if self._port_counts is None:
            self._port_counts = self.table.port_counts.copy()
        return self._port_counts

    def blocks(self) -> BlockIndex:
        """The round's block index for partial scans, built on first use."""
        if self._blocks is None:
            self._blocks = BlockIndex(self.table, self.free, self.config.scan_block)
        return self._blocks

    def resources_changed(self, group: TaskGroup, hosts: IntArray, grew: bool = False) -> None:
        """Keep derived indexes current after the group's pool shrank (a reservation) or
        ``grew`` (an unreservation) on ``hosts``."""
        if self._blocks is not None:
            self._blocks.touch(group.revocable, hosts, grew)

    def pool(self, group: TaskGroup) -> FloatArray:
        """The resources the group may use: slack for revocable tasks, else non-slack."""
        return self.slack if group.revocable else self.free

    def task_counts(self, label: str) -> IntArray:
        """Live count per host of tasks carrying ``label`` ("key=value"), this round's
        placements included. Tracking starts on first use and is then kept current."""
        counts = self._task_counts.get(label)
        if counts is None:
            counts = self.table.task_label_counts(label)
            for hosts, placed in self._reserved.get(label, {}).values():
                counts[hosts] += placed  # catch up with this round's earlier reservations
            self._task_counts[label] = counts
        return counts

    def add_tasks(self, group: TaskGroup, hosts: IntArray, counts: IntArray) -> None:
        """Record that ``counts`` tasks of ``group`` now sit on ``hosts``."""
        for label in group.labels:
            self._reserved.setdefault(label, {})[group.ordinal] = (hosts, counts)
            live = self._task_counts.get(label)
            if live is not None:
                live[hosts] += counts

    def remove_tasks(self, group: TaskGroup, hosts: IntArray, counts: IntArray) -> None:
        """Undo `add_tasks` for ``group``."""
        for label in group.labels:
            self._reserved.get(label, {}).pop(group.ordinal, None)
            live = self._task_counts.get(label)
            if live is not None:
                live[hosts] -= counts

    @property
    def port_next(self) -> IntArray:
        """Live lowest free port of each host's first free range (from the table's
        `port_first`): while the first range has room, ports are handed out by bumping
        this, for many hosts at once. A host that needs more goes to its own allocator
        (`port_pool`) for the rest of the round."""
        if self._port_next is None:
            self._port_next = self.table.port_first[0].copy()
        return self._port_next

    def port_pool(self, host: int) -> PortPool:
        """The host's port allocator, created on first use from what is still free."""
        pool = self.port_pools.get(host)
        if pool is None:
            ranges = self.table.port_ranges[host]
            if ranges:
                begin = int(self.port_next[host])
                rest = ranges[1:]
                ranges = ((begin, ranges[0][1]),) + rest if begin <= ranges[0][1] else rest
            pool = self.port_pools[host] = PortPool(ranges)
        return pool


# --------------------------------------------------------------------------- protocols


class PreFilterPlugin(Protocol):
    name: str

    def prefilter(self, state: CycleState, unit: Unit) -> Status: ...


class FilterPlugin(Protocol):
    name: str
    static: bool

    def applies(self, state: CycleState, group: TaskGroup) -> bool:
        """Whether the plugin has anything to check for this group (else no ``filter``)."""
        ...

    def describe(self, state: CycleState, group: TaskGroup) -> str:
        """What the plugin demands of a host, in words ("free gpu>=2"), for reasons."""
        ...

    def filter(
        self, state: CycleState, group: TaskGroup, hosts: IntArray
    ) -> IntArray | None:
        """Per host in ``hosts``: how many tasks of ``group`` it can take (<= 0: none);
        None when every host passes without a limit (a cheap common case)."""
        ...


class TierPlugin(Protocol):
    name: str

    def tier(self, state: CycleState, group: TaskGroup, hosts: IntArray) -> IntArray | None:
        """Per host: how far back to push it (0 = no demotion); None = no opinion."""
        ...


class ScorePlugin(Protocol):
    name: str

    def score(self, state: CycleState, group: TaskGroup, hosts: IntArray) -> FloatArray | None:
        """Per host a score in [0, 1] (higher is better); None = no opinion."""
        ...


class AssignPlugin(Protocol):
    name: str
    emptiest_first: bool
    """Partial scans visit the emptiest hosts first (else the fullest first)."""

    def needs_all_hosts(self, group: TaskGroup) -> bool:
        """False when the strategy does well with a sample of feasible hosts (partial
        scan, see scan.py); True when it must rank every host (preferences)."""
        ...

    def enough(
        self, state: CycleState, group: TaskGroup, hosts: IntArray, limits: IntArray
    ) -> bool:
        """Whether the feasible ``hosts`` found so far suffice for a good assignment."""
        ...

    def assign(
        self, state: CycleState, group: TaskGroup, hosts: IntArray, limits: IntArray,
        scores: FloatArray, n: int,
    ) -> IntArray:
        """How many of ``n`` tasks go on each of ``hosts`` (each <= limits)."""
        ...


class ReservePlugin(Protocol):
    name: str

    def reserve(
        self, state: CycleState, group: TaskGroup, hosts: IntArray, counts: IntArray
    ) -> Status: ...

    def unreserve(
        self, state: CycleState, group: TaskGroup, hosts: IntArray, counts: IntArray
    ) -> None: ...


class PermitPlugin(Protocol):
    name: str

    def permit(self, state: CycleState, unit: Unit, attempts: list[Attempt]) -> Status: ...


class BindPlugin(Protocol):
    name: str

    def bind(self, state: CycleState, attempt: Attempt) -> list[Placement]:
        """Placements for the first ``attempt.placed`` tasks of the group, in order."""
        ...


@dataclass(frozen=True)
class Registry:
    """Which plugins run at each extension point, in order (see registry.py)."""

    prefilter: tuple[PreFilterPlugin, ...]
    filter: tuple[FilterPlugin, ...]
    tier: tuple[TierPlugin, ...]
    score: tuple[tuple[ScorePlugin, float], ...]
    assign: Mapping[Strategy, AssignPlugin]
    reserve: tuple[ReservePlugin, ...]
    permit: tuple[PermitPlugin, ...]
    bind: BindPlugin
