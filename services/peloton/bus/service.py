"""The shell every scheduling service runs in: replay, consume, call the core, publish.

Cycle contract (the same for every service):
1. Start-up: create missing catalog topics, then replay the core's `replay` topics from the
   start to their current end through `core.fold` (no decisions), then `core.after_replay`.
2. Live: a Faust agent per input topic decodes each record (undecodable or misplaced
   records go to the dead-letter topic with the reason, and the service keeps going), skips
   what replay already folded, calls `core.handle` and publishes the events it returns.
3. Every `core.tick_interval` seconds, `core.tick` makes the periodic decisions.
A service with a `leader_key` elects a leader through etcd: every instance folds every
record (a hot standby), but only the leader ticks and publishes, and it checks that it
still holds the lease right before publishing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any, Protocol

import faust
from mode import Service

from peloton.bus.catalog import TOPICS, topic, topic_for_event
from peloton.bus.codec import Codec, DecodeError, default_codec
from peloton.bus.deadletter import dead_letter
from peloton.bus.faustapp import ensure_topics, make_app, raw_topic
from peloton.bus.readiness import announce_ready
from peloton.bus.replay import Positions, replay_topics
from peloton.model.event import Event

__all__ = ["ServiceCore", "ServiceShell", "now_ms"]

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


class ServiceCore(Protocol):
    inputs: tuple[str, ...]
    replay: tuple[str, ...]
    tick_interval: float | None

    def fold(self, etype: str, body: dict[str, Any]) -> None: ...

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]: ...

    def tick(self, now: int) -> list[Event]: ...

    def after_replay(self, now: int) -> list[Event]: ...


class ServiceShell:
    def __init__(
        self, name: str, instance: str, core: ServiceCore, bootstrap: str,
        etcd: str | None = None, leader_key: str | None = None, lease_ttl: float = 2.0,
        codec: Codec | None = None, web_port: int | None = None, web_bind: str = "127.0.0.1",
    ) -> None:
        self.name = name
        self.instance = instance
        self.core = core
        self.bootstrap = bootstrap
        self.codec = codec or default_codec()
        self.positions: Positions = {}
        self.election: Any = None
        if leader_key is not None:
            if etcd is None:
                raise ValueError(f"{name}: leader election needs an etcd endpoint")
            from peloton.ha.election import LeaderElection

            self.election = LeaderElection(etcd, leader_key, f"{name}-{instance}", ttl=lease_ttl)
        self.app = make_app(f"peloton-{name}-{instance}", bootstrap, web_port=web_port,
                            web_bind=web_bind)
        self._out = {t.name: raw_topic(self.app, t.name) for t in TOPICS}
        self._backlog: list[Event] = []
        self._wire()

    # ---- start-up -------------------------------------------------------------------
    async def prepare(self) -> None:
        await ensure_topics(self.bootstrap)
        if self.core.replay:
            started = time.monotonic()
            self.positions = await replay_topics(
                self.bootstrap, list(self.core.replay), self.codec, self.core.fold)
            log.info("%s: state rebuilt in %.2fs", self.name, time.monotonic() - started)
        self._backlog = self.core.after_replay(now_ms())

    def run(self) -> None:
        """Blocking: prepare, then run the Faust worker until it is stopped."""
        asyncio.run(self.prepare())
        asyncio.set_event_loop(asyncio.new_event_loop())
        worker = faust.Worker(self.app, loglevel="INFO", quiet=True)
        worker.execute_from_commandline()

    def leading(self) -> bool:
        return self.election is None or bool(self.election.still_leader())

    # ---- wiring ---------------------------------------------------------------------
    def _wire(self) -> None:
        for name in self.core.inputs:
            self._add_agent(name)
        if self.core.tick_interval:
            self.app.timer(self.core.tick_interval, name=f"{self.name}-tick")(self._tick)
        shell = self

        class Lifecycle(Service):
            async def on_start(self) -> None:
                if shell.election is not None:
                    await shell.election.start()
                if shell._backlog:
                    await shell.publish(shell._backlog)
                    shell._backlog = []

            async def on_stop(self) -> None:
                if shell.election is not None:
                    await shell.election.stop()

        self.app.service(Lifecycle)
        announce_ready(self.app, self.name)

    def _add_agent(self, topic_name: str) -> None:
        source = raw_topic(self.app, topic_name)
        expected = set(topic(topic_name).events)

        async def consume(stream: Any) -> None:
            async for event in stream.events():
                msg = event.message
                key = (msg.topic, msg.partition)
                if msg.offset < self.positions.get(key, 0):
                    continue
                self.positions[key] = msg.offset + 1
                await self._process(msg, event.key, event.value, expected)

        self.app.agent(source, name=f"{self.name}-{topic_name}")(consume)

    async def _process(self, msg: Any, key: bytes | None, value: bytes | None,
                       expected: set[str]) -> None:
        try:
            etype, body = self.codec.decode(value)
        except DecodeError as exc:
            await self._dead_letter(msg, key, value, str(exc))
            return
        if etype not in expected:
            await self._dead_letter(msg, key, value,
                                    f"{etype} does not belong on topic {msg.topic}")
            return
        try:
            out = self.core.handle(etype, body, now_ms())
        except Exception as exc:  # a core bug must not stop the service: keep the record
            log.exception("%s: handling %s failed", self.name, etype)
            await self._dead_letter(msg, key, value, f"handler failed: {exc!r}")
            return
        if out:
            await self.publish(out)

    async def _dead_letter(self, msg: Any, key: bytes | None, value: bytes | None,
                           reason: str) -> None:
        log.warning("%s: dead-lettering %s[%d]@%d: %s", self.name, msg.topic, msg.partition,
                    msg.offset, reason)
        ev = dead_letter(self.name, msg.topic, msg.partition, msg.offset, reason, key, value,
                         now_ms())
        await self._send(ev)

    async def _tick(self) -> None:
        if not self.leading():
            return
        out = self.core.tick(now_ms())
        if out:
            await self.publish(out)

    async def publish(self, events: Sequence[Event]) -> None:
        """Publish events in order; a deposed leader drops them (its successor decides)."""
        if not self.leading():
            log.info("%s: not leader, dropping %d events", self.name, len(events))
            return
        for ev in events:
            await self._send(ev)

    async def _send(self, ev: Event) -> None:
        name = topic_for_event(ev.type).name
        await self._out[name].send(key=ev.key.encode(), value=self.codec.encode(ev.type, ev.body))
