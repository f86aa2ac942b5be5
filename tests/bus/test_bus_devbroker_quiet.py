"""Quiet partitions fetched less often from the dev broker (peloton.bus.devbroker).

The dev broker polls while a fetch waits and charges each partition a fetch names, records
or none; a partition that gave no record for `QUIET_AFTER_S` is named only every
`QUIET_EVERY_S`, the others in every fetch, and a fetch naming only quiet partitions asks
for `BROKER_WAIT_MS`. The rule alone (hypothesis), then a consumer on a real broker: a busy
partition is named in every fetch, the idle ones about every `QUIET_EVERY_S`, and a record
written to an idle partition still arrives, late by at most about that.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.protocol.fetch import FetchRequest
from broker_topics import create_topic
from hypothesis import given
from hypothesis import strategies as st

from peloton.bus import devbroker
from peloton.bus.devbroker import FetchPace, consumer_settings, producer_settings

times = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)
gaps = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)
AFTER, EVERY = 2.0, 0.1


def pace() -> FetchPace:
    return FetchPace(quiet_after_s=AFTER, quiet_every_s=EVERY)


@given(times)
def test_a_partition_never_named_is_due_at_once(now: float) -> None:
    assert pace().due_in("p", now) == 0.0


@given(times, gaps, st.none() | gaps)
def test_a_busy_partition_is_due_in_every_fetch_a_quiet_one_every_quiet_every_s(
        named_at: float, gap: float, since_records: float | None) -> None:
    rule = pace()
    if since_records is not None:
        rule.gave_records("p", named_at - since_records)
    rule.named("p", named_at)
    now = named_at + gap
    busy = since_records is not None and now - (named_at - since_records) < AFTER
    assert rule.busy("p", now) == busy
    if busy:
        assert rule.due_in("p", now) == 0.0
    else:
        assert rule.due_in("p", now) == pytest.approx(max(0.0, named_at + EVERY - now))
        assert 0.0 <= rule.due_in("p", now) <= EVERY + 1e-9


def test_forget_makes_partitions_of_an_old_assignment_due_again() -> None:
    rule = pace()
    for p in ("a", "b"):
        rule.named(p, 10.0)
    rule.forget({"a"})
    assert rule.due_in("a", 10.01) > 0.0
    assert rule.due_in("b", 10.01) == 0.0


def test_the_defaults_are_read_when_the_rule_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devbroker, "QUIET_EVERY_S", 0.7)
    monkeypatch.setattr(devbroker, "QUIET_AFTER_S", 3.0)
    assert (FetchPace().quiet_every_s, FetchPace().quiet_after_s) == (0.7, 3.0)


def _count_named(consumer: AIOKafkaConsumer, waits: list[int]) -> Counter[int]:
    """Partitions named by the consumer's fetch requests, counted per partition (and the
    broker wait each request asks for, in `waits`)."""
    named: Counter[int] = Counter()
    client = consumer._client
    send = client.send

    async def counting_send(node_id: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(request, FetchRequest):
            waits.append(request._max_wait_ms)
            for _topic, partitions in request.topics:
                named.update(p[0] for p in partitions)
        return await send(node_id, request, *args, **kwargs)

    client.send = counting_send
    return named


@pytest.mark.integration
@pytest.mark.timeout(60)
async def test_idle_partitions_are_named_less_often_and_their_records_still_arrive(
        fresh_broker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PELOTON_BROKER_KIND", "tansu")
    monkeypatch.setattr(devbroker, "QUIET_AFTER_S", 0.3)
    monkeypatch.setattr(devbroker, "QUIET_EVERY_S", 0.2)
    await create_topic(fresh_broker, "quiet-test", 4)
    producer = AIOKafkaProducer(bootstrap_servers=fresh_broker, **producer_settings())
    consumer = AIOKafkaConsumer(bootstrap_servers=fresh_broker, enable_auto_commit=False,
                                auto_offset_reset="earliest", **consumer_settings())
    await producer.start()
    await consumer.start()
    try:
        consumer.assign([TopicPartition("quiet-test", p) for p in range(4)])
        got: list[tuple[int, bytes]] = []

        async def consume() -> None:
            while True:
                batch = await consumer.getmany(timeout_ms=100)
                got.extend((tp.partition, r.value) for tp, rs in batch.items() for r in rs)

        reader = asyncio.create_task(consume())
        await asyncio.sleep(0.6)  # every partition has been idle for QUIET_AFTER_S
        waits: list[int] = []
        named = _count_named(consumer, waits)
        started = time.monotonic()
        while time.monotonic() - started < 1.5:  # partition 0 busy, 1-3 idle
            await producer.send_and_wait("quiet-test", b"busy", partition=0)
            await asyncio.sleep(0.01)
        window = time.monotonic() - started
        busy, idle = named[0], max(named[p] for p in (1, 2, 3))
        print(f"\nnamed in {window:.2f} s: busy partition {busy}, idle ones {dict(named)}")
        assert idle <= window / 0.2 + 2, named  # about every QUIET_EVERY_S
        assert busy >= 2 * idle, named  # in every fetch: one per FETCH_MAX_WAIT_MS or so
        assert sum(1 for p, _ in got if p == 0) > 50
        # a fetch naming the busy partition lets the broker wait; one naming only idle
        # partitions asks for BROKER_WAIT_MS (the pace is kept by the client)
        assert set(waits) == {devbroker.FETCH_MAX_WAIT_MS, devbroker.BROKER_WAIT_MS}

        sent = time.monotonic()
        await producer.send_and_wait("quiet-test", b"late", partition=3)
        while (3, b"late") not in got:
            assert time.monotonic() - sent < 5.0, "a record on an idle partition was lost"
            await asyncio.sleep(0.005)
        late = time.monotonic() - sent
        print(f"record on an idle partition arrived after {late * 1000:.0f} ms")
        assert late < 0.2 + 0.5  # QUIET_EVERY_S, a fetch wait and this machine's pace
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
    finally:
        await consumer.stop()
        await producer.stop()
