"""Columnar, read-only index of a round's hosts.

Hosts are sorted by name, so host ``i`` is the same host whatever order the caller used;
every array below is indexed by that position. Resource arrays have one row per kind in
`KINDS` order and one column per host (shape (4, hosts)): per-kind rows are contiguous,
which keeps the hot per-kind arithmetic fast (numpy reductions over a short last axis are
slow). Host labels are indexed lazily per key: ``label_codes(key)`` gives an
int array (the value's code, -1 where the host lacks the key) plus the value -> code map,
built once per key and round; task-label counts likewise per ``"key=value"``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from operator import attrgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from peloton.model.constraint import HOSTNAME_LABEL
from peloton.model.resources import KINDS, Resources
from peloton.placement.domain.ports import merge_ranges
from peloton.placement.domain.types import HostView, PlacementInputError

__all__ = [
    "HostTable", "FloatArray", "IntArray", "BoolArray", "MISSING", "UNKNOWN", "take",
    "take_rows",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

MISSING = -1
"""Label code of a host without the key."""
UNKNOWN = -2
"""Code of a value no host has; equal to no host's code."""


class HostTable:
    """The hosts of one round as arrays. Built once per round; never mutated.

    Slack and port arrays are built on first use: many rounds have no revocable task or
    no task asking for ports, and converting 10,000 host views is a visible share of a
    round.
    """

    __slots__ = (
        "views", "names", "capacity", "inv_capacity", "min_capacity", "free", "has_gpu",
        "_slack", "_port_ranges", "_port_counts", "_label_cache", "_task_label_maps",
        "_task_label_cache", "_label_maps",
    )

    def __init__(self, hosts: Sequence[HostView]) -> None:
        views = sorted(hosts, key=attrgetter("name"))
        names = [v.name for v in views]
        if len(set(names)) != len(names):
            dup = next(a for a, b in zip(names, names[1:], strict=False) if a == b)
            raise PlacementInputError(f"duplicate host name {dup!r}")
        self.views: tuple[HostView, ...] = tuple(views)
        self.names: tuple[str, ...] = tuple(names)
        self.capacity = _rows([v.capacity for v in views])
        self.inv_capacity: FloatArray = np.divide(
            1.0, self.capacity, out=np.zeros_like(self.capacity), where=self.capacity > 0
        )
        self.min_capacity: FloatArray = (
            self.capacity.min(axis=1) if views else np.zeros(len(KINDS))
        )
        self.free = _rows([v.free for v in views])
        self.has_gpu: BoolArray = self.capacity[3] > 0
        self._slack: FloatArray | None = None
        self._port_ranges: tuple[tuple[tuple[int, int], ...], ...] | None = None
        self._port_counts: IntArray | None = None
        self._label_cache: dict[str, tuple[IntArray, dict[str, int]]] = {}
        self._task_label_maps = [v.task_label_counts for v in views]
        self._label_maps = [v.labels for v in views]
        self._task_label_cache: dict[str, IntArray] = {}

    def __len__(self) -> int:
        return len(self.names)

    @property
    def slack(self) -> FloatArray:
        """Free slack (revocable) resources, [kind, host]."""
        if self._slack is None:
            self._slack = _rows([v.slack_free for v in self.views])
        return self._slack

    @property
    def port_ranges(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """Per host: sorted, disjoint free port ranges."""
        if self._port_ranges is None:
            raw = [v.ports_free for v in self.views]
            self._port_ranges = tuple(
                r if len(r) < 2 and (not r or r[0][1] >= r[0][0]) else merge_ranges(r)
                for r in raw
            )
        return self._port_ranges

    @property
    def port_counts(self) -> IntArray:
        """Per host: number of free ports."""
        if self._port_counts is None:
            counts = [
                (r[0][1] - r[0][0] + 1) if len(r) == 1 else sum(e - b + 1 for b, e in r)
                for r in self.port_ranges
            ]
            self._port_counts = np.array(counts, dtype=np.int64).reshape(len(counts))
        return self._port_counts

    def label_codes(self, key: str) -> tuple[IntArray, Mapping[str, int]]:
        """Per-host code of host label ``key`` and the value -> code map (codes >= 0,
        numbered in sorted value order)."""
        cached = self._label_cache.get(key)
        if cached is not None:
            return cached
        if key == HOSTNAME_LABEL:
            vocab = {name: i for i, name in enumerate(self.names)}
            codes = np.arange(len(self.names), dtype=np.int64)
        else:
            raw = [m.get(key) for m in self._label_maps]
            values = sorted(v for v in set(raw) if v is not None)
            vocab = {value: i for i, value in enumerate(values)}
            lookup: dict[str | None, int] = {None: MISSING}
            lookup.update(vocab)
            codes = np.array([lookup[x] for x in raw], dtype=np.int64).reshape(len(raw))
        self._label_cache[key] = (codes, vocab)
        return codes, vocab

    def domain_count(self, key: str) -> int:
        """How many distinct values of ``key`` hosts have, hosts without it counting as
        one more."""
        codes, vocab = self.label_codes(key)
        return len(vocab) + int(bool((codes < 0).any()))

    def code_of(self, key: str, value: str) -> int:
        return self.label_codes(key)[1].get(value, UNKNOWN)

    def prefetch_task_labels(self, labels: Collection[str]) -> None:
        """Count several task labels at once when one pass over every host's label counts
        is cheaper than one pass over the hosts per label."""
        wanted = [label for label in labels if label not in self._task_label_cache]
        if len(wanted) < 2:
            return
        maps = self._task_label_maps
        entries = sum(map(len, maps))
        if entries * 2 > len(wanted) * len(maps):
            return  # busy hosts, few labels: scanning per label is cheaper
        found: dict[str, tuple[list[int], list[int]]] = {w: ([], []) for w in wanted}
        for i, m in enumerate(maps):
            for label, count in m.items():
                slot = found.get(label)
                if slot is not None:
                    slot[0].append(i)
                    slot[1].append(count)
        for label, (hosts, counts) in found.items():
            column = np.zeros(len(maps), dtype=np.int64)
            column[hosts] = counts
            self._task_label_cache[label] = column

    def task_label_counts(self, label: str) -> IntArray:
        """A fresh array of how many tasks on each host carry task label ``label``."""
        column = self._task_label_cache.get(label)
        if column is None:
            column = np.array([m.get(label, 0) for m in self._task_label_maps], dtype=np.int64)
            self._task_label_cache[label] = column
        return column.copy()


def take_rows(rows: FloatArray, hosts: IntArray, kinds: IntArray) -> FloatArray:
    """``rows[kinds][:, hosts]`` for a [kind, host] array, the fastest way for the size.

    (numpy gathers along the second axis of a 2-D array are several times slower than
    one gather per row once there are thousands of hosts.)
    """
    if hosts.size == rows.shape[1]:
        out: FloatArray = rows[kinds]
    elif hosts.size <= 1024:
        out = rows[kinds[:, None], hosts]
    else:
        out = np.empty((kinds.size, hosts.size), dtype=rows.dtype)
        for j, k in enumerate(kinds.tolist()):
            out[j] = rows[k][hosts]
    return out


def take(row: npt.NDArray[Any], hosts: IntArray) -> npt.NDArray[Any]:
    """``row[hosts]`` for one per-host row; candidate arrays are ascending subsets of all
    hosts, so a full-length one is the identity and needs no gather (read-only use)."""
    return row if hosts.size == row.size else row[hosts]


def _rows(values: Sequence[Resources]) -> FloatArray:
    out = np.empty((len(KINDS), len(values)), dtype=np.float64)
    for k, kind in enumerate(KINDS):
        out[k] = np.fromiter(map(attrgetter(kind), values), dtype=np.float64, count=len(values))
    return out
