"""The simulated hosts: capacity, what is allocated, which are up, and their offers.

Arrays are [host, kind] in `KINDS` order. `offers(min_request)` plays the host manager
for a placement round: it returns the placement core's `HostTable` of every host, with
each host's free resources as of now (0 for hosts that are down), or None when no host
that is up has `min_request` free (then no task of the round could be placed).

One `HostTable` is built for the whole run and only its `free` row block is refreshed
before each round: `place` copies `table.free` into its per-round state and reads
nothing else that changes between rounds (capacity, names and labels are fixed; the
simulator sets no ports, slack or task-label counts). Building 10,000 `HostView`s and a
new table per round would cost more than the round itself. tests/sim checks that a
refreshed table places exactly as a freshly built one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from peloton.model.resources import EPSILON, Resources
from peloton.placement.domain import HostTable, HostView

from .scenario import HostGroup

__all__ = ["HostBook"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class HostBook:
    def __init__(self, groups: Sequence[HostGroup]) -> None:
        names: list[str] = []
        caps: list[tuple[float, float, float, float]] = []
        labels: list[dict[str, str]] = []
        width = len(str(max(g.count for g in groups)))
        zone_labels: dict[str, dict[str, str]] = {}
        for g in groups:
            r = g.resources
            for i in range(g.count):
                names.append(f"{g.prefix}-{i:0{width}d}")
                caps.append((r.cpu, r.memory, r.disk, r.gpu))
                zone = f"zone-{i % g.zones}"
                labels.append(zone_labels.setdefault(zone, {"zone": zone}))
        self.names: tuple[str, ...] = tuple(names)
        self.index: dict[str, int] = {n: i for i, n in enumerate(names)}
        if len(self.index) != len(names):
            raise ValueError("host names must be unique (give host groups distinct prefixes)")
        self.capacity: FloatArray = np.array(caps, dtype=np.float64).reshape(len(names), 4)
        self.allocated: FloatArray = np.zeros_like(self.capacity)
        self.up = np.ones(len(names), dtype=np.bool_)
        self._labels = labels
        self._table: HostTable | None = None
        self._order = np.zeros(0, dtype=np.int64)
        self.freed = 0
        self.up_version = 0
        """Bumped whenever resources are freed or a host returns (new room to place)."""

    def __len__(self) -> int:
        return len(self.names)

    def labels(self, host: int) -> dict[str, str]:
        """The host's labels (a copy): zone=zone-<n mod zones>."""
        return dict(self._labels[host])

    def total_capacity(self) -> Resources:
        """Capacity of the hosts that are up."""
        return Resources(*self.capacity[self.up].sum(axis=0).tolist())

    def allocate(self, hosts: IntArray, amounts: FloatArray) -> None:
        np.add.at(self.allocated, hosts, amounts)

    def release(self, hosts: IntArray, amounts: FloatArray) -> None:
        np.subtract.at(self.allocated, hosts, amounts)
        # float residue must not make an empty host look busy (or over-full)
        np.maximum(self.allocated, 0.0, out=self.allocated)
        self.freed += 1

    def set_up(self, host: int, up: bool) -> None:
        self.up[host] = up
        self.up_version += 1
        if up:
            self.freed += 1

    def free(self) -> FloatArray:
        """Free resources per host, [host, kind]; 0 for hosts that are down."""
        free = np.maximum(self.capacity - self.allocated, 0.0)
        free[~self.up] = 0.0
        return free

    def offers(self, min_request: FloatArray) -> HostTable | None:
        """Every host with its current free resources, or None when no host that is up
        has `min_request` free in every kind."""
        free = self.free()
        if not (free >= min_request - EPSILON).all(axis=1).any():
            return None
        table = self._table
        if table is None:
            views = [HostView(name, Resources(*cap), Resources(*cap), labels=labels)
                     for name, cap, labels in zip(self.names, self.capacity.tolist(),
                                                  self._labels, strict=True)]
            table = self._table = HostTable(views)
            self._order = np.array([self.index[n] for n in table.names], dtype=np.int64)
        table.free[:] = free[self._order].T
        return table

    def over_capacity(self) -> IntArray:
        """Hosts holding more than their capacity in some kind, or anything while down."""
        over = (self.allocated > self.capacity + 1e-6).any(axis=1)
        held = (self.allocated > 1e-6).any(axis=1) & ~self.up
        return np.flatnonzero(over | held).astype(np.int64)
