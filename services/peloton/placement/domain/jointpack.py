"""Joint packing for small rounds: several PACK groups packed host by host.

Packing group after group fills a fresh host with one shape (four memory-heavy tasks,
say), stranding its other resources; an optimal packing mixes complementary shapes. For
small rounds (at most ``PlacementConfig.joint_pack_max_tasks`` tasks, on clusters small
enough for full scans) the engine therefore packs runs of simple PACK groups jointly,
bin-centric: hosts are taken in
order (GPU hosts last, then fullest first, then position) and each is filled one task at
a time with the task that leaves the smallest residual (L2 norm of free / capacity after
placing it; ties: earlier group), until nothing more fits; then the next host. This is
the "L2" heuristic for vector bin packing; it costs one small vectorised step per task,
hence only for small rounds. Big rounds pack group by group (pack.py, scan.py).

Pure function over arrays; the engine runs the filters before and Reserve/Bind after.
"""

from __future__ import annotations

import numpy as np

from peloton.model.resources import EPSILON
from peloton.placement.domain.framework import TaskGroup, Unit
from peloton.placement.domain.hostindex import FloatArray, IntArray
from peloton.placement.domain.types import Strategy

__all__ = ["is_simple", "pack_jointly"]


def is_simple(unit: Unit) -> bool:
    """A unit the joint packer may take: one plain PACK group (no gang, ports, GPUs,
    slack, task-label constraints or soft preferences)."""
    if unit.gang_id is not None or len(unit.groups) != 1:
        return False
    g: TaskGroup = unit.groups[0]
    return (g.strategy is Strategy.PACK and not g.ports and not g.revocable
            and g.request[3] <= 0 and g.hard_dynamic is None and not g.preferences
            and g.spread_key is None)


def pack_jointly(
    free: FloatArray, inv_capacity: FloatArray, requests: FloatArray, allowed: IntArray,
    sizes: IntArray, order: IntArray,
) -> IntArray | None:
    """Counts [group, host], or None when some task found no room.

    ``free``/``inv_capacity`` are [kind, host] over the candidate hosts, ``requests``
    [group, kind], ``allowed`` [group, host] the filters' per-host limits (0: not a
    candidate), ``sizes`` the tasks per group, ``order`` the hosts to fill, in turn.
    """
    free = free.copy()
    remaining = sizes.copy()
    allowed = allowed.copy()
    counts = np.zeros(allowed.shape, dtype=np.int64)
    left = int(remaining.sum())
    for h in order.tolist():
        room = free[:, h]
        scale = inv_capacity[:, h]
        while left:
            fits = (remaining > 0) & (allowed[:, h] > 0) & (
                requests <= room + EPSILON).all(axis=1)
            if not fits.any():
                break
            residual = (((room - requests) * scale) ** 2).sum(axis=1)
            g = int(np.argmin(np.where(fits, residual, np.inf)))
            counts[g, h] += 1
            remaining[g] -= 1
            allowed[g, h] -= 1
            room -= requests[g]
            left -= 1
        if not left:
            return counts
    return None
