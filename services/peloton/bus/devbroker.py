"""Client shims for the dev/test broker (Tansu), in one place, used only against it.

Measured gaps (see docs/dev-stack.md):
- ListOffsets "latest" answers the first offset of the last batch + 1, not the log end.
  `log_end_offsets` instead fetches and reads the high watermark from the fetch response,
  which Tansu reports correctly. Against Apache Kafka `consumer.end_offsets` is exact.
- InitProducerId v0 is rejected, so idempotent producers are off on the dev broker
  (`producer_settings`). Transactions are not real there (aborted records stay visible),
  so nothing here relies on them.
"""

from __future__ import annotations

import asyncio
import os

from aiokafka import AIOKafkaConsumer, TopicPartition

__all__ = ["is_dev_broker", "log_end_offsets", "producer_settings"]


def is_dev_broker() -> bool:
    """True unless PELOTON_BROKER_KIND=kafka (production sets it)."""
    return os.environ.get("PELOTON_BROKER_KIND", "tansu") != "kafka"


def producer_settings() -> dict[str, object]:
    if is_dev_broker():
        return {"enable_idempotence": False, "acks": 1}
    return {"enable_idempotence": True, "acks": "all"}


async def log_end_offsets(
    consumer: AIOKafkaConsumer, partitions: list[TopicPartition]
) -> dict[TopicPartition, int]:
    """The true end offset of each partition (the next offset to be written)."""
    if not is_dev_broker():
        return dict(await consumer.end_offsets(partitions))
    ends: dict[TopicPartition, int] = {}
    for tp in partitions:
        consumer.seek(tp, 0)
    pending = set(partitions)
    deadline = asyncio.get_running_loop().time() + 10.0
    while pending and asyncio.get_running_loop().time() < deadline:
        await consumer.getmany(*pending, timeout_ms=200, max_records=1)
        for tp in list(pending):
            hw = consumer.highwater(tp)
            if hw is not None:
                ends[tp] = hw
                pending.discard(tp)
    for tp in pending:  # an empty partition whose fetch never answered
        ends[tp] = 0
    return ends
