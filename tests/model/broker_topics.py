"""A topic of a test's own on a real broker (the catalog's come from `ensure_topics`), and
events written to topics as a service would; shared by the bus and minicluster tests
(tests/model is on pytest's pythonpath)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from peloton.bus.codec import default_codec
from peloton.bus.devbroker import consumer_settings, log_end_offsets, producer_settings


@contextlib.asynccontextmanager
async def reader_and_writer(bootstrap: str, partitions: list[TopicPartition],
                            ) -> AsyncIterator[tuple[AIOKafkaConsumer, AIOKafkaProducer]]:
    """A started consumer assigned `partitions` (no group, from the earliest offset) and a
    started producer, with the dev broker's settings as the environment has them now; both
    stopped after."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                auto_offset_reset="earliest", **consumer_settings())  # type: ignore[arg-type]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **producer_settings())  # type: ignore[arg-type]
    await consumer.start()
    await producer.start()
    try:
        consumer.assign(partitions)
        yield consumer, producer
    finally:
        await consumer.stop()
        await producer.stop()


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()


async def produce(bootstrap: str, records: list[tuple[str, bytes, bytes]]) -> None:
    """Write raw (topic, key, value) records, in order, each acknowledged."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **producer_settings())  # type: ignore[arg-type]
    await producer.start()
    try:
        for topic, key, value in records:
            await producer.send_and_wait(topic, value=value, key=key)
    finally:
        await producer.stop()


async def publish_events(bootstrap: str,
                         records: list[tuple[str, str, dict[str, Any], str]]) -> None:
    """Write (topic, event type, body, key) records, encoded, in order, each acknowledged."""
    codec = default_codec()
    await produce(bootstrap, [(topic, key.encode(), codec.encode(etype, body))
                              for topic, etype, body, key in records])


async def commit_ends(bootstrap: str, group: str, topic: str) -> None:
    """Commit, as consumer group `group`, the end of every partition of `topic` that holds
    records (what a service that took all of them would have committed)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                enable_auto_commit=False, **consumer_settings())  # type: ignore[arg-type]
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p)
                 for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(parts)
        ends = await log_end_offsets(consumer, parts)
        await consumer.commit({tp: end for tp, end in ends.items() if end})
    finally:
        await consumer.stop()
