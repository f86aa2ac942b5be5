"""Filter: the part of the hard constraint that reads host labels only (static)."""

from __future__ import annotations

from peloton.placement.domain.evaluator import limits
from peloton.placement.domain.framework import CycleState, TaskGroup
from peloton.placement.domain.hostindex import IntArray

__all__ = ["HostConstraint"]


class HostConstraint:
    name = "host_constraint"
    static = True

    def applies(self, state: CycleState, group: TaskGroup) -> bool:
        return group.hard_static is not None

    def describe(self, state: CycleState, group: TaskGroup) -> str:
        return str(group.hard_static)

    def filter(self, state: CycleState, group: TaskGroup, hosts: IntArray) -> IntArray:
        assert group.hard_static is not None
        return limits(state, group.hard_static, group, hosts)
