"""Filter: the part of the hard constraint that reads host labels only (static)."""

from __future__ import annotations

from peloton.placement.domain.evaluator import limits
from peloton.placement.domain.framework import CycleState, TaskGroup
from peloton.placement.domain.hostindex import IntArray

__all__ = ["HostConstraint"]


class HostConstraint:
    name = "host_constraint"
    static = True

    def requirement(self, state: CycleState, group: TaskGroup) -> str | None:
        return None if group.hard_static is None else str(group.hard_static)

    def filter(self, state: CycleState, group: TaskGroup, hosts: IntArray) -> IntArray:
        assert group.hard_static is not None
        return limits(state, group.hard_static, group, hosts)
