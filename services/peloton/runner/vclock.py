"""An asyncio event loop whose clock is simulated time, for shells that arm loop timers.

The simulated agent's runner (`peloton.agent.simrunner.SimulatedRunner`) finishes a run by
a `loop.call_at` timer on `loop.time()`. On this loop `time()` returns the simulated clock
set by `set_time_ms`, so those timers fire when simulated time reaches them and never
according to the wall clock. Drive it only with short `run_until_complete` calls whose
coroutines keep yielding (`settle`): the loop then never sleeps in its selector.
"""

from __future__ import annotations

import asyncio

__all__ = ["VirtualClockLoop", "settle"]


class VirtualClockLoop(asyncio.SelectorEventLoop):
    def __init__(self, now_ms: int = 0) -> None:
        super().__init__()
        self._now_s = now_ms / 1000.0

    def time(self) -> float:
        return self._now_s

    def set_time_ms(self, now_ms: int) -> None:
        """Move the clock (never backwards); due timers run on the next loop iteration."""
        self._now_s = max(self._now_s, now_ms / 1000.0)


async def settle(rounds: int = 3) -> None:
    """Let tasks spawned so far and timers due by now run (each round is one loop pass;
    a timer that becomes due runs one pass after the pass that found it due)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
