"""The placement core's inputs and outputs: plain immutable data.

`HostView` is one host as the round sees it (capacity, what is free for ordinary tasks,
what is free as slack for revocable tasks, labels, task-label counts, free port ranges).
`TaskRequest` is one admitted task. `place` (engine.py) turns both into a `RoundResult`:
placements in the order they were decided, plus a reason for every task not placed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import NamedTuple

from peloton.model.constraint import Constraint
from peloton.model.resources import Resources

__all__ = [
    "Strategy",
    "Code",
    "HostView",
    "TaskRequest",
    "Placement",
    "RoundResult",
    "PlacementInputError",
]


class PlacementInputError(ValueError):
    """The round itself is malformed (duplicate host names or task ids): a caller bug."""


class Strategy(StrEnum):
    """PACK fills the fullest fitting hosts first (Peloton's PACK_HOST, batch default);
    SPREAD balances a job over failure domains and hosts (SPREAD_JOB, service default)."""

    PACK = "PACK"
    SPREAD = "SPREAD"


class Code(StrEnum):
    """Why a task was not placed (or SUCCESS)."""

    SUCCESS = "SUCCESS"
    UNSCHEDULABLE = "UNSCHEDULABLE"
    """Some host could take it once resources, ports or task counts free up."""
    UNRESOLVABLE = "UNRESOLVABLE"
    """No host of this cluster could ever take it (capacity, labels, port range size)."""
    REJECTED = "REJECTED"
    """Permit refused it: its gang could not be placed whole in this round."""
    INVALID = "INVALID"
    """The request itself is malformed (negative resources, duplicate port names, ...)."""


@dataclass(frozen=True, slots=True)
class HostView:
    """One host for one round.

    ``free`` is what non-revocable tasks may use, ``slack_free`` what revocable ones may
    use. ``task_label_counts`` counts ``"key=value"`` task labels of tasks already on the
    host (e.g. ``"peloton.job_id=J": 2``). ``ports_free`` are inclusive ranges.
    """

    name: str
    capacity: Resources
    free: Resources
    slack_free: Resources = field(default_factory=Resources)
    labels: Mapping[str, str] = field(default_factory=dict)
    task_label_counts: Mapping[str, int] = field(default_factory=dict)
    ports_free: tuple[tuple[int, int], ...] = ()


NO_LABELS: Mapping[str, str] = MappingProxyType({})
"""The (read-only, shared) labels of a task that has none."""


class TaskRequest(NamedTuple):
    """One task to place. ``labels`` are its task labels; ``peloton.job_id=<job_id>`` is
    added implicitly. Tasks sharing a ``gang_id`` are placed all together or not at all,
    and only when at least ``gang_size`` of them are in the round.

    (An immutable named tuple: the service builds one per admitted task, and a tuple is
    several times cheaper to build than a frozen dataclass.)"""

    task_id: str
    job_id: str
    resources: Resources
    ports: tuple[str, ...] = ()
    constraint: Constraint | None = None
    labels: Mapping[str, str] = NO_LABELS
    gang_id: str | None = None
    gang_size: int = 1
    strategy: Strategy = Strategy.PACK
    revocable: bool = False
    priority: int = 0


NO_PORTS: Mapping[str, int] = MappingProxyType({})
"""The (read-only, shared) ports of a placement that asked for none."""


class Placement(NamedTuple):
    """Task ``task_id`` goes to ``host`` with concrete port numbers by port name.

    (A named tuple: a round builds one per placed task, and a tuple is the cheapest
    object Python builds; ``ports`` is read-only.)"""

    task_id: str
    host: str
    ports: Mapping[str, int] = NO_PORTS


@dataclass(slots=True)
class RoundResult:
    """``placements`` in decision order (TASK-label constraints hold when replayed in this
    order); ``unplaced`` maps every other task id to a human reason, ``codes`` to its Code."""

    placements: list[Placement] = field(default_factory=list)
    unplaced: dict[str, str] = field(default_factory=dict)
    codes: dict[str, Code] = field(default_factory=dict)
