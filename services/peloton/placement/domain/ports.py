"""Dynamic host ports: normalised free ranges and a deterministic allocator.

Ranges are inclusive ``(begin, end)`` pairs as hosts advertise them. `merge_ranges`
sorts them and joins overlapping or touching ones, so a port is never counted or handed
out twice. `PortPool.take` always hands out the lowest free ports, so the same round
gives the same port numbers.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["merge_ranges", "PortPool"]


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sorted, disjoint, non-touching ranges; empty ranges (end < begin) dropped."""
    merged: list[list[int]] = []
    for begin, end in sorted((int(b), int(e)) for b, e in ranges if e >= b):
        if merged and begin <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([begin, end])
    return tuple((b, e) for b, e in merged)


class PortPool:
    """The free ports of one host during one round."""

    __slots__ = ("_ranges",)

    def __init__(self, ranges: tuple[tuple[int, int], ...]) -> None:
        self._ranges: list[list[int]] = [[b, e] for b, e in ranges]

    def take(self, n: int) -> list[int]:
        """The ``n`` lowest free ports, removed from the pool. Caller checked the count."""
        first = self._ranges[0]
        begin = first[0]
        if begin + n <= first[1]:  # the common case: the first range has room to spare
            first[0] = begin + n
            return list(range(begin, begin + n))
        out: list[int] = []
        while len(out) < n:
            first = self._ranges[0]
            k = min(n - len(out), first[1] - first[0] + 1)
            out.extend(range(first[0], first[0] + k))
            if first[0] + k > first[1]:
                self._ranges.pop(0)
            else:
                first[0] += k
        return out

    def give_back(self, ports: Iterable[int]) -> None:
        """Return ports taken earlier (an unreserved gang)."""
        pairs = [(b, e) for b, e in self._ranges] + [(p, p) for p in ports]
        self._ranges = [[b, e] for b, e in merge_ranges(pairs)]
