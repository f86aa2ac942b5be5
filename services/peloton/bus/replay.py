"""Read whole topics from the start to their current end, decoding every record.

Used by services at start-up to rebuild their state from the event log before they decide
anything. Undecodable records are skipped here (the live consumer dead-letters them).
Returns the next offset per (topic, partition), so the live consumer skips what replay
already folded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from peloton.bus.codec import Codec, DecodeError
from peloton.bus.devbroker import consumer_settings, log_end_offsets

__all__ = ["replay_topics", "Positions"]

log = logging.getLogger(__name__)
Positions = dict[tuple[str, int], int]


async def replay_topics(
    bootstrap: str, topics: list[str], codec: Codec,
    fold: Callable[[str, dict[str, Any]], None],
    progress: Callable[[int], None] | None = None,
) -> Positions:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                auto_offset_reset="earliest", max_partition_fetch_bytes=8 << 20,
                                **consumer_settings())  # type: ignore[arg-type]
    await consumer.start()
    positions: Positions = {}
    try:
        partitions = [TopicPartition(t, p) for t in topics
                      for p in sorted(consumer.partitions_for_topic(t) or ())]
        if not partitions:
            return positions
        consumer.assign(partitions)
        ends = await log_end_offsets(consumer, partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
            positions[(tp.topic, tp.partition)] = 0
        remaining = {tp for tp in partitions if ends[tp] > 0}
        seen = 0
        while remaining:
            batch = await consumer.getmany(*remaining, timeout_ms=500, max_records=5000)
            for tp, records in batch.items():
                for rec in records:
                    if rec.offset >= ends[tp]:
                        break
                    positions[(tp.topic, tp.partition)] = rec.offset + 1
                    try:
                        etype, body = codec.decode(rec.value)
                    except DecodeError:
                        continue
                    fold(etype, body)
                    seen += 1
                if positions[(tp.topic, tp.partition)] >= ends[tp]:
                    remaining.discard(tp)
            if progress is not None:
                progress(seen)
        log.info("replayed %d records from %s", seen, ", ".join(topics))
        return positions
    finally:
        await consumer.stop()
