"""The driver has a large state's snapshot built by a forked child (bus/driver.py,
`peloton.bus.snapshotfork`): the loop goes on (folding, deciding) while it is built, the
snapshot is the state and positions at the fork, a restart from it folds only the tail,
and a child that fails writes nothing, says why, and the next snapshot is written. Real
broker."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from typing import Any

import pytest
from shell_core import AnswerCore, consume_live, driver_for, log_state, submit

from peloton.bus.driver import CoreDriver
from peloton.bus.faustapp import ensure_topics
from peloton.bus.snapshots import decode_state, read_newest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

BUILD_S = 0.5


class LargeCore(AnswerCore):
    """A state too large to write in the loop (its snapshot compresses to ~64 KB), slow to
    write when `build_s` is set, failing when `broken`."""

    def __init__(self) -> None:
        super().__init__()
        self.pad = random.Random(1).randbytes(32 << 10).hex()
        self.build_s = 0.0
        self.broken = False
        self.dies = False

    def snapshot(self) -> dict[str, Any]:
        if self.broken:
            raise RuntimeError("a task without a host")
        if self.dies:  # as a child killed by a signal: no reply at all
            os._exit(9)
        time.sleep(self.build_s)
        return super().snapshot() | {"pad": self.pad}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.pad = state["pad"]


async def live_driver(broker: str, jobs: list[str]) -> CoreDriver:
    """A driver of a LargeCore that has folded `jobs`' submissions and written its first
    snapshot (by a child: no size is known yet)."""
    await ensure_topics(broker)
    driver = driver_for(broker, LargeCore(), snapshot_every=0)
    await driver.rebuild()
    await driver.start_live()
    await submit(broker, jobs)
    await consume_live(driver, broker)
    assert await driver.snapshot()
    return driver


async def test_the_loop_goes_on_while_a_child_writes_the_snapshot(
        fresh_broker: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="peloton.bus.driver")
    driver = await live_driver(fresh_broker, [f"job-{i}" for i in range(4)])
    assert "by a child" in caplog.records[-1].getMessage()

    driver.core.build_s = BUILD_S
    beats = 0

    async def heartbeat() -> None:
        nonlocal beats
        while True:
            beats += 1
            await asyncio.sleep(0.01)

    beating = asyncio.create_task(heartbeat())
    writing = asyncio.create_task(driver.snapshot())
    await asyncio.sleep(0.05)  # the fork is done: later records are folded meanwhile
    await submit(fresh_broker, [f"job-{i}" for i in range(4, 8)])
    assert (await consume_live(driver, fresh_broker))[0] == 4
    assert not writing.done()
    assert await writing
    beating.cancel()
    assert beats >= BUILD_S / 0.01 / 3  # the loop was never held for the build
    message = caplog.records[-1].getMessage()
    assert "by a child" in message, message
    await driver.stop()

    snap = await read_newest(fresh_broker, "jobmgr-snapshots", "jobmgr", 1)
    assert set(decode_state(snap.blob)["submitted"]) == {f"job-{i}" for i in range(4)}
    later = driver_for(fresh_broker, LargeCore(), snapshot_every=0)
    folded = await later.rebuild()
    assert folded == 4 + 4  # the tail: four submissions and their four answers
    assert later.core.snapshot() == driver.core.snapshot()
    assert later.core.snapshot() == await log_state(fresh_broker, LargeCore()) | {
        "pad": later.core.pad}


async def test_a_child_that_fails_writes_nothing_and_says_why(
        fresh_broker: str, caplog: pytest.LogCaptureFixture) -> None:
    driver = await live_driver(fresh_broker, ["job-0"])
    first = await read_newest(fresh_broker, "jobmgr-snapshots", "jobmgr", 1)

    driver.core.broken = True
    caplog.set_level(logging.WARNING, logger="peloton.bus.driver")
    assert not await driver.snapshot()
    warning = caplog.records[-1].getMessage()
    assert "snapshot not written" in warning and "a task without a host" in warning
    assert (await read_newest(fresh_broker, "jobmgr-snapshots", "jobmgr", 1)
            ).header.snapshot_id == first.header.snapshot_id

    driver.core.broken = False
    await submit(fresh_broker, ["job-1"])
    await consume_live(driver, fresh_broker)  # the service goes on
    assert await driver.snapshot()
    await driver.stop()
    newest = await read_newest(fresh_broker, "jobmgr-snapshots", "jobmgr", 1)
    assert set(decode_state(newest.blob)["submitted"]) == {"job-0", "job-1"}


async def test_after_a_child_crashed_snapshots_are_built_in_the_loop(
        fresh_broker: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="peloton.bus.driver")
    driver = await live_driver(fresh_broker, ["job-0"])
    driver.core.dies = True
    assert not await driver.snapshot()
    said = [r.getMessage() for r in caplog.records[-2:]]
    assert "exited with status 9 after 0 bytes" in said[0]
    assert "built in the loop from now on" in said[1]
    driver.core.dies = False
    await submit(fresh_broker, ["job-1"])
    await consume_live(driver, fresh_broker)
    assert await driver.snapshot()
    message = caplog.records[-1].getMessage()
    assert "written" in message and "by a child" not in message
    await driver.stop()
