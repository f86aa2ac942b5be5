"""The event heap: events ordered by (time, priority, sequence), so runs are deterministic.

Two events at the same simulated time run in `Kind` order (a host failure before the
scheduling cycle that would otherwise place work on it), and events of the same kind
and time in the order they were pushed. Nothing here reads a clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

__all__ = ["Kind", "Event", "EventQueue", "BATCH_STREAM", "schedule_start"]

BATCH_STREAM = -1
"""The payload of a JOB_SUBMITTED that is the batch workload's next arrival (not a job)."""


class Kind(IntEnum):
    """Event kinds; the value is the tie-break priority at equal times (lower first)."""

    HOST_FAILED = 0
    HOST_RETURNED = 1
    JOB_ENDED = 2
    JOB_SUBMITTED = 3
    CYCLE = 4


@dataclass(frozen=True, slots=True)
class Event:
    time: float
    kind: Kind
    seq: int
    payload: int
    """A host index, job index or cycle number, depending on the kind."""


class EventQueue:
    """A min-heap of events; `push` returns the event, `pop` the earliest one."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, int]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, time: float, kind: Kind, payload: int = 0) -> Event:
        self._seq += 1
        heapq.heappush(self._heap, (time, int(kind), self._seq, payload))
        return Event(time, kind, self._seq, payload)

    def peek_time(self) -> float:
        return self._heap[0][0] if self._heap else float("inf")

    def pop(self) -> Event:
        time, kind, seq, payload = heapq.heappop(self._heap)
        return Event(time, Kind(kind), seq, payload)


def schedule_start(events: EventQueue, duration_s: float, submits: Sequence[float],
                   first_batch: float | None, host_mtbf_s: float, hosts: int,
                   failures: np.random.Generator) -> None:
    """The events a run starts with (both engines): each initial job's submission (payload:
    its index) within the run, the batch workload's first arrival, cycle 0, and each
    host's first failure (exponential with mean `host_mtbf_s`, drawn from `failures`)."""
    for i, submit_s in enumerate(submits):
        if submit_s <= duration_s:
            events.push(submit_s, Kind.JOB_SUBMITTED, i)
    if first_batch is not None:
        events.push(first_batch, Kind.JOB_SUBMITTED, BATCH_STREAM)
    events.push(0.0, Kind.CYCLE, 0)
    if host_mtbf_s > 0:
        for h, t in enumerate(failures.exponential(host_mtbf_s, hosts).tolist()):
            if t <= duration_s:
                events.push(t, Kind.HOST_FAILED, h)
