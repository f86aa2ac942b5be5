"""Consumer lag of a Faust app, per assigned partition, into `peloton_consumer_lag_records`.

`HandledOffsets` is what a shell has handled: the next offset per (topic, partition),
noted after each batch. `sample_lag` (call it from a Faust timer, on the app's loop) sets,
for every partition the consumer holds, the partition's high watermark (from the
consumer's last fetch) minus that next offset; for a partition with nothing handled since
the start, the consumer's own position stands in. Partitions without a known high
watermark yet (nothing fetched) are left out; partitions no longer assigned are removed.
Never raises for a consumer that is not started or a partition that was just revoked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiokafka.errors import KafkaError
from faust.exceptions import FaustError

from peloton.bus.metrics import CONSUMER_LAG, GaugeFamily

__all__ = ["HandledOffsets", "sample_lag", "LAG_SAMPLE_S"]

LAG_SAMPLE_S = 5.0  # how often the shells sample lag (seconds)

_NOT_READY = (FaustError, KafkaError, AssertionError)


class HandledOffsets:
    def __init__(self) -> None:
        self.next: dict[tuple[str, int], int] = {}

    def note(self, records: Sequence[tuple[str, int, int]]) -> None:
        """Records (topic, partition, offset) handled; keeps the highest next offset."""
        for topic, partition, offset in records:
            tp = (topic, partition)
            if offset + 1 > self.next.get(tp, -1):
                self.next[tp] = offset + 1


_FAMILIES: dict[str, GaugeFamily] = {}


async def sample_lag(app: Any, service: str, handled: HandledOffsets) -> dict[str, int]:
    """Set the lag gauges of `service` from `app.consumer`; returns them by "topic/p"."""
    consumer = app.consumer
    try:
        assigned = sorted(consumer.assignment())
    except _NOT_READY:
        return {}
    lags: dict[tuple[str, ...], float] = {}
    for tp in assigned:
        try:
            high = consumer.highwater(tp)
            position = handled.next.get((tp.topic, tp.partition))
            if position is None:
                position = await consumer.position(tp)
        except _NOT_READY:  # revoked meanwhile, or the consumer stopped
            continue
        if high is None or position is None:
            continue
        lags[(tp.topic, str(tp.partition))] = float(max(0, high - position))
    _FAMILIES.setdefault(service, GaugeFamily(CONSUMER_LAG, service)).replace(lags)
    return {f"{t}/{p}": int(v) for (t, p), v in lags.items()}
