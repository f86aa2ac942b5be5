"""Read topics from given offsets (default: the start) to their current end, decoding.

Used by services at start-up (and by a shell rebuilding a core) to bring a core to the
state the log describes before it decides anything. An undecodable record, or one whose
fold raises, is logged (a warning naming topic, partition and offset) and skipped, so a
bad record never stops a restart (the live consumer dead-letters the ones it meets).
Returns the next offset per (topic, partition), so the live consumer skips what replay
already folded. Event types in `skip` are passed over unread (a core's `replay_skips`:
facts whose replay changes nothing, such as heartbeats). A `start` beyond a partition's
end (a snapshot of another log: the topics were recreated) raises `StartBeyondEnd`
before anything is folded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from peloton.bus.codec import Codec, DecodeError
from peloton.bus.devbroker import consumer_settings, log_end_offsets
from peloton.bus.kafkaconfig import client_settings

__all__ = ["replay_topics", "Positions", "StartBeyondEnd"]

log = logging.getLogger(__name__)
Positions = dict[tuple[str, int], int]


class StartBeyondEnd(ValueError):
    """A start position lies past the log end: the positions are of another log."""


async def replay_topics(
    bootstrap: str, topics: list[str], codec: Codec,
    fold: Callable[[str, dict[str, Any]], None],
    progress: Callable[[int], None] | None = None,
    start: Positions | None = None,
    skip: Collection[str] = (),
    takes: Callable[[str, int], bool] | None = None,
) -> Positions:
    """Fold every record of `topics` from `start` (0 where absent) to the log end; with
    `takes`, only the partitions it accepts (a shard of a partitioned service)."""
    start = start or {}
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                auto_offset_reset="earliest", max_partition_fetch_bytes=8 << 20,
                                **consumer_settings(), **client_settings())  # type: ignore[arg-type]
    await consumer.start()
    positions: Positions = {}
    try:
        partitions = [TopicPartition(t, p) for t in topics
                      for p in sorted(consumer.partitions_for_topic(t) or ())
                      if takes is None or takes(t, p)]
        if not partitions:
            return positions
        consumer.assign(partitions)
        ends = await log_end_offsets(consumer, partitions)
        beyond = [f"{tp.topic}[{tp.partition}] {start[(tp.topic, tp.partition)]} > "
                  f"{ends[tp]}" for tp in partitions
                  if start.get((tp.topic, tp.partition), 0) > ends[tp]]
        if beyond:
            raise StartBeyondEnd("positions past the log end: " + ", ".join(beyond))
        for tp in partitions:
            first = start.get((tp.topic, tp.partition), 0)
            consumer.seek(tp, first)
            positions[(tp.topic, tp.partition)] = first
        remaining = {tp for tp in partitions if ends[tp] > positions[(tp.topic, tp.partition)]}
        seen = 0
        while remaining:
            batch = await consumer.getmany(*remaining, timeout_ms=500, max_records=5000)
            for tp, records in batch.items():
                for rec in records:
                    if rec.offset >= ends[tp]:
                        break
                    positions[(tp.topic, tp.partition)] = rec.offset + 1
                    if skip and codec.event_type(rec.value) in skip:
                        continue
                    try:
                        facts = codec.decode_each(rec.value)
                    except DecodeError as exc:
                        log.warning("replay: %s[%d]@%d undecodable, skipped: %s", tp.topic,
                                    tp.partition, rec.offset, exc)
                        continue
                    folded = True
                    for etype, body in facts:
                        try:
                            fold(etype, body)
                        except Exception:  # a core bug must not stop a restart (module doc)
                            log.exception("replay: folding %s at %s[%d]@%d failed, skipped",
                                          etype, tp.topic, tp.partition, rec.offset)
                            folded = False
                    seen += folded
                if positions[(tp.topic, tp.partition)] >= ends[tp]:
                    remaining.discard(tp)
            if progress is not None:
                progress(seen)
        log.info("replayed %d records from %s", seen, ", ".join(topics))
        return positions
    finally:
        await consumer.stop()
