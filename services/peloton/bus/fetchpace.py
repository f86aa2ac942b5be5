"""Reading a topic no more often than it is needed: a paused partition is not fetched.

A consumer fetches again as soon as a fetch brought records, so a partition written to
all the time is fetched tens of times a second by each of its readers, each fetch bringing
a few records. Where a reader does not need a topic's records within milliseconds (the
host manager's shards read job-events whole for specs, kills and ends, and a placement
whose spec comes later already waits for it: `peloton.hostmgr.domain.hosts`), reading it
in fewer, larger batches costs less per record: measured side by side on the dev broker,
the host manager's CPU per task a tenth lower and the broker's a twentieth
(`peloton.bus.devbroker`, docs/performance.md, "A paced wave's drift").

`FetchPacer` keeps the rule, pure: after a fetch brought records of a partition of a paced
topic, that partition is held (the caller pauses it: aiokafka leaves a paused partition out
of its fetches, and keeps what it already fetched for it) until `pace_ms` of its topic have
passed, then released (resumed); every record is still read, in its partition's order,
only in fewer and larger batches. `paced_getmany` is one turn of a reading loop with it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

__all__ = ["FetchPacer", "paced_getmany"]

#: (topic, partition)
Part = tuple[str, int]


class FetchPacer:
    """Which partitions a reader holds back, and until when (module doc). Pure: the time
    is the caller's (ms)."""

    def __init__(self, pace_ms: Mapping[str, int]) -> None:
        self.pace_ms = {t: ms for t, ms in pace_ms.items() if ms > 0}
        self.held: dict[Part, int] = {}  # partition -> when it is released

    def took(self, part: Part, now_ms: int) -> bool:
        """A fetch brought records of `part` at `now_ms`: True if it is to be held (its
        topic is paced and it is not held already)."""
        pace = self.pace_ms.get(part[0])
        if not pace or part in self.held:
            return False
        self.held[part] = now_ms + pace
        return True

    def due(self, now_ms: int) -> list[Part]:
        """The held partitions whose time has come, released (no longer held)."""
        out = [p for p, until in self.held.items() if until <= now_ms]
        for p in out:
            del self.held[p]
        return out

    def wait_ms(self, now_ms: int, cap_ms: int) -> int:
        """How long a read may wait before the next release is due (at most `cap_ms`)."""
        if not self.held:
            return cap_ms
        return max(0, min(cap_ms, min(self.held.values()) - now_ms))


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


async def paced_getmany(consumer: Any, pacer: FetchPacer, timeout_ms: int,
                        max_records: int) -> dict[Any, list[Any]]:
    """One read of an aiokafka `consumer` under `pacer`: resumes the partitions due, waits
    at most until the next is due (or `timeout_ms`), and pauses the paced partitions the
    read brought records of."""
    from aiokafka import TopicPartition

    due = pacer.due(_now_ms())
    if due:
        consumer.resume(*(TopicPartition(t, p) for t, p in due))
    batch: dict[Any, list[Any]] = await consumer.getmany(
        timeout_ms=pacer.wait_ms(_now_ms(), timeout_ms), max_records=max_records)
    now = _now_ms()
    held = [tp for tp, recs in batch.items() if recs and pacer.took((tp.topic, tp.partition), now)]
    if held:
        consumer.pause(*held)
    return batch
