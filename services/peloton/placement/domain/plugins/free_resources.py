"""Filter + Reserve: free cpu, memory, disk and gpu.

Non-revocable tasks draw on a host's non-slack free resources, revocable tasks on its
slack only; the two pools never mix. The filter says how many tasks of the group fit in
the pool; Reserve subtracts them, Unreserve gives them back.
"""

from __future__ import annotations

from peloton.placement.domain.framework import OK, CycleState, Status, TaskGroup
from peloton.placement.domain.hostindex import IntArray
from peloton.placement.domain.plugins._text import resource_text
from peloton.placement.domain.plugins.capacity import per_host

__all__ = ["FreeResources"]


class FreeResources:
    name = "free_resources"
    static = False

    def applies(self, state: CycleState, group: TaskGroup) -> bool:
        return bool(group.kinds)

    def describe(self, state: CycleState, group: TaskGroup) -> str:
        pool = "free slack" if group.revocable else "free"
        return f"{pool} {resource_text(group.request)}"

    def filter(self, state: CycleState, group: TaskGroup, hosts: IntArray) -> IntArray | None:
        return per_host(state.pool(group), hosts, group)

    def reserve(
        self, state: CycleState, group: TaskGroup, hosts: IntArray, counts: IntArray
    ) -> Status:
        state.pool(group)[group.kind_index[:, None], hosts] -= group.kind_request * counts
        return OK

    def unreserve(
        self, state: CycleState, group: TaskGroup, hosts: IntArray, counts: IntArray
    ) -> None:
        state.pool(group)[group.kind_index[:, None], hosts] += group.kind_request * counts
