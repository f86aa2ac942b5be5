"""Vectorised distribution of n identical tasks over slots (hosts or failure domains).

`best_first`: the m best slots by score (ties: lower position), in that order.
`fill_in_order`: first-fit along a given order (PACK).
`water_fill`: raise the lowest "water level" first (SPREAD): slot i already holds
``existing[i]`` tasks of the job and may take ``limits[i]`` more; the result minimises the
highest ``existing + given`` level, and among equal choices prefers higher ``scores``,
then lower positions. Integer arithmetic, no per-task loop.
"""

from __future__ import annotations

import numpy as np

from peloton.placement.domain.hostindex import FloatArray, IntArray

__all__ = ["best_first", "fill_in_order", "water_fill"]


def best_first(scores: FloatArray, m: int) -> IntArray:
    """Positions of the ``m`` highest scores, best first; scores equal to within 1e-9
    (relative to 1) go by position.

    Scores and positions are folded into one exact integer key, so this is one O(len)
    selection plus a sort of the m chosen: cheap for small m.
    """
    size = scores.size
    if m <= 0:
        return np.zeros(0, dtype=np.int64)
    if size and float(np.abs(scores).max()) > 1e6:  # the integer key would overflow
        order = np.lexsort((np.arange(size), -scores))
        return order[:m].astype(np.int64)
    key = np.rint(scores * -1e9).astype(np.int64) * size + np.arange(size, dtype=np.int64)
    if m >= size:
        out: IntArray = key.argsort()
        return out
    chosen = key.argpartition(m - 1)[:m]
    ordered: IntArray = chosen[key[chosen].argsort()]
    return ordered


def fill_in_order(limits: IntArray, n: int) -> IntArray:
    """Give each slot, in array order, as many of ``n`` as it can take."""
    before = np.cumsum(limits) - limits
    out: IntArray = np.minimum(np.maximum(n - before, 0), limits)
    return out


def water_fill(existing: IntArray, limits: IntArray, scores: FloatArray, n: int) -> IntArray:
    """``given`` with given <= limits, sum(given) == min(n, sum(limits)), level-balanced."""
    total = int(limits.sum())
    if n >= total:
        return limits.copy()
    if n <= 0:
        return np.zeros_like(limits)
    lo = int(existing.min())  # at this level nothing is given
    # Usually one step up suffices (a new job, or an evenly spread one): then the n best
    # slots at the lowest level get one each.
    lowest = (existing == lo) & (limits > 0)
    slots = lowest.nonzero()[0]
    if slots.size >= n:
        given = np.zeros_like(limits)
        given[slots[best_first(scores[slots], n)]] = 1
        return given
    hi = int(existing.max()) + n  # at this level at least n are given
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if int(np.minimum(np.maximum(mid - existing, 0), limits).sum()) >= n:
            hi = mid
        else:
            lo = mid
    given = np.minimum(np.maximum(hi - 1 - existing, 0), limits)
    missing = n - int(given.sum())
    if missing > 0:
        eligible = ((given < limits) & (existing <= hi - 1)).nonzero()[0]
        given[eligible[best_first(scores[eligible], missing)]] += 1
    return given
