"""Score (SPREAD): prefer the emptiest hosts (Mimir ranks by most free resources)."""

from __future__ import annotations

from peloton.placement.domain.framework import CycleState, TaskGroup
from peloton.placement.domain.hostindex import FloatArray, IntArray
from peloton.placement.domain.plugins.most_allocated import free_fraction
from peloton.placement.domain.types import Strategy

__all__ = ["LeastAllocated"]


class LeastAllocated:
    name = "least_allocated"

    def score(self, state: CycleState, group: TaskGroup, hosts: IntArray) -> FloatArray | None:
        if group.strategy is not Strategy.SPREAD:
            return None
        return free_fraction(state, group, hosts)
