"""Slack (revocable) rules, stated once and applied element-wise to pools x kinds arrays.

Revocable tasks run on resources that may be taken back. Two mechanisms give them room:

- memory, disk, gpu: revocable work uses part of the pool's own entitlement, capped by
  the pool's slack limit (slackLimit% x reservation) and by what revocable work holds and
  asks for, and never eating into what non-revocable work requires:
  `slack = min(max(0, entitlement - non-slack requirement),
               min(slack limit, slack allocation + slack demand))`.
- cpu: no carve-out (its slack limit is 0). The cluster's revocable cpus are divided down
  the tree by `entitlement.divide_batch`, each child first keeping its revocable
  allocation (`revocable_floor`) and then wanting allocation + revocable demand
  (`revocable_want`).

Every function is pure, element-wise, accepts floats or numpy arrays (columns in `KINDS`
order where a kind matters), and clamps negative inputs instead of raising.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from peloton.model.resources import KINDS

__all__ = [
    "CARVED_KINDS",
    "CARVED_MASK",
    "slack_limits",
    "slack_requirement",
    "carve_slack",
    "revocable_floor",
    "revocable_want",
]

Array = npt.NDArray[np.float64]

#: Kinds whose slack is carved out of the pool's own entitlement.
CARVED_KINDS: tuple[str, ...] = ("memory", "disk", "gpu")
#: 1.0 in the columns of `CARVED_KINDS`, 0.0 for cpu (KINDS order).
CARVED_MASK: Array = np.array([1.0 if k in CARVED_KINDS else 0.0 for k in KINDS])


def slack_limits(reservation: Array, percent: Array) -> Array:
    """pools x kinds: slack% x reservation for memory/disk/gpu, 0 for cpu.

    `reservation` is pools x kinds, `percent` one value per pool.
    """
    return np.maximum(reservation, 0.0) * (np.asarray(percent)[:, None] / 100.0) * CARVED_MASK


def slack_requirement(slack_limit: Array, slack_raw: Array) -> Array:
    """What revocable work may claim of a pool's own entitlement.

    `slack_raw` = slack allocation + slack demand.
    """
    return np.minimum(np.maximum(slack_limit, 0.0), np.maximum(slack_raw, 0.0))


def carve_slack(
    entitlement: Array, nonslack_requirement: Array, slack_limit: Array, slack_raw: Array
) -> Array:
    """The slack entitlement carved from `entitlement`; always within [0, entitlement]."""
    spare = np.maximum(entitlement - nonslack_requirement, 0.0)
    carved = np.minimum(spare, slack_requirement(slack_limit, slack_raw))
    return np.minimum(carved, np.maximum(entitlement, 0.0))


def revocable_floor(revocable_allocation: Array) -> Array:
    """Phase 1 of the revocable-cpu split: a child keeps what its revocable tasks hold."""
    return np.maximum(revocable_allocation, 0.0)


def revocable_want(revocable_allocation: Array, revocable_demand: Array) -> Array:
    """Phase 2 target of the revocable-cpu split: holdings plus pending revocable demand."""
    return np.maximum(revocable_allocation, 0.0) + np.maximum(revocable_demand, 0.0)
