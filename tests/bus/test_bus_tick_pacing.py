"""A slow tick leaves the loop to the consumers for as long (bus/driver.py): the next calls
of `tick` within that window return without calling the core; fast ticks are never held
back. (No broker: a tick that decides nothing publishes nothing.)"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from peloton.bus.codec import default_codec
from peloton.bus.driver import SLOW_TICK_S, CoreDriver


class TickCore:
    inputs: tuple[str, ...] = ()
    replay: tuple[str, ...] = ()
    tick_interval = 0.01

    def __init__(self, cost_s: float) -> None:
        self.cost_s = cost_s
        self.ticks = 0

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        return None

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Any]:
        return []

    def tick(self, now: int) -> list[Any]:
        self.ticks += 1
        time.sleep(self.cost_s)  # the core's work holds the loop
        return []

    def after_replay(self, now: int) -> list[Any]:
        return []


async def test_a_slow_tick_is_followed_by_as_long_without_ticks() -> None:
    core = TickCore(cost_s=4 * SLOW_TICK_S)
    driver = CoreDriver("slow", core, "127.0.0.1:1", default_codec())
    await driver.tick()
    await driver.tick()  # within the window: the consumers' turn
    assert core.ticks == 1
    await asyncio.sleep(4 * SLOW_TICK_S + 0.05)
    await driver.tick()
    assert core.ticks == 2


async def test_fast_ticks_are_never_held_back() -> None:
    core = TickCore(cost_s=0.0)
    driver = CoreDriver("fast", core, "127.0.0.1:1", default_codec())
    for _ in range(5):
        await driver.tick()
    assert core.ticks == 5
