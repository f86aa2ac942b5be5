"""Score (PACK): prefer the fullest hosts, so that whole hosts stay free for big tasks.

Score = 1 - mean over the kinds the group asks for of (free / capacity): best fit.
"""

from __future__ import annotations

from peloton.placement.domain.framework import CycleState, TaskGroup
from peloton.placement.domain.hostindex import FloatArray, IntArray, take_rows
from peloton.placement.domain.types import Strategy

__all__ = ["MostAllocated", "free_fraction"]


def free_fraction(state: CycleState, group: TaskGroup, hosts: IntArray) -> FloatArray | None:
    """Mean over the group's kinds of free / capacity per host (None: asks for nothing)."""
    if not group.kinds:
        return None
    free = take_rows(state.pool(group), hosts, group.kind_index)
    inv = take_rows(state.table.inv_capacity, hosts, group.kind_index)
    out: FloatArray = (free * inv).sum(axis=0) * (1.0 / len(group.kinds))
    return out


class MostAllocated:
    name = "most_allocated"

    def score(self, state: CycleState, group: TaskGroup, hosts: IntArray) -> FloatArray | None:
        if group.strategy is not Strategy.PACK:
            return None
        frac = free_fraction(state, group, hosts)
        return None if frac is None else 1.0 - frac
