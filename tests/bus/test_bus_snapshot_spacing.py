"""Snapshots hold the loop at most `SNAPSHOT_SHARE` of the time (bus/driver.py): after a
snapshot that took d seconds, neither trigger (the interval, the record count) writes
another for d / SNAPSHOT_SHARE seconds; a cheap one (milliseconds) barely waits. Real
broker."""

from __future__ import annotations

import time
from typing import Any

import pytest
from shell_core import AnswerCore, consume_live, driver_for, read_topic, submit

from peloton.bus.driver import SNAPSHOT_SHARE
from peloton.bus.faustapp import ensure_topics
from peloton.bus.snapshots import MAGIC

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

COST_S = 0.02  # a snapshot this slow waits COST_S / SNAPSHOT_SHARE (1 s) for the next


class SlowSnapshotCore(AnswerCore):
    def __init__(self, cost_s: float) -> None:
        super().__init__()
        self.cost_s = cost_s

    def snapshot(self) -> dict[str, Any]:
        time.sleep(self.cost_s)  # writing a large state holds the loop
        return super().snapshot()


async def manifests(broker: str) -> int:
    return sum(1 for *_, value in await read_topic(broker, "jobmgr-snapshots")
               if value[len(MAGIC):len(MAGIC) + 1] == b"M")


async def test_a_costly_snapshot_spaces_the_next_by_its_cost(fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    driver = driver_for(fresh_broker, SlowSnapshotCore(COST_S), snapshot_every=2,
                        snapshot_interval_s=0.001)
    await driver.rebuild()
    await driver.start_live()
    began = time.monotonic()
    await submit(fresh_broker, [f"job-{i}" for i in range(4)])
    await consume_live(driver, fresh_broker)  # the records trigger fires once
    snapshotted_within_s = time.monotonic() - began
    assert await manifests(fresh_broker) == 1
    await submit(fresh_broker, [f"job-{i}" for i in range(4, 8)])
    await consume_live(driver, fresh_broker)  # past the count again, but too soon
    assert driver.folded_since_snapshot >= 2
    assert not driver.snapshot_due() and not driver.snapshot_affordable()
    assert await manifests(fresh_broker) == 1
    # the build's time counts, though a child did it; and only the snapshot's time (a
    # busy machine may stretch it: forking a large process, waiting for a core)
    cost_s = driver._snapshot_cost_s
    assert COST_S <= cost_s < snapshotted_within_s
    time.sleep(cost_s / SNAPSHOT_SHARE)
    assert driver.snapshot_affordable() and driver.snapshot_due()
    assert await driver.snapshot()
    await driver.stop()
    assert await manifests(fresh_broker) == 2


async def test_cheap_snapshots_follow_the_record_count(fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    driver = driver_for(fresh_broker, AnswerCore(), snapshot_every=2)
    await driver.rebuild()
    await driver.start_live()
    assert await driver.snapshot()  # the first forks (its size is not known yet): ~10 ms
    for batch in range(3):  # small: written in the loop, in well under a millisecond
        # the spacing the last snapshot asks for (milliseconds, unless a busy machine
        # stretched its build): every second record then writes one
        time.sleep(driver._snapshot_cost_s / SNAPSHOT_SHARE)
        await submit(fresh_broker, [f"job-{batch}-{i}" for i in range(2)])
        await consume_live(driver, fresh_broker)
    await driver.stop()
    assert await manifests(fresh_broker) == 1 + 3
