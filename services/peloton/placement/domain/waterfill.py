"""Vectorised distribution of n identical tasks over slots (hosts or failure domains).

`fill_in_order`: first-fit along a given order (PACK).
`water_fill`: raise the lowest "water level" first (SPREAD): slot i already holds
``existing[i]`` tasks of the job and may take ``limits[i]`` more; the result minimises the
highest ``existing + given`` level, and among equal choices prefers slots of lower
``rank``. Integer arithmetic, a binary search over the level, no per-task loop.
"""

from __future__ import annotations

import numpy as np

from peloton.placement.domain.hostindex import IntArray

__all__ = ["fill_in_order", "water_fill"]


def fill_in_order(limits: IntArray, n: int) -> IntArray:
    """Give each slot, in array order, as many of ``n`` as it can take."""
    before = np.cumsum(limits) - limits
    out: IntArray = np.clip(n - before, 0, limits)
    return out


def water_fill(existing: IntArray, limits: IntArray, rank: IntArray, n: int) -> IntArray:
    """``given`` with given <= limits, sum(given) == min(n, sum(limits)), level-balanced."""
    total = int(limits.sum())
    if n >= total:
        return limits.copy()
    if n <= 0:
        return np.zeros_like(limits)
    lo = int(existing.min())  # at this level nothing is given
    hi = int(existing.max()) + n  # at this level at least n are given
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if int(np.clip(mid - existing, 0, limits).sum()) >= n:
            hi = mid
        else:
            lo = mid
    given: IntArray = np.clip(hi - 1 - existing, 0, limits)
    missing = n - int(given.sum())
    if missing > 0:
        eligible = np.flatnonzero((given < limits) & (existing <= hi - 1))
        chosen = eligible[np.argsort(rank[eligible], kind="stable")[:missing]]
        given[chosen] += 1
    return given
