"""A reader holds back the partitions of a paced topic after a fetch brought records
(`peloton.bus.fetchpace`): as a rule (hypothesis) and on a real broker (every record read
once, in order; the paced partition in fewer reads; the others not held back)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest
from aiokafka import TopicPartition
from broker_topics import create_topic, reader_and_writer
from hypothesis import given
from hypothesis import strategies as st

from peloton.bus.devbroker import WHOLE_READ_PACE_MS
from peloton.bus.fetchpace import FetchPacer, paced_getmany

PARTS = [("slow", 0), ("slow", 1), ("fast", 0)]


@given(pace=st.integers(1, 300), steps=st.lists(
    st.tuples(st.integers(0, 120), st.sets(st.sampled_from(PARTS))), max_size=60))
def test_a_paced_partition_is_read_no_more_often_than_its_pace_and_released_when_due(
        pace: int, steps: list[tuple[int, set[tuple[str, int]]]]) -> None:
    pacer = FetchPacer({"slow": pace, "fast": 0})
    now = 0
    last_read: dict[tuple[str, int], int] = {}
    for gap, brought in steps:
        now += gap
        released = pacer.due(now)
        assert all(p not in pacer.held for p in released)
        assert all(until > now for until in pacer.held.values())  # every due one released
        assert 0 <= pacer.wait_ms(now, 200) <= 200
        if pacer.held:
            assert pacer.wait_ms(now, 10_000) == min(pacer.held.values()) - now
        for part in brought - set(pacer.held):  # a held (paused) partition is not fetched
            if part[0] == "slow":
                assert now - last_read.get(part, -pace) >= pace
            last_read[part] = now
            assert pacer.took(part, now) == (part[0] == "slow")
        assert all(p[0] == "slow" for p in pacer.held)  # an unpaced topic is never held


def test_nothing_is_held_when_no_topic_is_paced() -> None:
    pacer = FetchPacer({})
    assert not pacer.took(("job-events", 0), 5)
    assert pacer.held == {} and pacer.due(10) == [] and pacer.wait_ms(10, 200) == 200


def test_against_apache_kafka_no_topic_is_paced() -> None:
    code = ("from peloton.bus.devbroker import whole_read_pace\n"
            "assert whole_read_pace() == {}, whole_read_pace()\n")
    env = dict(os.environ, PELOTON_BROKER_KIND="kafka")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert WHOLE_READ_PACE_MS == {"job-events": 100}


@pytest.mark.integration
async def test_on_a_real_broker_every_record_is_read_once_in_order_the_paced_ones_in_fewer_reads(
        fresh_broker: str) -> None:
    await create_topic(fresh_broker, "paced-slow", 1)
    await create_topic(fresh_broker, "paced-fast", 1)
    sent = 150
    async with reader_and_writer(fresh_broker, [TopicPartition("paced-slow", 0),
                                                TopicPartition("paced-fast", 0)]) as (
            consumer, producer):
        pacer = FetchPacer({"paced-slow": 100})
        got: dict[str, list[bytes]] = {"paced-slow": [], "paced-fast": []}
        reads: dict[str, int] = {"paced-slow": 0, "paced-fast": 0}

        async def write() -> None:  # 150 records to each topic over about 1.5 s
            for i in range(sent):
                await producer.send_and_wait("paced-slow", b"%d" % i)
                await producer.send_and_wait("paced-fast", b"%d" % i)
                await asyncio.sleep(0.01)

        writer = asyncio.create_task(write())
        deadline = time.monotonic() + 15
        while (len(got["paced-slow"]) < sent or len(got["paced-fast"]) < sent) \
                and time.monotonic() < deadline:
            batch = await paced_getmany(consumer, pacer, 200, 10_000)
            for tp, recs in batch.items():
                if recs:
                    reads[tp.topic] += 1
                    got[tp.topic] += [r.value for r in recs]
        await writer
        for t in got:
            assert got[t] == [b"%d" % i for i in range(sent)], t
        # the paced partition: at most one read per 100 ms of the ~1.5 s of writing (and
        # the reads of what was left); the other read as records came
        assert reads["paced-slow"] <= 25
        assert reads["paced-fast"] > 2 * reads["paced-slow"]
