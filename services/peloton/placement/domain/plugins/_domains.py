"""Failure domains for spreading: split a group's tasks across the values of a host label.

Each domain (value of the label among candidate hosts; hosts without it form one more
domain) gets a quota by water-filling: the job's tasks already in the domain count as
its level, the domain's free room as its limit, larger domains win ties.
"""

from __future__ import annotations

import numpy as np

from peloton.model.constraint import JOB_LABEL
from peloton.placement.domain.framework import CycleState, TaskGroup
from peloton.placement.domain.hostindex import IntArray
from peloton.placement.domain.waterfill import water_fill

__all__ = ["job_counts", "domain_quotas"]


def job_counts(state: CycleState, group: TaskGroup) -> IntArray:
    """Live count per host of the group's job's tasks (this round included)."""
    return state.task_counts(f"{JOB_LABEL}={group.job_id}")


def domain_quotas(
    state: CycleState, group: TaskGroup, key: str, hosts: IntArray, limits: IntArray, n: int
) -> list[tuple[IntArray, int]]:
    """[(positions in ``hosts`` of one domain, tasks for that domain)], quotas > 0 only."""
    codes_all, vocab = state.table.label_codes(key)
    slot_all = codes_all + 1  # 0: hosts without the label
    slot = slot_all[hosts]
    width = len(vocab) + 1
    room_all = np.bincount(slot, weights=limits, minlength=width)
    present = (room_all > 0).nonzero()[0]
    if present.size <= 1:
        return [(np.arange(hosts.size), n)]
    jobs = job_counts(state, group)
    busy = jobs.nonzero()[0]
    existing_all = np.bincount(slot_all[busy], weights=jobs[busy], minlength=width)
    room = room_all[present].astype(np.int64)
    existing = existing_all[present].astype(np.int64)
    quotas = water_fill(existing, room, room.astype(np.float64), n)
    wanted = [(s, q) for s, q in zip(present.tolist(), quotas.tolist(), strict=True) if q > 0]
    if len(wanted) <= 8:  # few domains (zones): one scan each is cheapest
        return [((slot == s).nonzero()[0], int(q)) for s, q in wanted]
    by_slot = np.argsort(slot, kind="stable")  # many (racks): one sort, then slices
    bounds = np.concatenate(([0], np.cumsum(np.bincount(slot, minlength=width))))
    return [(by_slot[bounds[s]:bounds[s + 1]], int(q)) for s, q in wanted]
