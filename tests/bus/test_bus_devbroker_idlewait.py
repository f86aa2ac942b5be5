"""An idle consumer asks the dev broker for a longer fetch wait (`devbroker.FetchWait`).

The dev broker polls while a fetch waits, so a consumer at its log end costs it CPU in
proportion to how often it fetches. After `IDLE_AFTER_FETCHES` fetches in a row brought
nothing a consumer asks for `IDLE_FETCH_WAIT_MS`; the first fetch that brings records
gives it its own wait back. Checked as a rule (hypothesis) and on a real broker: the wait
a real consumer asks for, and a record written to an idle consumer's partition still
arriving.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from broker_topics import create_topic, reader_and_writer
from hypothesis import given
from hypothesis import strategies as st

from peloton.bus.devbroker import (
    FETCH_MAX_WAIT_MS,
    IDLE_AFTER_FETCHES,
    IDLE_FETCH_WAIT_MS,
    FetchWait,
)


@given(busy=st.integers(1, 500), idle=st.integers(1, 500), after=st.integers(1, 6),
       outcomes=st.lists(st.booleans(), max_size=40))
def test_the_wait_is_the_idle_one_exactly_after_enough_empty_fetches_in_a_row(
        busy: int, idle: int, after: int, outcomes: list[bool]) -> None:
    pace = FetchWait(busy, idle, after)
    assert pace.wait_ms == busy  # a new consumer is not idle yet
    for i, got in enumerate(outcomes):
        wait = pace.fetched(got)
        recent = outcomes[max(0, i + 1 - after):i + 1]
        idle_now = len(recent) == after and not any(recent)
        assert wait == (max(busy, idle) if idle_now else busy)
        assert wait >= busy  # never shorter than the consumer asked for


def test_the_idle_wait_is_longer_than_the_busy_one() -> None:
    assert IDLE_FETCH_WAIT_MS > FETCH_MAX_WAIT_MS and IDLE_AFTER_FETCHES >= 1


def test_against_apache_kafka_consumers_are_left_as_they_are() -> None:
    code = ("from aiokafka.consumer import consumer as c\n"
            "from peloton.bus.devbroker import consumer_settings\n"
            "assert consumer_settings() == {}, consumer_settings()\n"
            "assert not getattr(c.Fetcher, '_peloton_paced', False)\n")
    env = dict(os.environ, PELOTON_BROKER_KIND="kafka")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr


async def _fetch_until(consumer: AIOKafkaConsumer, wait_ms: int, within_s: float) -> int:
    deadline = time.monotonic() + within_s
    got = 0
    while time.monotonic() < deadline:
        records = await consumer.getmany(timeout_ms=50)
        got += sum(len(v) for v in records.values())
        if consumer._fetcher._fetch_max_wait_ms == wait_ms:
            return got
    raise AssertionError(f"the consumer never asked for {wait_ms} ms "
                         f"(now {consumer._fetcher._fetch_max_wait_ms})")


@pytest.mark.integration
async def test_an_idle_consumer_waits_longer_and_a_record_brings_it_back(
        monkeypatch: pytest.MonkeyPatch, fresh_broker: str) -> None:
    monkeypatch.setenv("PELOTON_BROKER_KIND", "tansu")
    await create_topic(fresh_broker, "idle-wait", 4)
    async with reader_and_writer(fresh_broker, [TopicPartition("idle-wait", p)
                                                for p in range(4)]) as (consumer, producer):
        assert await _fetch_until(consumer, IDLE_FETCH_WAIT_MS, 10) == 0
        for round_ in range(3):  # idle, a record, busy, idle again
            sent = time.monotonic()
            await producer.send_and_wait("idle-wait", b"x%d" % round_, partition=round_)
            got = 0
            while not got and time.monotonic() - sent < 5:
                records = await consumer.getmany(timeout_ms=50)
                got = sum(len(v) for v in records.values())
            assert got == 1, "a record on an idle consumer's partition never arrived"
            # the fetch that brought it gave the consumer its own wait back (idle again
            # only after IDLE_AFTER_FETCHES more fetches, 100 ms of them at the least) ...
            assert consumer._fetcher._fetch_max_wait_ms == FETCH_MAX_WAIT_MS
            # ... and with nothing more written it is idle again
            assert await _fetch_until(consumer, IDLE_FETCH_WAIT_MS, 10) == 0
