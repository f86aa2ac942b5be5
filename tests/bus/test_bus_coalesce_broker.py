"""Joined TaskStateChanged records on the real dev broker: a shell that decides a batch
writes one record per partition for many jobs' changes, and a shell that reads job-events
hands its core one fact per job, in each job's order, live and in a rebuild."""

from __future__ import annotations

from collections import Counter
from typing import Any

import event_bodies as eb
import pytest
from shell_core import driver_for, read_topic, submit

from peloton.bus.catalog import topic
from peloton.bus.codec import default_codec
from peloton.bus.driver import CoreDriver
from peloton.bus.faustapp import ensure_topics
from peloton.bus.routing import partition_for
from peloton.model.event import Event

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

JOBS = [f"job-{i}" for i in range(24)]
CODEC = default_codec()


class Mover:
    """Answers each JobSubmitted with two TaskStateChanged of that job (as the job manager
    answers a decision: several jobs' changes in one batch)."""

    inputs: tuple[str, ...] = ("job-submitted",)
    replay: tuple[str, ...] = ()
    tick_interval: float | None = None

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        jid = body["job_id"]
        return [Event("TaskStateChanged", jid, eb.task_state_changed(jid, (0, "PENDING"), at=1)),
                Event("TaskStateChanged", jid, eb.task_state_changed(jid, (0, "READY"), at=2))]

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        return None

    def tick(self, now: int) -> list[Event]:
        return []

    def after_replay(self, now: int) -> list[Event]:
        return []


class Follower:
    """Reads job-events: each job's states in the order it was told them."""

    inputs: tuple[str, ...] = ("job-events",)
    replay: tuple[str, ...] = ("job-events",)
    tick_interval: float | None = None

    def __init__(self, fail_on: str | None = None) -> None:
        self.states: dict[str, list[str]] = {}
        self.calls = 0
        self.fail_on = fail_on

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        self.states.setdefault(body["job_id"], []).extend(c["state"] for c in body["changes"])

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        self.calls += 1
        self.fold(etype, body)
        if body["job_id"] == self.fail_on:
            self.fail_on = None
            raise RuntimeError("half-way through a joined record")
        return []

    def discard_unpublished(self) -> None:  # undoes one call only: not enough for a record
        raise AssertionError("a record of several calls must be rebuilt, not discarded")

    def tick(self, now: int) -> list[Event]:
        return []

    def after_replay(self, now: int) -> list[Event]:
        return []

    def snapshot(self) -> dict[str, Any]:
        return {"states": self.states}

    def restore(self, state: dict[str, Any]) -> None:
        self.states = state["states"]


async def decided(broker: str) -> list[tuple[int, int, bytes | None, bytes]]:
    """The Mover decides every submitted job in one batch; job-events as written."""
    await ensure_topics(broker)
    await submit(broker, JOBS)
    mover = CoreDriver("jobmgr", Mover(), broker, CODEC, snapshots=False)
    await mover.rebuild()
    await mover.start_live()
    carries = {"job-submitted": set(topic("job-submitted").events)}
    batch = [("job-submitted", p, o, k, v)
             for p, o, k, v in sorted(await read_topic(broker, "job-submitted"))]
    assert await mover.on_records(batch, carries) == len(JOBS)
    await mover.stop()
    return await read_topic(broker, "job-events")


async def following(broker: str, core: Follower) -> CoreDriver:
    """A reader started as a service starts (a rebuild from the empty log first)."""
    await ensure_topics(broker)
    driver = driver_for(broker, core, snapshots=False)
    await driver.rebuild()
    await driver.start_live()
    return driver


async def feed(driver: CoreDriver, broker: str) -> None:
    """Hand the reader job-events record by record, as its agent would."""
    carries = {"job-events": set(topic("job-events").events)}
    for p, o, k, v in sorted(await read_topic(broker, "job-events")):
        await driver.on_records([("job-events", p, o, k, v)], carries)
    await driver.flush_recovery()
    await driver.stop()


async def test_a_decided_batch_writes_one_record_per_partition_for_every_jobs_changes(
        fresh_broker: str) -> None:
    written = await decided(fresh_broker)
    count = topic("job-events").partitions
    assert len(written) <= count < len(JOBS)  # 48 changes, at most one record a partition
    told: Counter[str] = Counter()
    for p, _, key, value in written:
        assert key is not None and partition_for(key, count) == p
        for etype, body in CODEC.decode_each(value):
            assert etype == "TaskStateChanged"
            assert partition_for(body["job_id"].encode(), count) == p
            told[body["job_id"]] += 1
    assert told == {j: 2 for j in JOBS}


async def test_a_reader_gets_one_call_per_job_in_each_jobs_order_live_and_rebuilt(
        fresh_broker: str) -> None:
    core = Follower()
    driver = await following(fresh_broker, core)
    await decided(fresh_broker)
    await feed(driver, fresh_broker)
    assert core.calls == 2 * len(JOBS)
    assert core.states == {j: ["PENDING", "READY"] for j in JOBS}
    replayed = Follower()
    rebuilt = driver_for(fresh_broker, replayed, snapshots=False)
    await rebuilt.rebuild()
    assert replayed.states == core.states and replayed.calls == 0


async def test_a_call_that_fails_inside_a_joined_record_rebuilds_the_core_from_the_log(
        fresh_broker: str) -> None:
    """The record's earlier jobs were folded: undoing the last call would not be enough."""
    core = Follower()
    driver = await following(fresh_broker, core)
    written = await decided(fresh_broker)
    jobs = [b["job_id"] for _, b in CODEC.decode_each(written[0][3])]
    core.fail_on = next(j for j in jobs if j != jobs[0])  # the second job of a record
    await feed(driver, fresh_broker)
    assert driver.rebuilds == 1
    assert driver.core.states == {j: ["PENDING", "READY"] for j in JOBS}  # the log's
    letters = [CODEC.decode(v)[1] for *_, v in await read_topic(fresh_broker, "dead-letters")]
    assert len(letters) == 1 and "half-way through a joined record" in letters[0]["reason"]
