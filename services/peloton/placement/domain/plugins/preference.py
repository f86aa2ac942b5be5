"""Score: soft ``prefer`` constraints. A host scores the weighted share of the group's
preferences it satisfies (0..1); the registry weight makes preferences outrank the
allocation scores, never the hard filters."""

from __future__ import annotations

import numpy as np

from peloton.placement.domain.evaluator import holds_now
from peloton.placement.domain.framework import CycleState, TaskGroup
from peloton.placement.domain.hostindex import FloatArray, IntArray

__all__ = ["Preference"]


class Preference:
    name = "preference"

    def score(self, state: CycleState, group: TaskGroup, hosts: IntArray) -> FloatArray | None:
        if not group.preferences:
            return None
        total = sum(p.weight for p in group.preferences)
        out: FloatArray = np.zeros(hosts.size, dtype=np.float64)
        for p in group.preferences:
            out += (p.weight / total) * holds_now(state, p.constraint, group, hosts)
        return out
