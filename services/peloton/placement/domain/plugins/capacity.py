"""Filter: the host's total capacity could ever hold a task of the group (static).

Separate from free_resources so that "no host is big enough" is reported UNRESOLVABLE
while "no host has room now" is UNSCHEDULABLE.
"""

from __future__ import annotations

import numpy as np

from peloton.model.resources import EPSILON
from peloton.placement.domain.framework import BIG, CycleState, TaskGroup
from peloton.placement.domain.hostindex import FloatArray, IntArray, take_rows
from peloton.placement.domain.plugins._text import resource_text

__all__ = ["Capacity", "per_host"]


def per_host(available: FloatArray, hosts: IntArray, group: TaskGroup) -> IntArray | None:
    """How many of the group's tasks fit in ``available`` ([kind, host]) on each of
    ``hosts``, within EPSILON (<= 0: none); None when the group asks for nothing."""
    if not group.kinds:
        return None
    rows = take_rows(available, hosts, group.kind_index)
    fits = np.floor((rows + EPSILON) / group.kind_request).min(axis=0)
    out: IntArray = fits.astype(np.int64)
    return out


class Capacity:
    name = "capacity"
    static = True

    def applies(self, state: CycleState, group: TaskGroup) -> bool:
        return bool(group.kinds)

    def describe(self, state: CycleState, group: TaskGroup) -> str:
        return f"capacity {resource_text(group.request)}"

    def filter(self, state: CycleState, group: TaskGroup, hosts: IntArray) -> IntArray | None:
        if all(group.request[k] <= state.table.min_capacity[k] + EPSILON for k in group.kinds):
            return None  # even the smallest host is big enough
        rows = take_rows(state.table.capacity, hosts, group.kind_index)
        ok = (rows + EPSILON >= group.kind_request).all(axis=0)
        return np.where(ok, BIG, 0)
