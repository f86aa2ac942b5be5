"""Assign (PACK): fill the best-scoring hosts first, each as far as it can take.

With a soft ``spread`` constraint the tasks are first split across that label's domains
(balanced), then packed within each domain.
"""

from __future__ import annotations

import numpy as np

from peloton.placement.domain.framework import CycleState, TaskGroup
from peloton.placement.domain.hostindex import FloatArray, IntArray
from peloton.placement.domain.plugins._domains import domain_quotas
from peloton.placement.domain.waterfill import best_first, fill_in_order

__all__ = ["Pack", "pack"]


def pack(hosts: IntArray, limits: IntArray, scores: FloatArray, n: int) -> IntArray:
    """Counts per host: best score first (ties: lower host position), first fit."""
    best = int(scores.argmax())  # the first of the best
    if limits[best] >= n:  # the best host takes them all: the common small group
        counts = np.zeros(hosts.size, dtype=np.int64)
        counts[best] = n
        return counts
    if int(limits.sum()) <= n:
        return limits.copy()  # room for at most n: every host is filled
    # every candidate takes at least one task, so the n best hosts are enough
    order = best_first(scores, n)
    counts = np.zeros(hosts.size, dtype=np.int64)
    counts[order] = fill_in_order(limits[order], n)
    return counts


class Pack:
    name = "pack"
    emptiest_first = False

    def needs_all_hosts(self, group: TaskGroup) -> bool:
        return group.spread_key is not None or bool(group.preferences)

    def enough(
        self, state: CycleState, group: TaskGroup, hosts: IntArray, limits: IntArray
    ) -> bool:
        return int(limits.sum()) >= group.size

    def assign(
        self, state: CycleState, group: TaskGroup, hosts: IntArray, limits: IntArray,
        scores: FloatArray, n: int,
    ) -> IntArray:
        if group.spread_key is None:
            return pack(hosts, limits, scores, n)
        counts = np.zeros(hosts.size, dtype=np.int64)
        for pos, quota in domain_quotas(state, group, group.spread_key, hosts, limits, n):
            counts[pos] = pack(hosts[pos], limits[pos], scores[pos], quota)
        return counts
