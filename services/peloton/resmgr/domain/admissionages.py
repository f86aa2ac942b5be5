"""The runs admitted and not READY yet, by the time of their latest admission (pure).

The resource manager trusts an admission the job manager has not used for
`unused_admission_ms` after it (see cycle.py); after that the run counts as pending again.
In a burst most admitted runs are waiting for the job manager, and all of them are
trusted: only the few whose latest admission is older than the cut-off need a look. This
index answers `lapsed(cutoff)` (the runs whose latest admission is at or before `cutoff`)
in O(lapsed log n), not O(admitted runs), so a tick stays cheap with 100,000 of them.

It is a heap of (latest admission, run) with lazy deletion: `note` says a run's latest
admission (or None: the run is no longer admitted-and-unused); an item whose time is no
longer the run's is dropped when it reaches the top. A query pops what is due and pushes
back what is still current; when stale items outnumber the current ones the heap is
rebuilt from them (amortised O(1) per note), so it holds O(runs admitted and unused) even
where nothing queries it (a standby that only folds). The answer depends only on
what was noted, not on the order of queries or their cut-offs (a later cut-off may be
smaller: nothing is forgotten by a query).
"""

from __future__ import annotations

import heapq
from typing import Any, Generic, TypeVar

__all__ = ["AdmissionAges"]

K = TypeVar("K", bound=Any)  # a run's key: hashable and ordered (the ledger's TaskKey)
_SLACK = 64  # stale items tolerated beyond as many as there are current ones


class AdmissionAges(Generic[K]):
    def __init__(self) -> None:
        self._at: dict[K, int] = {}  # run -> its latest admission
        self._heap: list[tuple[int, K]] = []

    def __len__(self) -> int:
        return len(self._at)

    def note(self, key: K, at: int | None) -> None:
        """Run `key`'s latest admission is `at` (None: it is not admitted-and-unused)."""
        if at is None:
            self._at.pop(key, None)
        elif self._at.get(key) != at:
            self._at[key] = at
            heapq.heappush(self._heap, (at, key))
        if len(self._heap) > 2 * len(self._at) + _SLACK:
            self._heap = [(t, k) for k, t in self._at.items()]
            heapq.heapify(self._heap)

    def lapsed(self, cutoff: int) -> list[K]:
        """The runs whose latest admission is at or before `cutoff`, in key order."""
        heap, current = self._heap, self._at
        due: set[K] = set()
        while heap and heap[0][0] <= cutoff:
            at, key = heapq.heappop(heap)
            if current.get(key) == at:
                due.add(key)
        for key in due:  # still current: back for later queries
            heapq.heappush(heap, (current[key], key))
        return sorted(due)
