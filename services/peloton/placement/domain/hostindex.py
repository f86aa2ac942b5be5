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

from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from peloton.model.constraint import HOSTNAME_LABEL
from peloton.model.resources import KINDS, Resources
from peloton.placement.domain.ports import merge_ranges
from peloton.placement.domain.types import HostView, PlacementInputError

__all__ = ["HostTable", "FloatArray", "IntArray", "BoolArray", "MISSING", "UNKNOWN", "take"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

MISSING = -1
"""Label code of a host without the key."""
UNKNOWN = -2
"""Code of a value no host has; equal to no host's code."""


class HostTable:
    """The hosts of one round as arrays. Built once per round; never mutated."""

    __slots__ = (
        "views", "names", "capacity", "inv_capacity", "free", "slack", "has_gpu",
        "port_ranges", "port_counts", "_label_cache", "_task_label_maps",
    )

    def __init__(self, hosts: Sequence[HostView]) -> None:
        views = sorted(hosts, key=attrgetter("name"))
        for a, b in zip(views, views[1:], strict=False):
            if a.name == b.name:
                raise PlacementInputError(f"duplicate host name {a.name!r}")
        self.views: tuple[HostView, ...] = tuple(views)
        self.names: tuple[str, ...] = tuple(v.name for v in views)
        self.capacity = _rows([v.capacity for v in views])
        self.inv_capacity: FloatArray = np.divide(
            1.0, self.capacity, out=np.zeros_like(self.capacity), where=self.capacity > 0
        )
        self.free = _rows([v.free for v in views])
        self.slack = _rows([v.slack_free for v in views])
        self.has_gpu: BoolArray = self.capacity[3] > 0
        self.port_ranges: tuple[tuple[tuple[int, int], ...], ...] = tuple(
            _normal_ranges(v.ports_free) for v in views
        )
        self.port_counts: IntArray = np.fromiter(
            (sum(e - b + 1 for b, e in r) for r in self.port_ranges),
            dtype=np.int64, count=len(views),
        )
        self._label_cache: dict[str, tuple[IntArray, dict[str, int]]] = {}
        self._task_label_maps = [v.task_label_counts for v in views]

    def __len__(self) -> int:
        return len(self.names)

    def label_codes(self, key: str) -> tuple[IntArray, Mapping[str, int]]:
        """Per-host code of host label ``key`` and the value -> code map (codes >= 0)."""
        cached = self._label_cache.get(key)
        if cached is not None:
            return cached
        vocab: dict[str, int] = {}
        if key == HOSTNAME_LABEL:
            vocab = {name: i for i, name in enumerate(self.names)}
            codes = np.arange(len(self.names), dtype=np.int64)
        else:
            raw = [v.labels.get(key) for v in self.views]
            codes = np.fromiter(
                (MISSING if x is None else vocab.setdefault(x, len(vocab)) for x in raw),
                dtype=np.int64, count=len(raw),
            )
        self._label_cache[key] = (codes, vocab)
        return codes, vocab

    def code_of(self, key: str, value: str) -> int:
        return self.label_codes(key)[1].get(value, UNKNOWN)

    def task_label_counts(self, label: str) -> IntArray:
        """A fresh array of how many tasks on each host carry task label ``label``."""
        return np.array([m.get(label, 0) for m in self._task_label_maps], dtype=np.int64)


def take(row: npt.NDArray[Any], hosts: IntArray) -> npt.NDArray[Any]:
    """``row[hosts]`` for one per-host row; candidate arrays are ascending subsets of all
    hosts, so a full-length one is the identity and needs no gather (read-only use)."""
    return row if hosts.size == row.size else row[hosts]


def _normal_ranges(r: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    if not r or (len(r) == 1 and r[0][1] >= r[0][0]):
        return r  # the common case, already normal
    return merge_ranges(r)


def _rows(values: Sequence[Resources]) -> FloatArray:
    out = np.empty((len(KINDS), len(values)), dtype=np.float64)
    for k, kind in enumerate(KINDS):
        out[k] = np.fromiter(map(attrgetter(kind), values), dtype=np.float64, count=len(values))
    return out
