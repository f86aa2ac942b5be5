"""The producer a shell writes with: every send is awaited until the broker has it.

`publish(events)` encodes every event first (`encode`: a body that does not match its
schema raises `EncodeError` before anything is sent), then sends them in order with the key
the catalog declares (`peloton.bus.keys`) and returns when every record is delivered, with
the (topic, partition, offset) of each record sent. `send_all` hands every record to the producer
without waiting for each, then awaits all deliveries once (a batch costs one round trip).
A delivery failure raises `PublishError`, which says whether the broker may take the
records if sent again (`retriable`).

A job's TaskStateChanged is written as its part version, and `send_all` joins the parts
it sends together into one record per partition (`peloton.bus.coalesce`): the readers of
job-events pay per record, and a decided batch changes tasks of many jobs.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, KafkaTimeoutError

from peloton.bus.coalesce import TOPIC as JOINED_TOPIC
from peloton.bus.coalesce import Placed, coalesce, joiner_for, write_version
from peloton.bus.codec import Codec
from peloton.bus.devbroker import producer_settings
from peloton.bus.kafkaconfig import client_settings
from peloton.bus.keys import record_target
from peloton.bus.routing import partition_for
from peloton.model.event import Event

__all__ = ["Publisher", "PublishError", "Delivered", "LINGER_MS", "encode_events", "retriable"]

#: how long the producer waits to fill a request. `_send_now` cuts it short once a
#: decision's records are all handed over; until then a batch that fills wakes aiokafka's
#: sender early, and the linger keeps the other partitions' batches for the same request
#: rather than a request of their own. Each produce request costs the broker
#: far more than its records (the dev broker: about a millisecond); side by side at
#: 10,000 simulated hosts, 10 ms against 2 ms: a 20,000-task burst 1,940-1,973 against
#: 1,751-1,797 tasks/s, CPU per 1,000 tasks paced at ~1,000 tasks/s 1.73-1.81 against
#: 1.85-1.91 s, p99 submit -> RUNNING there 0.67-0.82 against 0.66-0.95 s (p50 +40 ms).
LINGER_MS = 10
#: the most bytes of one partition's records in one batch (aiokafka's default is 16 KiB).
#: A request carries one batch per partition and aiokafka keeps one request in flight
#: per broker, so a decision that wrote more than a batch to a partition (a joined
#: TaskStateChanged alone may hold 256 KiB, `coalesce.MAX_BYTES`) went out in as many
#: round trips, one after the other, and `send` waited for each full batch to drain
MAX_BATCH_BYTES = 1 << 20

Delivered = tuple[str, int, int]


def encode_events(codec: Codec, events: Sequence[Event]) -> list[tuple[str, bytes, bytes]]:
    """The (topic, key, value) records of `events` as the shell writes them (a single
    job's TaskStateChanged as its part version, `peloton.bus.coalesce`); raises
    `EncodeError` (or `KeyError` for a type no topic carries)."""
    return [(*record_target(ev), codec.encode(ev.type, ev.body, write_version(ev.type, ev.body)))
            for ev in events]


def key_partitioner(key: bytes | None, all_partitions: list[int],
                    available: list[int]) -> int:
    """aiokafka's default partitioner with `partition_for`'s memory (`partitioner=` of a
    producer): a keyed record goes to murmur2(key) mod the topic's partition count, a
    keyless one to a random available partition."""
    if key is None:
        return random.choice(available or all_partitions)
    return all_partitions[partition_for(key, len(all_partitions))]


async def _send_now(producer: AIOKafkaProducer) -> None:
    """Send what `producer` holds now instead of after its linger: the caller awaits
    every delivery before it sends anything more, so nothing would join the batches while
    they linger (LINGER_MS only added its 10 ms to every decision's delivery). Closes the
    open batches and wakes aiokafka's sender: its accumulator's `flush_for_commit`, which
    its transactions use, in every aiokafka pyproject.toml admits (a private method:
    tests/bus/test_bus_publisher_sendnow.py fails if an upgrade drops or changes it)."""
    await producer._message_accumulator.flush_for_commit()


class PublishError(RuntimeError):
    """The broker did not take a record (the events may be partly in the log).
    `retriable`: the broker may take it later (a timeout, a partition's leader moving, a
    lost connection), as opposed to a refusal of the records themselves (too large,
    not authorized, or an error the broker does not name)."""

    def __init__(self, message: str, retriable: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable


def retriable(exc: KafkaError) -> bool:
    """Whether the broker may take what it refused with `exc` if sent again: the errors
    aiokafka marks retriable, and a delivery that timed out (`KafkaTimeoutError`, not
    marked: the record's fate is unknown, and a decision sent again is decided anew)."""
    return bool(getattr(exc, "retriable", False)) or isinstance(exc, KafkaTimeoutError)


class Publisher:
    def __init__(self, bootstrap: str, codec: Codec) -> None:
        self.bootstrap = bootstrap
        self.codec = codec
        self._producer: AIOKafkaProducer | None = None
        self._joiner = joiner_for(codec)
        #: called with every batch the broker acknowledged (the shell counts them)
        self.on_delivered: Callable[[list[Delivered]], None] | None = None

    async def start(self) -> None:
        if self._producer is None:
            producer = AIOKafkaProducer(
                bootstrap_servers=self.bootstrap, linger_ms=LINGER_MS, max_request_size=16 << 20,
                max_batch_size=MAX_BATCH_BYTES, partitioner=key_partitioner,
                **producer_settings(), **client_settings())  # type: ignore[arg-type]
            await producer.start()
            self._producer = producer

    async def stop(self) -> None:
        if self._producer is not None:
            producer, self._producer = self._producer, None
            await producer.stop()

    def encode(self, events: Sequence[Event]) -> list[tuple[str, bytes, bytes]]:
        """The (topic, key, value) records of `events`; raises `EncodeError` (or
        `KeyError` for a type no topic carries) before anything is sent."""
        return encode_events(self.codec, events)

    async def publish(self, events: Sequence[Event]) -> list[Delivered]:
        return await self.send_all(self.encode(events))

    async def send_all(self, records: Sequence[tuple[str, bytes, bytes]]) -> list[Delivered]:
        """Send raw (topic, key, value) records in order; return once all are delivered."""
        await self.start()
        producer = self._producer
        assert producer is not None
        try:
            placed: Sequence[Placed]
            if any(t == JOINED_TOPIC for t, _, _ in records):
                known = producer.client.cluster.partitions_for_topic(JOINED_TOPIC)
                if known is None:
                    known = await producer.partitions_for(JOINED_TOPIC)  # metadata, once
                count = len(known) if known else None
                placed = coalesce(records, self._joiner,
                                  lambda name: count if name == JOINED_TOPIC else None)
            else:
                placed = [(t, k, v, None) for t, k, v in records]
            futures: list[Any] = [await producer.send(t, value=v, key=k, partition=p)
                                  for t, k, v, p in placed]
            await _send_now(producer)
            metas = await asyncio.gather(*futures)
        except KafkaError as exc:
            raise PublishError(f"{type(exc).__name__}: {exc}", retriable(exc)) from exc
        delivered = [(m.topic, m.partition, m.offset) for m in metas]
        if self.on_delivered is not None:
            self.on_delivered(delivered)
        return delivered

    async def flush(self) -> None:
        if self._producer is not None:
            await self._producer.flush()
