"""Partial host scans for big clusters: find enough feasible hosts without visiting all.

Like the Kubernetes scheduler's "stop after enough feasible nodes", but deterministic:
at the start of a round hosts are put in one fixed order (hosts without GPUs first, then
fullest first, then position) and cut into blocks of ``block`` hosts. Each block keeps,
per kind and pool (non-slack, slack), the largest free amount of any of its hosts. A
group visits only blocks whose maxima could fit one of its tasks, in order, in steps of
1, 2, 4, ... blocks, until the hosts found can take the whole group. Pruning by maxima
never skips a host that fits (a host fits only if every kind fits, so its block's
maxima fit too). Blocks whose hosts were reserved keep their (now possibly too high, so
still safe) maxima until a scan reaches them; blocks whose hosts were unreserved are
recomputed before the next scan.

Used for PACK groups without soft preferences or spread (they need every host ranked);
the outcome is first-fit in the fixed order refined by best-fit within the hosts found.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from peloton.model.resources import EPSILON
from peloton.placement.domain.hostindex import BoolArray, FloatArray, HostTable, IntArray

if TYPE_CHECKING:  # framework.py builds the index; only the type is needed here
    from peloton.placement.domain.framework import TaskGroup

__all__ = ["BlockIndex"]


class BlockIndex:
    """Blocks of hosts in round order with per-block maxima of free resources."""

    __slots__ = ("members", "sizes", "block_of", "gpu_blocks", "_gather", "_maxima",
                 "_dirty", "_low")

    def __init__(self, table: HostTable, free: FloatArray, block: int) -> None:
        n = len(table)
        freeness = np.zeros(n, dtype=np.float64)
        for k in (0, 1):  # cpu and memory decide how full a host is
            freeness += free[k] * table.inv_capacity[k]
        positions = np.arange(n, dtype=np.int64)
        order = np.lexsort((positions, freeness, table.has_gpu))
        count = max(1, -(-n // block))
        padded = np.full(count * block, n, dtype=np.int64)  # n: past every host
        padded[:n] = order
        # each block's members ascending (candidate arrays are ascending), padding last
        self.members: IntArray = np.sort(padded.reshape(count, block), axis=1)
        self.sizes: IntArray = (self.members < n).sum(axis=1)
        # for maxima: padding repeats the block's first host, which leaves a max unchanged
        self._gather: IntArray = np.where(self.members < n, self.members,
                                          self.members[:, :1])
        self.block_of: IntArray = np.empty(n, dtype=np.int64)
        self.block_of[order] = positions // block
        gpu = np.zeros(count, dtype=bool)
        gpu[self.block_of[table.has_gpu]] = True
        self.gpu_blocks: BoolArray = gpu
        """Blocks holding a GPU host (they come last in the order)."""
        self._maxima: dict[bool, FloatArray] = {}
        self._dirty: dict[bool, BoolArray] = {}
        """Per pool: blocks whose maxima may be too high (refreshed when a scan gets there)."""
        self._low: dict[bool, BoolArray] = {}
        """Per pool: blocks whose maxima may be too low (refreshed before the next scan)."""

    def touch(self, slack: bool, hosts: IntArray, grew: bool = False) -> None:
        """The ``slack`` (or non-slack) pool changed on ``hosts``: shrank (a reservation:
        the blocks' maxima may now be too high, which is safe, and are refreshed when a
        scan reaches them) or ``grew`` (an unreservation: refreshed before the next scan,
        since a maximum that is too low would skip a host that fits)."""
        dirty = (self._low if grew else self._dirty).get(slack)
        if dirty is not None and hosts.size:
            dirty[self.block_of[hosts]] = True

    def steps(self, pool: FloatArray, slack: bool, group: TaskGroup,
              emptiest_first: bool = False) -> Iterator[IntArray]:
        """Ascending host positions to visit, step by step (1, 2, 4, ... blocks): the
        fullest hosts first, or the emptiest first (GPU hosts last either way)."""
        maxima = self._current(pool, slack)
        if group.kinds:
            eligible = self._fits(maxima, group).nonzero()[0]
        else:
            eligible = np.arange(maxima.shape[1])
        if emptiest_first:
            gpu = self.gpu_blocks[eligible]
            eligible = np.concatenate((eligible[~gpu][::-1], eligible[gpu][::-1]))
        dirty = self._dirty[slack]
        start, width = 0, 1
        while start < eligible.size:
            chosen, start = self._confirm(pool, maxima, dirty, group, eligible, start, width)
            if chosen.size == 1:
                b = int(chosen[0])
                yield self.members[b, : self.sizes[b]]
            elif chosen.size:
                rows = self.members[chosen].ravel()
                yield np.sort(rows[rows < self.block_of.size])
            width *= 2

    def _confirm(
        self, pool: FloatArray, maxima: FloatArray, dirty: BoolArray, group: TaskGroup,
        eligible: IntArray, start: int, width: int,
    ) -> tuple[IntArray, int]:
        """The next ``width`` blocks from ``eligible[start:]`` that still fit once their
        stale maxima are refreshed, and where to go on from (the same blocks an eager
        refresh of every stale block would have listed)."""
        parts: list[IntArray] = []
        got = 0
        while got < width and start < eligible.size:
            window = eligible[start:start + width - got]
            start += window.size
            stale = window[dirty[window]]
            if stale.size:
                maxima[:, stale] = self._block_max(pool, stale)
                dirty[stale] = False
                if group.kinds:
                    window = window[self._fits(maxima[:, window], group)]
            parts.append(window)
            got += window.size
        return (parts[0] if len(parts) == 1 else np.concatenate(parts)), start

    @staticmethod
    def _fits(maxima: FloatArray, group: TaskGroup) -> BoolArray:
        ok: BoolArray = np.logical_and.reduce(
            maxima[group.kind_index] + EPSILON >= group.kind_request, axis=0)
        return ok

    def _current(self, pool: FloatArray, slack: bool) -> FloatArray:
        maxima = self._maxima.get(slack)
        if maxima is None:
            blocks = np.arange(self.members.shape[0])
            maxima = self._maxima[slack] = self._block_max(pool, blocks)
            self._dirty[slack] = np.zeros(blocks.size, dtype=bool)
            self._low[slack] = np.zeros(blocks.size, dtype=bool)
            return maxima
        low = self._low[slack]
        grown = low.nonzero()[0]
        if grown.size:
            maxima[:, grown] = self._block_max(pool, grown)
            low[grown] = False
            self._dirty[slack][grown] = False
        return maxima

    def _block_max(self, pool: FloatArray, blocks: IntArray) -> FloatArray:
        rows = self._gather[blocks]
        if blocks.size <= 4:  # the common refresh (a block or two): one 2-D gather
            out: FloatArray = pool.take(rows.ravel(), axis=1).reshape(
                pool.shape[0], blocks.size, rows.shape[1]).max(axis=2)
            return out
        out = np.empty((pool.shape[0], blocks.size), dtype=np.float64)
        for k in range(pool.shape[0]):  # one gather per kind: see hostindex.take_rows
            out[k] = pool[k][rows].max(axis=1)
        return out
