"""A core that says work arrived (`tick_wanted`) is ticked right after the batch that
brought it, not at its next timer tick (bus/driver.py), within the pacing rules: never
sooner than EAGER_TICK_GAP_S after the last tick began, never so often that ticks take
more than EAGER_TICK_SHARE of the time, never on a standby. (No broker: the core decides
nothing, so nothing is published; no timer ticks either: only the driver's own.)"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from peloton.bus.codec import default_codec
from peloton.bus.driver import EAGER_TICK_GAP_S, EAGER_TICK_SHARE, CoreDriver

CODEC = default_codec()
BODY = {"job_id": "j1", "at": 1, "changes": []}
RECORD_VALUE = CODEC.encode("TaskStateChanged", BODY)
EXPECTED = {"job-events": ("TaskStateChanged",)}


class WantingCore:
    """Wants a tick after every record it handles (when `wants`), until it is ticked."""

    inputs: tuple[str, ...] = ("job-events",)
    replay: tuple[str, ...] = ()
    tick_interval = 10.0  # the timer never fires in these tests: no app runs it

    def __init__(self, wants: bool = True, cost_s: float = 0.0) -> None:
        self.wants, self.cost_s = wants, cost_s
        self.arrived = False
        self.ticks: list[float] = []  # monotonic start of each tick

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        return None

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Any]:
        self.arrived = self.wants
        return []

    def tick_wanted(self) -> bool:
        return self.arrived

    def tick(self, now: int) -> list[Any]:
        self.ticks.append(time.monotonic())
        self.arrived = False
        time.sleep(self.cost_s)  # the core's work holds the loop
        return []

    def after_replay(self, now: int) -> list[Any]:
        return []


def _driver(core: WantingCore, leading: bool = True) -> CoreDriver:
    return CoreDriver("eager", core, "127.0.0.1:1", CODEC, leading=lambda: leading)


async def _feed(driver: CoreDriver, offset: int) -> None:
    await driver.on_records([("job-events", 0, offset, b"j1", RECORD_VALUE)], EXPECTED)


async def test_a_batch_that_brings_work_is_ticked_soon_then_not_again() -> None:
    core = WantingCore()
    driver = _driver(core)
    await _feed(driver, 0)
    await asyncio.sleep(EAGER_TICK_GAP_S + 0.05)
    assert len(core.ticks) == 1
    await asyncio.sleep(0.1)  # the tick took the work: nothing more is asked for
    assert len(core.ticks) == 1
    await _feed(driver, 1)
    await asyncio.sleep(EAGER_TICK_GAP_S + 0.05)
    assert len(core.ticks) == 2


async def test_batches_in_a_row_ask_for_one_tick_per_gap() -> None:
    core = WantingCore()
    driver = _driver(core)
    for offset in range(6):  # well within the gap: one tick soon, at most one more
        await _feed(driver, offset)
    await asyncio.sleep(EAGER_TICK_GAP_S + 0.05)
    assert 1 <= len(core.ticks) <= 2
    assert all(b - a >= EAGER_TICK_GAP_S for a, b in itertools.pairwise(core.ticks))
    assert not core.arrived  # the last batch's work was ticked


async def test_no_tick_when_the_core_does_not_ask() -> None:
    core = WantingCore(wants=False)
    driver = _driver(core)
    await _feed(driver, 0)
    await asyncio.sleep(EAGER_TICK_GAP_S + 0.05)
    assert core.ticks == []


async def test_a_standby_is_not_ticked() -> None:
    core = WantingCore()
    driver = _driver(core, leading=False)
    await _feed(driver, 0)
    await asyncio.sleep(EAGER_TICK_GAP_S + 0.05)
    assert core.ticks == []


async def test_costly_ticks_take_at_most_their_share_of_the_time() -> None:
    cost = 0.02
    core = WantingCore(cost_s=cost)
    driver = _driver(core)
    deadline = time.monotonic() + 0.6
    offset = 0
    while time.monotonic() < deadline:  # work arrives all the time
        await _feed(driver, offset)
        offset += 1
        await asyncio.sleep(0.002)
    await driver.stop()
    gaps = [b - a for a, b in zip(core.ticks, core.ticks[1:], strict=False)]
    assert len(core.ticks) >= 2
    # each tick began at least its predecessor's duration / share after it
    assert min(gaps) >= cost / EAGER_TICK_SHARE * 0.95
    assert len(core.ticks) <= 0.6 / (cost / EAGER_TICK_SHARE) + 1


async def test_stop_cancels_a_tick_asked_for() -> None:
    core = WantingCore(cost_s=0.05)
    driver = _driver(core)
    await _feed(driver, 0)
    await asyncio.sleep(EAGER_TICK_GAP_S + 0.02)
    assert len(core.ticks) == 1  # the last took 50 ms: the next waits 200 ms
    await _feed(driver, 1)
    await driver.stop()
    await asyncio.sleep(0.05 / EAGER_TICK_SHARE + 0.05)
    assert len(core.ticks) == 1
