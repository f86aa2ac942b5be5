"""Failure domains for spreading: split a group's tasks across the values of a host label.

Each domain (value of the label among candidate hosts; hosts without it form one more
domain) gets a quota by water-filling: the job's tasks already in the domain count as
its level, the domain's free room as its limit, larger domains win ties.
"""

from __future__ import annotations

import numpy as np

from peloton.model.constraint import JOB_LABEL
from peloton.placement.domain.framework import CycleState, TaskGroup
from peloton.placement.domain.hostindex import FloatArray, IntArray
from peloton.placement.domain.waterfill import water_fill

__all__ = ["job_counts", "domain_quotas", "rank_by_score"]


def job_counts(state: CycleState, group: TaskGroup) -> IntArray:
    """Live count per host of the group's job's tasks (this round included)."""
    return state.task_counts(f"{JOB_LABEL}={group.job_id}")


def rank_by_score(scores: FloatArray) -> IntArray:
    """rank[i] = place of candidate i by score descending, ties by host order (candidate
    arrays are ascending host positions, and the sort is stable)."""
    order = np.argsort(-scores, kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank


def domain_quotas(
    state: CycleState, group: TaskGroup, key: str, hosts: IntArray, limits: IntArray, n: int
) -> list[tuple[IntArray, int]]:
    """[(positions in ``hosts`` of one domain, tasks for that domain)], quotas > 0 only."""
    codes_all, _ = state.table.label_codes(key)
    slot_all = codes_all + 1  # 0: hosts without the label
    slot = slot_all[hosts]
    width = int(slot_all.max()) + 1 if slot_all.size else 1
    room_all = np.bincount(slot, weights=limits, minlength=width)
    present = np.flatnonzero(room_all > 0)
    if present.size <= 1:
        return [(np.arange(hosts.size), n)]
    jobs = job_counts(state, group)
    busy = np.flatnonzero(jobs)
    existing_all = np.bincount(slot_all[busy], weights=jobs[busy], minlength=width)
    room = room_all[present].astype(np.int64)
    existing = existing_all[present].astype(np.int64)
    rank = np.empty(present.size, dtype=np.int64)
    rank[np.argsort(-room, kind="stable")] = np.arange(present.size)
    quotas = water_fill(existing, room, rank, n)
    by_slot = np.argsort(slot, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(slot, minlength=width))))
    return [
        (by_slot[bounds[s]:bounds[s + 1]], int(q))
        for s, q in zip(present.tolist(), quotas.tolist(), strict=True) if q > 0
    ]
