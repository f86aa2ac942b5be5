"""The driver's drainer (`CoreDriver._drain`): one task decides the inbox, and `stop`
ends it. (No broker: the core decides nothing, so nothing is published.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from peloton.bus.codec import default_codec
from peloton.bus.driver import CoreDriver

CODEC = default_codec()
VALUE = CODEC.encode("TaskStateChanged", {"job_id": "j1", "at": 1, "changes": []})
EXPECTED = {"job-events": ("TaskStateChanged",)}


class QuietCore:
    inputs: tuple[str, ...] = ("job-events",)
    replay: tuple[str, ...] = ()
    tick_interval = 10.0

    def __init__(self) -> None:
        self.handled = 0

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        return None

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Any]:
        self.handled += 1
        return []

    def tick(self, now: int) -> list[Any]:
        return []

    def after_replay(self, now: int) -> list[Any]:
        return []


def _records(offset: int) -> list[tuple[str, int, int, bytes, bytes]]:
    return [("job-events", 0, offset, b"j1", VALUE)]


async def _turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_batches_handed_over_while_the_lock_is_held_are_decided_by_one_drainer() -> None:
    core = QuietCore()
    driver = CoreDriver("drain", core, "127.0.0.1:1", CODEC)
    async with driver.lock:  # a tick in progress
        calls = [asyncio.create_task(driver.on_records(_records(o), EXPECTED))
                 for o in range(3)]
        await _turns()
        drainer = driver._drainer
        assert drainer is not None and core.handled == 0
    assert await asyncio.gather(*calls) == [1, 1, 1]
    assert core.handled == 3 and drainer.done() and driver._drainer is None


async def test_stop_cancels_the_waiting_batches_and_a_later_batch_gets_a_new_drainer(
        ) -> None:
    core = QuietCore()
    driver = CoreDriver("drain", core, "127.0.0.1:1", CODEC)
    async with driver.lock:
        first = asyncio.create_task(driver.on_records(_records(0), EXPECTED))
        await _turns()
        await driver.stop()  # cancels the waiting drainer and the batch it was to decide
        second = asyncio.create_task(driver.on_records(_records(1), EXPECTED))
        await _turns()
        assert driver._drainer is not None and not driver._drainer.done()  # waits its turn
    assert await second == 1
    with pytest.raises(asyncio.CancelledError):
        await first
    assert core.handled == 1
