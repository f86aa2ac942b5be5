"""Assign (SPREAD): balance the job over failure domains, then over hosts.

The domain label is the group's soft ``spread`` key, else ``failure_domain_key`` from
the config (default ``zone``); hosts without it form one domain. Within a domain, the
job's tasks are water-filled over hosts: a host already running k tasks of the job takes
another only once every other fitting host has k; ties go to the best score (most free).
Peloton's SPREAD_JOB ("task i on host i") is the case of empty hosts.
"""

from __future__ import annotations

import numpy as np

from peloton.placement.domain.framework import CycleState, TaskGroup
from peloton.placement.domain.hostindex import FloatArray, IntArray
from peloton.placement.domain.plugins._domains import domain_quotas, job_counts
from peloton.placement.domain.waterfill import water_fill

__all__ = ["Spread"]


class Spread:
    name = "spread"
    emptiest_first = True

    def needs_all_hosts(self, group: TaskGroup) -> bool:
        return bool(group.preferences)

    def enough(
        self, state: CycleState, group: TaskGroup, hosts: IntArray, limits: IntArray
    ) -> bool:
        """Room for the group on at least twice as many hosts as it has tasks (so the
        water-filling has a choice), in every failure domain of the cluster."""
        if int(limits.sum()) < group.size or hosts.size < min(2 * group.size,
                                                              len(state.table)):
            return False
        key = group.spread_key or state.config.failure_domain_key
        if key is None:
            return True
        codes, vocab = state.table.label_codes(key)
        seen = np.bincount(codes[hosts] + 1, minlength=len(vocab) + 1)
        return int(np.count_nonzero(seen)) >= state.table.domain_count(key)

    def assign(
        self, state: CycleState, group: TaskGroup, hosts: IntArray, limits: IntArray,
        scores: FloatArray, n: int,
    ) -> IntArray:
        key = group.spread_key or state.config.failure_domain_key
        jobs = job_counts(state, group)[hosts]
        if key is None:
            return water_fill(jobs, limits, scores, n)
        counts = np.zeros(hosts.size, dtype=np.int64)
        for pos, quota in domain_quotas(state, group, key, hosts, limits, n):
            counts[pos] = water_fill(jobs[pos], limits[pos], scores[pos], quota)
        return counts
