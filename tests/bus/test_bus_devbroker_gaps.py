"""Offset jumps on the dev broker: a consumer stops at a missing offset and fetches it
again, and takes the jump only after `Gaps.accept_s` (`peloton.bus.devbroker`).

The dev broker may hand a tailing consumer offset N+1 while N, written by another producer
at the same moment, is not readable yet; aiokafka would take the jump for compaction and
never read N (a placement of 72 runs was lost that way in `bench scale`)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.consumer import fetcher
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from broker_topics import create_topic
from hypothesis import given
from hypothesis import strategies as st

from peloton.bus import devbroker
from peloton.bus.devbroker import Gaps, consumer_settings, contiguous, producer_settings
from peloton.minicluster.servers import free_port, start_tansu

TP = TopicPartition("t", 0)


@dataclass
class Rec:
    offset: int


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _run(records: list[int], fetch: int, gaps: Gaps) -> tuple[list[int], tuple[int, bool]]:
    out: list[int] = []
    gen = contiguous([Rec(o) for o in records], fetch, TP, gaps)
    while True:
        try:
            out.append(next(gen).offset)
        except StopIteration as stop:
            return out, stop.value


@given(st.integers(0, 100), st.lists(st.integers(0, 3), max_size=30))
def test_a_fetch_ends_at_the_first_jump_while_it_is_waited_for(fetch: int,
                                                               steps: list[int]) -> None:
    offsets, at = [], fetch
    for step in steps:  # 0: the next offset; k: k offsets missing before it
        at += step
        offsets.append(at)
        at += 1
    prefix = []
    for off in offsets:
        if off != fetch + len(prefix):
            break
        prefix.append(off)
    out, (due, stopped) = _run(offsets, fetch, Gaps(accept_s=60.0, clock=Clock()))
    assert out == prefix
    assert due == fetch + len(prefix)
    assert stopped == (len(prefix) < len(offsets))
    # a jump that has lasted long enough is taken: every record, in order
    taken, (end, stopped) = _run(offsets, fetch, Gaps(accept_s=0.0, clock=Clock()))
    assert taken == offsets and not stopped
    assert end == (offsets[-1] + 1 if offsets else fetch)


def test_records_before_the_fetch_offset_pass_as_they_come() -> None:
    out, (due, stopped) = _run([5, 6, 7, 8], 7, Gaps(clock=Clock()))
    assert out == [5, 6, 7, 8] and (due, stopped) == (9, False)


def test_a_jump_is_waited_for_until_it_has_lasted_accept_s_then_taken(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    gaps = Gaps(accept_s=5.0, clock=clock)
    with caplog.at_level(logging.INFO, logger="peloton.bus.devbroker"):
        assert gaps.wait(TP, 547, 548)
        clock.now = 4.9
        assert gaps.wait(TP, 547, 548)
        assert gaps.wait(TopicPartition("t", 1), 547, 548)  # another partition's own clock
        clock.now = 5.0
        assert not gaps.wait(TP, 547, 548)
    assert (gaps.waited, gaps.taken) == (3, 1)
    said = [r.getMessage() for r in caplog.records]
    # each jump said once when first met (per partition), and once when taken
    assert sum("where 547 was due: fetching 547 again" in m for m in said) == 2
    assert "offset 547 still missing after 5.0 s" in caplog.text
    # read at last: forgotten, a later jump at the same place starts its own clock
    gaps.seen(TopicPartition("t", 1), 547)
    assert gaps.first_seen == {}


def _batch(base: int, count: int) -> MemoryRecords:
    """aiokafka's own encoding of `count` records from offset `base`."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=None, key=None, value=b"v", headers=[])
    raw = bytes(builder.build())
    return MemoryRecords(base.to_bytes(8, "big") + raw[8:])  # the batch's base offset


def _fetched(batch: MemoryRecords, fetch: int) -> tuple[list[int], int]:
    records = fetcher.PartitionRecords(TP, batch, [], fetch, None, None, False, 0)
    return [r.offset for r in records], records.next_fetch_offset


def test_the_installed_records_keep_the_position_at_a_missing_offset(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PELOTON_BROKER_KIND", "tansu")
    consumer_settings()  # installs the dev broker's fetcher and records
    clock = Clock()
    monkeypatch.setattr(devbroker, "GAPS", Gaps(accept_s=5.0, clock=clock))
    assert _fetched(_batch(548, 2), 547) == ([], 547)  # 547 not readable yet: ask again
    assert _fetched(_batch(547, 3), 547) == ([547, 548, 549], 550)  # there now
    assert devbroker.GAPS.first_seen == {}
    assert _fetched(_batch(548, 2), 547) == ([], 547)
    clock.now = 6.0  # missing for longer than accept_s: the jump is taken
    assert _fetched(_batch(548, 2), 547) == ([548, 549], 550)
    assert (devbroker.GAPS.waited, devbroker.GAPS.taken) == (2, 1)


async def _produce(broker: str, n: int, stop: asyncio.Event) -> set[bytes]:
    producer = AIOKafkaProducer(bootstrap_servers=broker, linger_ms=0, **producer_settings())  # type: ignore[arg-type]
    await producer.start()
    sent: set[bytes] = set()
    try:
        i = 0
        while not stop.is_set():
            values = [f"{n}-{i + j}".encode() for j in range(1 + i % 3)]
            futures = [await producer.send("gaps", v, partition=i % 2) for v in values]
            await asyncio.gather(*futures)
            sent.update(values)
            i += len(values)
    finally:
        await producer.stop()
    return sent


async def _tail(broker: str, stop: asyncio.Event, jumps: list[Any]) -> set[bytes]:
    consumer = AIOKafkaConsumer(bootstrap_servers=broker, enable_auto_commit=False,
                                auto_offset_reset="earliest", **consumer_settings())  # type: ignore[arg-type]
    await consumer.start()
    got: set[bytes] = set()
    try:
        parts = [TopicPartition("gaps", p) for p in range(2)]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        last: dict[int, int] = {}
        idle = 0
        while not stop.is_set() or idle < 10:
            batch = await consumer.getmany(timeout_ms=50, max_records=100)
            idle = 0 if batch else idle + 1
            for tp, records in batch.items():
                for rec in records:
                    if rec.offset != last.get(tp.partition, -1) + 1:
                        jumps.append((tp.partition, last.get(tp.partition), rec.offset))
                    last[tp.partition] = rec.offset
                    got.add(rec.value)
    finally:
        await consumer.stop()
    return got


@pytest.mark.integration
@pytest.mark.timeout(90)
async def test_tailing_consumers_read_every_offset_in_order_while_producers_race(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PELOTON_BROKER_KIND", "tansu")
    server = start_tansu(free_port(), tmp_path / "tansu.log")
    try:
        await create_topic(server.address, "gaps", 2)
        stop = asyncio.Event()
        jumps: list[Any] = []
        tails = [asyncio.ensure_future(_tail(server.address, stop, jumps)) for _ in range(3)]
        producers = [asyncio.ensure_future(_produce(server.address, n, stop)) for n in range(6)]
        await asyncio.sleep(8.0)
        stop.set()
        sent = set().union(*await asyncio.gather(*producers))
        read = await asyncio.gather(*tails)
    finally:
        server.stop()
    assert len(sent) > 1_000
    assert jumps == []
    assert all(got == sent for got in read)
