"""Score (PACK): prefer the fullest hosts, so that whole hosts stay free for big tasks.

Score = 1 - mean over the kinds the group asks for of (free / capacity): best fit.
"""

from __future__ import annotations

import numpy as np

from peloton.placement.domain.framework import CycleState, TaskGroup
from peloton.placement.domain.hostindex import FloatArray, IntArray, take
from peloton.placement.domain.types import Strategy

__all__ = ["MostAllocated", "free_fraction"]


def free_fraction(state: CycleState, group: TaskGroup, hosts: IntArray) -> FloatArray | None:
    """Mean over the group's kinds of free / capacity per host (None: asks for nothing)."""
    if not group.kinds:
        return None
    pool = state.pool(group)
    total: FloatArray = np.zeros(hosts.size, dtype=np.float64)
    for k in group.kinds:
        total += take(pool[k], hosts) * take(state.table.inv_capacity[k], hosts)
    out: FloatArray = total * (1.0 / len(group.kinds))
    return out


class MostAllocated:
    name = "most_allocated"

    def score(self, state: CycleState, group: TaskGroup, hosts: IntArray) -> FloatArray | None:
        if group.strategy is not Strategy.PACK:
            return None
        frac = free_fraction(state, group, hosts)
        return None if frac is None else 1.0 - frac
