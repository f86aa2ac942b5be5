"""`Ledger.sums` recomputed over every live run, not from the ledger's indexes (shared by
the resource manager's tests)."""

from __future__ import annotations

from typing import Any

from peloton.resmgr.domain.ledger import ADMITTED, HELD, PENDING, Ledger, bucket, micro


def usage_class(entry: Any) -> int | None:
    """The class a run counts in: PENDING (demand), ADMITTED (admitted, not READY yet),
    HELD (every other holding run), or None."""
    if entry.pending:
        return PENDING
    if entry.admitted:
        return ADMITTED
    return HELD if entry.holding else None


def from_scratch_sums(ledger: Ledger) -> tuple[dict[Any, list[int]], ...]:
    sums: tuple[dict[Any, list[int]], ...] = ({}, {}, {})
    for entry in ledger.tasks.values():
        cls = usage_class(entry)
        if cls is None:
            continue
        cell = sums[cls].setdefault(bucket(entry), [0, 0, 0, 0, 0])
        cell[0] += 1
        for i, v in enumerate(micro(entry.resources)):
            cell[i + 1] += v
    return sums
