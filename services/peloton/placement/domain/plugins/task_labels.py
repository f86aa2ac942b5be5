"""Reserve: count the group's task labels on the hosts it lands on.

Later groups of the same round then see them in task-label constraints and in SPREAD's
per-job counts.
"""

from __future__ import annotations

from peloton.placement.domain.framework import OK, CycleState, Status, TaskGroup
from peloton.placement.domain.hostindex import IntArray

__all__ = ["TaskLabels"]


class TaskLabels:
    name = "task_labels"

    def reserve(
        self, state: CycleState, group: TaskGroup, hosts: IntArray, counts: IntArray
    ) -> Status:
        state.add_tasks(group, hosts, counts)
        return OK

    def unreserve(
        self, state: CycleState, group: TaskGroup, hosts: IntArray, counts: IntArray
    ) -> None:
        state.remove_tasks(group, hosts, counts)
