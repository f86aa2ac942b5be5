"""Columnar index of the hosts a round places on.

Hosts are sorted by name, so host ``i`` is the same host whatever order the caller used;
every array below is indexed by that position. Resource arrays have one row per kind in
`KINDS` order and one column per host (shape (4, hosts)): per-kind rows are contiguous,
which keeps the hot per-kind arithmetic fast (numpy reductions over a short last axis are
slow). Host labels are indexed lazily per key: ``label_codes(key)`` gives an
int array (the value's code, -1 where the host lacks the key) plus the value -> code map,
built once per key; task-label counts come from an inverted index (label -> host ->
count). A table kept across rounds is refreshed row by row with `HostTable.update`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
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
    """The hosts of a round as arrays.

    `place` only reads a table (it copies ``free`` into its per-round state), so a caller
    may keep one table across rounds and `update` the rows of the hosts whose view
    changed instead of rebuilding every row per round (the placement service does, see
    board.py; converting 10,000 host views costs more than many rounds). A caller may
    also overwrite ``free`` in place between rounds (the simulator does). Adding or
    removing hosts changes positions: build a new table then.

    Derived indexes are built on first use and then kept current by `update`: label
    codes per key, slack, port ranges and counts, and an inverted index of task labels
    (label -> host position -> count).
    """

    __slots__ = (
        "views", "names", "capacity", "inv_capacity", "min_capacity", "free", "has_gpu",
        "_index", "_slack", "_port_ranges", "_port_counts", "_port_first", "_label_cache",
        "_by_label",
    )

    def __init__(self, hosts: Sequence[HostView]) -> None:
        views = sorted(hosts, key=attrgetter("name"))
        names = [v.name for v in views]
        if len(set(names)) != len(names):
            dup = next(a for a, b in zip(names, names[1:], strict=False) if a == b)
            raise PlacementInputError(f"duplicate host name {dup!r}")
        self.views: list[HostView] = views
        self.names: tuple[str, ...] = tuple(names)
        self._index: dict[str, int] = {name: i for i, name in enumerate(names)}
        self.capacity = _rows([v.capacity for v in views])
        self.inv_capacity: FloatArray = np.zeros_like(self.capacity)
        self.min_capacity: FloatArray = np.zeros(len(KINDS))
        self.has_gpu: BoolArray = np.zeros(len(views), dtype=bool)
        self._capacity_changed()
        self.free = _rows([v.free for v in views])
        self._slack: FloatArray | None = None
        self._port_ranges: list[tuple[tuple[int, int], ...]] | None = None
        self._port_counts: IntArray | None = None
        self._port_first: IntArray | None = None
        self._label_cache: dict[str, tuple[IntArray, dict[str, int]]] = {}
        self._by_label: dict[str, dict[int, int]] | None = None

    def __len__(self) -> int:
        return len(self.names)

    def position(self, name: str) -> int:
        """The host's position (its column in every array); KeyError if absent."""
        return self._index[name]

    # ---- incremental maintenance (between rounds) --------------------------------------
    def update(self, views: Iterable[HostView]) -> None:
        """Replace the rows of hosts already in the table with their new views (by name;
        the last view of a name wins). Every array and derived index is kept current, so
        the table then places exactly as one built afresh from the same views.

        Raises PlacementInputError for a name not in the table (build a new one).
        """
        latest: dict[int, HostView] = {}
        for v in views:
            pos = self._index.get(v.name)
            if pos is None:
                raise PlacementInputError(f"host {v.name!r} is not in this table")
            latest[pos] = v
        if not latest:
            return
        pos_list = list(latest)
        new = list(latest.values())
        old = [self.views[p] for p in pos_list]
        cols = np.array(pos_list, dtype=np.int64)
        capacity = _rows([v.capacity for v in new])
        if not np.array_equal(capacity, self.capacity[:, cols]):
            self.capacity[:, cols] = capacity
            self._capacity_changed()
        self.free[:, cols] = _rows([v.free for v in new])
        if self._slack is not None:
            self._slack[:, cols] = _rows([v.slack_free for v in new])
        labels_changed = False
        for p, was, now in zip(pos_list, old, new, strict=True):
            self.views[p] = now
            if now.labels is not was.labels and now.labels != was.labels:
                labels_changed = True
            if now.task_label_counts is not was.task_label_counts and self._by_label is not None:
                self._retally(p, was.task_label_counts, now.task_label_counts)
            if self._port_ranges is not None and now.ports_free != was.ports_free:
                ranges = self._port_ranges[p] = _normalised(now.ports_free)
                if self._port_counts is not None:
                    self._port_counts[p] = _count(ranges)
                if self._port_first is not None:
                    self._port_first[:, p] = _first(ranges)
        if labels_changed:
            self._label_cache.clear()

    def _capacity_changed(self) -> None:
        np.divide(1.0, self.capacity, out=self.inv_capacity, where=self.capacity > 0)
        self.inv_capacity[self.capacity <= 0] = 0.0
        self.min_capacity = (
            self.capacity.min(axis=1) if len(self.names) else np.zeros(len(KINDS))
        )
        self.has_gpu = self.capacity[3] > 0

    def _retally(self, pos: int, was: Mapping[str, int], now: Mapping[str, int]) -> None:
        assert self._by_label is not None
        for label in was:
            if label not in now:
                hosts = self._by_label.get(label)
                if hosts is not None:
                    hosts.pop(pos, None)
                    if not hosts:
                        del self._by_label[label]
        for label, count in now.items():
            if count:
                self._by_label.setdefault(label, {})[pos] = count
            else:
                hosts = self._by_label.get(label)
                if hosts is not None:
                    hosts.pop(pos, None)

    def warm_up(self, label_keys: Iterable[str] = ()) -> None:
        """Build every index a round may need now (slack, ports, task labels, the codes
        of ``label_keys``) rather than in the first round that needs it: for a table that
        is kept across rounds."""
        _ = self.slack, self.port_counts, self.port_first
        self._task_label_index()
        for key in label_keys:
            self.label_codes(key)

    # ---- columns built on first use ---------------------------------------------------
    @property
    def slack(self) -> FloatArray:
        """Free slack (revocable) resources, [kind, host]."""
        if self._slack is None:
            self._slack = _rows([v.slack_free for v in self.views])
        return self._slack

    @property
    def port_ranges(self) -> Sequence[tuple[tuple[int, int], ...]]:
        """Per host: sorted, disjoint free port ranges."""
        if self._port_ranges is None:
            self._port_ranges = [_normalised(v.ports_free) for v in self.views]
        return self._port_ranges

    @property
    def port_counts(self) -> IntArray:
        """Per host: number of free ports."""
        if self._port_counts is None:
            counts = [_count(r) for r in self.port_ranges]
            self._port_counts = np.array(counts, dtype=np.int64).reshape(len(counts))
        return self._port_counts

    @property
    def port_first(self) -> IntArray:
        """Per host: the first free port range as rows [begin, end] (end = begin - 1 when
        the host has no free port), for handing out ports without a per-host allocator."""
        if self._port_first is None:
            first = [_first(r) for r in self.port_ranges]
            self._port_first = np.array(first, dtype=np.int64).reshape(len(first), 2).T.copy()
        return self._port_first

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
            raw = [v.labels.get(key) for v in self.views]
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
        """Build the task-label index now if the round will read any task label (one pass
        over every host's counts; `update` keeps it current afterwards)."""
        if labels:
            self._task_label_index()

    def _task_label_index(self) -> dict[str, dict[int, int]]:
        index = self._by_label
        if index is None:
            index = self._by_label = {}
            for i, v in enumerate(self.views):
                for label, count in v.task_label_counts.items():
                    if count:
                        hosts = index.get(label)
                        if hosts is None:
                            index[label] = {i: count}
                        else:
                            hosts[i] = count
        return index

    def task_label_counts(self, label: str) -> IntArray:
        """A fresh array of how many tasks on each host carry task label ``label``."""
        column = np.zeros(len(self.names), dtype=np.int64)
        hosts = self._task_label_index().get(label)
        if hosts:
            column[np.fromiter(hosts.keys(), dtype=np.int64, count=len(hosts))] = \
                np.fromiter(hosts.values(), dtype=np.int64, count=len(hosts))
        return column


def _normalised(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    if len(ranges) < 2 and (not ranges or ranges[0][1] >= ranges[0][0]):
        return ranges
    return merge_ranges(ranges)


def _first(ranges: tuple[tuple[int, int], ...]) -> tuple[int, int]:
    return ranges[0] if ranges else (0, -1)


def _count(ranges: tuple[tuple[int, int], ...]) -> int:
    if len(ranges) == 1:
        return ranges[0][1] - ranges[0][0] + 1
    return sum(e - b + 1 for b, e in ranges)


def take_rows(rows: FloatArray, hosts: IntArray, kinds: IntArray) -> FloatArray:
    """``rows[kinds][:, hosts]`` for a [kind, host] array, the fastest way for the size.

    (``take`` along the host axis of the kinds' rows, sliced when the kinds are
    consecutive, is about twice as fast as a 2-D fancy index at any size.)
    """
    if hosts.size == rows.shape[1]:
        out: FloatArray = rows[kinds]
        return out
    first = int(kinds[0]) if kinds.size else 0
    if kinds.size and int(kinds[-1]) - first == kinds.size - 1:
        out = rows[first:first + kinds.size].take(hosts, axis=1)
    else:
        out = rows.take(hosts, axis=1)[kinds]
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
