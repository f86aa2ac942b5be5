"""Leader election on its own thread: a leader whose work takes seconds keeps its lease.

`LeaderElection` refreshes its lease from the event loop it runs in. A service that
decides on that loop (the resource manager's tick with tens of thousands of queued jobs)
can hold it for longer than the lease TTL; the refresh then comes too late, the leader is
deposed, its decisions are dropped (`still_leader` is False at publish time), it rebuilds,
wins again, decides again for as long, and is deposed again: a burst that never ends.

`ThreadedElection` runs the same election on a thread with its own event loop, so the
lease is refreshed while the service's loop is busy. It keeps the lease only while the
service makes progress: the service's loop beats every `beat_s`, and the election neither
refreshes nor campaigns when the last beat is older than `max_stall_s` (the service is
hung, not busy): it then steps down and a standby takes over within `max_stall_s` plus
one TTL. A killed or frozen (SIGSTOP) process stops its thread too: failover as before,
about one TTL. `still_leader()` is read from the service's loop right before each publish
(a bool and a float the thread writes: atomic reads in CPython), with the same guarantee
as `LeaderElection.still_leader`. `on_elected`/`on_deposed` callbacks would run on the
election's thread: the shell uses none.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

from peloton.ha.election import LeaderElection

__all__ = ["ThreadedElection", "MAX_STALL_S"]

MAX_STALL_S = 30.0  # a decision longer than this is a hung service, not a busy one


class ThreadedElection:
    def __init__(self, endpoint: str, key: str, identity: str, ttl: float = 2.0, *,
                 max_stall_s: float = MAX_STALL_S, beat_s: float = 0.25,
                 **options: Any) -> None:
        self.max_stall_s = max_stall_s
        self.beat_s = beat_s
        self.election = LeaderElection(endpoint, key, identity, ttl, healthy=self.healthy,
                                       **options)
        self.key, self.identity, self.ttl = key, identity, ttl
        self._beat = time.monotonic()
        self._beater: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def healthy(self) -> bool:
        """Whether the service's event loop ran within `max_stall_s`."""
        return time.monotonic() - self._beat < self.max_stall_s

    async def start(self) -> None:
        """Start beating on this loop and campaigning on the election's thread."""
        if self._thread is not None:
            raise RuntimeError("election already started")
        self._beat = time.monotonic()
        self._beater = asyncio.get_running_loop().create_task(self._beats())
        ready = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.election.start())
            except BaseException as exc:  # reported to start()'s caller
                failed.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()  # until stop()
            try:
                loop.run_until_complete(self.election.stop())
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name=f"election:{self.key}", daemon=True)
        self._thread.start()
        await asyncio.to_thread(ready.wait)
        if failed:
            raise failed[0]

    async def stop(self) -> None:
        """Step down (revoking the lease when leading) and end the thread. Idempotent."""
        beater, self._beater = self._beater, None
        if beater is not None:
            beater.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beater
        thread, self._thread = self._thread, None
        if thread is None:
            return
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join, 2 * self.ttl + 5)

    def is_leader(self) -> bool:
        return self.election.is_leader()

    def still_leader(self, margin: float = 0.0) -> bool:
        return self.election.still_leader(margin)

    async def _beats(self) -> None:
        while True:
            self._beat = time.monotonic()
            await asyncio.sleep(self.beat_s)
