"""The batch intake (`peloton.bus.intake`) in a real Faust app on the real dev broker:
records come in partition order, in batches of at most `batch_max`, and the consumer
group's committed offset passes a record only after the handler of its batch returned."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from faust.types import TP as FaustTP

from peloton.bus import intake
from peloton.bus.devbroker import consumer_settings
from peloton.bus.driver import Record
from peloton.bus.faustapp import ensure_topics, make_app
from peloton.bus.intake import BatchChannel, add_intake

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

TOPIC = "job-submitted"
TP = TopicPartition(TOPIC, 0)


async def _produce(broker: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=broker, enable_idempotence=False, acks=1)
    await producer.start()
    try:
        for v in values:
            await producer.send_and_wait(TOPIC, value=v, key=b"k", partition=0)
    finally:
        await producer.stop()


async def _committed(broker: str, group: str) -> int | None:
    consumer = AIOKafkaConsumer(bootstrap_servers=broker, group_id=group,
                                enable_auto_commit=False, **consumer_settings())
    await consumer.start()
    try:
        return await consumer.committed(TP)
    finally:
        await consumer.stop()


async def _until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_batches_in_order_and_a_commit_only_after_the_handler(fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    await _produce(fresh_broker, [str(i).encode() for i in range(300)])
    group = "peloton-intake-test"
    app = make_app(group, fresh_broker)
    batches: list[list[Record]] = []
    gate = asyncio.Event()

    async def handle(records: list[Record]) -> None:
        batches.append(records)
        if len(batches) == 1:
            await gate.wait()  # the first batch's decisions are not published yet

    add_intake(app, TOPIC, "test", handle, batch_max=50)
    await app.start()
    try:
        await _until(lambda: bool(batches))
        await asyncio.sleep(2.0)  # four commit intervals pass while the handler waits
        assert len(batches) == 1
        assert await _committed(fresh_broker, group) in (None, -1, 0)
        gate.set()
        await _until(lambda: sum(map(len, batches)) >= 300)
        seen = [r for b in batches for r in b]
        assert [int(r[4] or b"") for r in seen if r[1] == 0] == list(range(300))
        assert [r[2] for r in seen] == list(range(300))
        assert max(map(len, batches)) <= 50 and len(batches) >= 6
        # Faust's consumer logs a partition whose stream never moved as stuck
        assert FaustTP(TOPIC, 0) in app.monitor.stream_inbound_time
        deadline = time.monotonic() + 20
        while await _committed(fresh_broker, group) != 300:
            assert time.monotonic() < deadline, "never committed to the end"
            await asyncio.sleep(0.3)
    finally:
        gate.set()
        await app.stop()


async def test_a_failed_batch_stops_the_service_before_its_records_are_committed(
        fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    group = "peloton-intake-fail"
    app = make_app(group, fresh_broker)
    handled: list[int] = []

    async def handle(records: list[Record]) -> None:
        if any(r[4] == b"bad" for r in records):
            raise RuntimeError("a bug in the shell")
        handled.extend(r[2] for r in records)

    add_intake(app, TOPIC, "test", handle, batch_max=10)
    await app.start()
    try:
        await _produce(fresh_broker, [b"ok"] * 5)
        await _until(lambda: len(handled) == 5)
        deadline = time.monotonic() + 20
        while await _committed(fresh_broker, group) != 5:
            assert time.monotonic() < deadline, "the good records were never committed"
            await asyncio.sleep(0.3)
        await _produce(fresh_broker, [b"bad"] + [b"ok"] * 5)
        await _until(lambda: app.crashed)
        assert isinstance(app.crash_reason, RuntimeError)
        await asyncio.sleep(1.5)
        assert handled == list(range(5))  # nothing after the failed record was taken
        assert await _committed(fresh_broker, group) == 5  # a restart reads it again
    finally:
        await app.stop()


def _batch_channel(app: object) -> BatchChannel:
    found = [c for c in app.topics if isinstance(c, BatchChannel)]  # type: ignore[attr-defined]
    assert len(found) == 1
    return found[0]


async def test_a_full_buffer_pauses_the_partition_and_loses_nothing(fresh_broker: str) -> None:
    """The consumer hands a partition's fetch to the buffer at once (intake.py); a slow
    handler still pauses that partition's fetching under pressure, the buffer never holds
    more than its size, fetching resumes, and every record arrives once, in order."""
    await ensure_topics(fresh_broker)
    await _produce(fresh_broker, [str(i).encode() for i in range(400)])
    app = make_app("peloton-intake-pressure", fresh_broker, stream_buffer_maxsize=40)
    seen: list[int] = []
    paused: list[bool] = []
    sizes: list[int] = []

    async def handle(records: list[Record]) -> None:
        queue = _batch_channel(app).queue
        sizes.append(queue.qsize())
        paused.append(FaustTP(TOPIC, 0) in app.consumer._buffered_partitions)
        seen.extend(int(r[4] or b"") for r in records)
        await asyncio.sleep(0.01)

    add_intake(app, TOPIC, "test", handle, batch_max=5)
    await app.start()
    try:
        await _until(lambda: len(seen) >= 400, timeout=60)
        await asyncio.sleep(0.5)
        assert seen == list(range(400))
        assert any(paused), "the partition was never paused under pressure"
        assert max(sizes) <= 40
        assert FaustTP(TOPIC, 0) not in app.consumer._buffered_partitions  # resumed
    finally:
        await app.stop()


async def test_a_partition_with_another_subscriber_goes_through_faust(
        fresh_broker: str) -> None:
    """A topic an agent reads as well is delivered record by record through Faust's
    conductor: the agent and the intake each see every record, and the offset is
    committed once both have taken it."""
    await ensure_topics(fresh_broker)
    await _produce(fresh_broker, [str(i).encode() for i in range(200)])
    group = "peloton-intake-shared"
    app = make_app(group, fresh_broker)
    batched: list[int] = []
    streamed: list[int] = []

    async def handle(records: list[Record]) -> None:
        batched.extend(int(r[4] or b"") for r in records)

    add_intake(app, TOPIC, "test", handle, batch_max=50)
    agent_topic = app.topic(TOPIC, key_type=bytes, value_type=bytes, key_serializer="raw",
                            value_serializer="raw")

    @app.agent(agent_topic)
    async def read(stream: object) -> None:
        async for value in stream:  # type: ignore[attr-defined]
            streamed.append(int(value))

    await app.start()
    try:
        await _until(lambda: len(batched) >= 200 and len(streamed) >= 200)
        assert batched == list(range(200)) and streamed == list(range(200))
        deadline = time.monotonic() + 20
        while await _committed(fresh_broker, group) != 200:
            assert time.monotonic() < deadline, "never committed to the end"
            await asyncio.sleep(0.3)
    finally:
        await app.stop()


async def test_the_fetch_loop_finds_every_faust_internal_it_uses(fresh_broker: str) -> None:
    app = make_app("peloton-intake-internals", fresh_broker)
    assert intake.faust_internals_missing(app.consumer) == []


async def test_another_faust_gets_faust_own_loop_and_loses_nothing(
        fresh_broker: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A Faust lacking an internal the fetch loop uses (simulated: one more name) keeps
    its own loop, record by record: every record still arrives, in order, once."""
    monkeypatch.setattr(intake, "_CONSUMER_INTERNALS",
                        (*intake._CONSUMER_INTERNALS, "_not_in_this_faust"))
    await ensure_topics(fresh_broker)
    await _produce(fresh_broker, [str(i).encode() for i in range(200)])
    app = make_app("peloton-intake-other-faust", fresh_broker)
    seen: list[int] = []

    async def handle(records: list[Record]) -> None:
        seen.extend(int(r[4] or b"") for r in records)

    add_intake(app, TOPIC, "test", handle, batch_max=50)
    await app.start()
    try:
        await _until(lambda: len(seen) >= 200)
        await asyncio.sleep(0.5)
        assert seen == list(range(200))
        assert "lacks _not_in_this_faust" in caplog.text
    finally:
        await app.stop()
