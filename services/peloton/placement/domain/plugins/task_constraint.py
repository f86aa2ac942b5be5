"""Filter: the part of the hard constraint that counts task labels on hosts.

Counts include tasks placed earlier in this round (see evaluator.py for how many tasks
of a group a host may take when the group's own tasks carry the counted label).
"""

from __future__ import annotations

from peloton.placement.domain.evaluator import limits
from peloton.placement.domain.framework import CycleState, TaskGroup
from peloton.placement.domain.hostindex import IntArray

__all__ = ["TaskConstraint"]


class TaskConstraint:
    name = "task_constraint"
    static = False

    def applies(self, state: CycleState, group: TaskGroup) -> bool:
        return group.hard_dynamic is not None

    def describe(self, state: CycleState, group: TaskGroup) -> str:
        return str(group.hard_dynamic)

    def filter(self, state: CycleState, group: TaskGroup, hosts: IntArray) -> IntArray:
        assert group.hard_dynamic is not None
        return limits(state, group.hard_dynamic, group, hosts)
