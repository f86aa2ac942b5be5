"""Filter: the host's total capacity could ever hold a task of the group (static).

Separate from free_resources so that "no host is big enough" is reported UNRESOLVABLE
while "no host has room now" is UNSCHEDULABLE.
"""

from __future__ import annotations

import numpy as np

from peloton.model.resources import EPSILON
from peloton.placement.domain.framework import BIG, CycleState, TaskGroup
from peloton.placement.domain.hostindex import FloatArray, IntArray, take
from peloton.placement.domain.plugins._text import resource_text

__all__ = ["Capacity", "per_host"]


def per_host(available: FloatArray, hosts: IntArray, group: TaskGroup) -> IntArray:
    """How many of the group's tasks fit in ``available`` ([kind, host]) on each of
    ``hosts``, within EPSILON; BIG when the group asks for nothing."""
    fits: FloatArray | None = None
    for k in group.kinds:
        room = np.floor((take(available[k], hosts) + EPSILON) / group.request[k])
        fits = room if fits is None else np.minimum(fits, room)
    if fits is None:
        return np.full(hosts.size, BIG, dtype=np.int64)
    out: IntArray = np.clip(fits, 0, BIG).astype(np.int64)
    return out


class Capacity:
    name = "capacity"
    static = True

    def requirement(self, state: CycleState, group: TaskGroup) -> str | None:
        return f"capacity {resource_text(group.request)}" if group.kinds else None

    def filter(self, state: CycleState, group: TaskGroup, hosts: IntArray) -> IntArray:
        ok: np.ndarray | None = None
        for k in group.kinds:
            fits = take(state.table.capacity[k], hosts) + EPSILON >= group.request[k]
            ok = fits if ok is None else ok & fits
        assert ok is not None
        return np.where(ok, BIG, 0)
