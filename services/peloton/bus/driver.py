"""CoreDriver: runs one core by the contract of `peloton.bus.service` ("decide, publish,
then commit"), with no Faust in it, so tests drive it record by record.

Every call into the core (`handle`, `tick`, `after_replay`, `snapshot`, a rebuild) holds
one asyncio lock, so the events of one decision are published, and their delivery
awaited, before the next decision starts. A record's position advances only after that.

When a decision does not reach the log (the core raised, an event did not encode, the
broker refused it, or this instance is not the leader at publish time) the core is brought
back to what the log says: `core.discard_unpublished()` if the core has it, otherwise a
rebuild (the newest snapshot, or an empty core, plus the log tail; the start-up path).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from peloton.bus.catalog import DEAD_LETTER, SNAPSHOT_TOPICS, snapshot_topic
from peloton.bus.codec import Codec, DecodeError, EncodeError
from peloton.bus.deadletter import dead_letter
from peloton.bus.keys import key_of
from peloton.bus.publisher import Delivered, Publisher, PublishError
from peloton.bus.replay import Positions, replay_topics
from peloton.bus.snapshots import (
    FORMAT,
    Snapshot,
    SnapshotHeader,
    SnapshotUnreadable,
    compress,
    decode_state,
    read_newest,
    state_json,
    write_snapshot,
)
from peloton.model.event import Event

__all__ = ["CoreDriver", "now_ms"]

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


class CoreDriver:
    """One core, its log positions, its publisher and its snapshots.

    `core_factory` makes an empty core for a rebuild without a snapshot; by default a deep
    copy of `core` as it was given (before anything was folded).
    """

    def __init__(
        self, name: str, core: Any, bootstrap: str, codec: Codec,
        leading: Callable[[], bool] = lambda: True, instance: str = "1",
        snapshot_interval_s: float = 10.0, snapshot_every: int = 20_000,
        core_factory: Callable[[], Any] | None = None, clock: Callable[[], int] = now_ms,
    ) -> None:
        self.name = name
        self.instance = instance
        self.core = core
        self.bootstrap = bootstrap
        self.codec = codec
        self.leading = leading
        self.clock = clock
        self.positions: Positions = {}
        self.publisher = Publisher(bootstrap, codec)
        self.snapshot_interval_s = snapshot_interval_s
        self.snapshot_every = snapshot_every
        self.folded_since_snapshot = 0
        self.rebuilds = 0
        self.backlog: list[Event] = []
        self._factory = core_factory or (_copier(core) if core.replay else _no_copy(core))
        self._lock: asyncio.Lock | None = None
        self._stale = False
        self._used = False  # has the core folded or decided anything yet
        self._last_snapshot: Snapshot | None = None
        self._last_snapshot_at = time.monotonic()
        self._snapshotting = False
        # replay topics the core does not consume live: only its own output lands there,
        # so their position is what this shell delivered (see `_advance_own`)
        self._own = set(core.replay) - set(core.inputs)

    # ---- properties of the core ---------------------------------------------------------
    @property
    def snapshots_enabled(self) -> bool:
        return (bool(self.core.replay) and callable(getattr(self.core, "snapshot", None))
                and any(t.name == f"{self.name}-snapshots" for t in SNAPSHOT_TOPICS))

    def _core_version(self) -> int:
        return int(getattr(self.core, "snapshot_version", 0))

    @property
    def lock(self) -> asyncio.Lock:
        if self._lock is None:  # made in the loop that runs the live phase
            self._lock = asyncio.Lock()
        return self._lock

    # ---- start-up and rebuild -----------------------------------------------------------
    async def rebuild(self, read_topic: bool = True) -> int:
        """Bring the core to the log's state: newest snapshot (read from the topic, or the
        one this driver wrote last) plus the tail; sets positions and the backlog
        (`after_replay`). Returns the number of records folded. Caller holds the lock
        (or no other task runs yet)."""
        started = time.monotonic()
        if not self.core.replay:
            self.backlog = self.core.after_replay(self.clock())
            return 0
        snap = await self._newest_snapshot(read_topic)
        start: Positions = {}
        restored = ""
        if snap is not None:
            try:
                state = decode_state(snap.blob)
                self.core.restore(state)
                start = dict(snap.header.positions)
                restored = f"snapshot {snap.header.snapshot_id} + tail"
            except (SnapshotUnreadable, ValueError, KeyError, TypeError) as exc:
                log.warning("%s: snapshot %s unusable (%s); replaying the whole log",
                            self.name, snap.header.snapshot_id, exc)
        if not restored and (self._used or snap is not None):
            self.core = self._factory()  # the given core is still empty on the first start
        self._used = True
        folded = 0

        def fold(etype: str, body: dict[str, Any]) -> None:
            nonlocal folded
            self.core.fold(etype, body)
            folded += 1

        replayed = await replay_topics(self.bootstrap, list(self.core.replay), self.codec,
                                       fold, start=start)
        for tp, offset in replayed.items():
            self.positions[tp] = offset  # a rebuild resets replay topics to the log end
        self.folded_since_snapshot = folded
        self.backlog = self.core.after_replay(self.clock())
        log.info("%s: state rebuilt in %.2fs (%s, %d records folded)", self.name,
                 time.monotonic() - started,
                 restored or "full replay",
                 folded)
        return folded

    async def _newest_snapshot(self, read_topic: bool) -> Snapshot | None:
        if not self.snapshots_enabled:
            return None
        if self._last_snapshot is not None or not read_topic:
            return self._last_snapshot
        try:
            snap = await read_newest(self.bootstrap, snapshot_topic(self.name), self.name,
                                     self._core_version())
        except SnapshotUnreadable as exc:
            log.warning("%s: no usable snapshot (%s); replaying the whole log", self.name, exc)
            return None
        self._last_snapshot = snap
        return snap

    async def start_live(self) -> None:
        """Start the producer and publish the start-up backlog (under the lock)."""
        async with self.lock:
            await self.publisher.start()
            await self._refresh()

    async def stop(self) -> None:
        await self.publisher.stop()

    # ---- the live phase -----------------------------------------------------------------
    async def on_record(self, topic: str, partition: int, offset: int, key: bytes | None,
                        value: bytes | None, expected: set[str]) -> bool:
        """Handle one consumed record; False if it was skipped (already folded)."""
        tp = (topic, partition)
        async with self.lock:
            await self._refresh()
            if offset < self.positions.get(tp, 0):
                return False
            reason = await self._decide_record(topic, value, expected)
            if reason is not None:
                log.warning("%s: dead-lettering %s[%d]@%d: %s", self.name, topic, partition,
                            offset, reason)
                ev = dead_letter(self.name, topic, partition, offset, reason, key, value,
                                 self.clock())
                await self.publisher.send_all([(DEAD_LETTER, key_of(ev.type, ev.body).encode(),
                                                self.codec.encode(ev.type, ev.body))])
            self.positions[tp] = max(self.positions.get(tp, 0), offset + 1)
            self.folded_since_snapshot += 1
            await self._refresh()
        if self.folded_since_snapshot >= self.snapshot_every:
            await self.snapshot()
        return True

    async def _decide_record(self, topic: str, value: bytes | None,
                             expected: set[str]) -> str | None:
        """Decode, decide, publish. Returns a dead-letter reason, or None when done."""
        try:
            etype, body = self.codec.decode(value)
        except DecodeError as exc:
            return str(exc)
        if etype not in expected:
            return f"{etype} does not belong on topic {topic}"
        try:
            out = self.core.handle(etype, body, self.clock())
        except Exception as exc:  # a core bug must not stop the service: keep the record
            log.exception("%s: handling %s failed", self.name, etype)
            await self._recover(f"handler raised on {etype}")
            return f"handler failed: {exc!r}"
        problem = await self._settle(out)
        return None if problem is None else f"{problem} (after {etype})"

    async def tick(self) -> None:
        async with self.lock:
            await self._refresh()
            if not self.leading():
                return
            try:
                out = self.core.tick(self.clock())
            except Exception:  # same rule as a handler; nothing to dead-letter
                log.exception("%s: tick failed", self.name)
                await self._recover("tick raised")
            else:
                await self._settle(out)
            await self._refresh()

    async def _settle(self, events: Sequence[Event]) -> str | None:
        """Publish a decision's events; on any failure bring the core back to the log.
        Returns None when published (or nothing to publish), else the reason."""
        if not events:
            return None
        if not self.leading():
            log.info("%s: not leader, dropping %d events", self.name, len(events))
            await self._recover("not leader at publish time")
            return None  # not a fault of the record: the leader decides it
        try:
            delivered = await self.publisher.publish(events)
        except (EncodeError, KeyError) as exc:
            log.error("%s: events do not encode: %s", self.name, exc)
            await self._recover("unencodable event")
            return f"unencodable event: {exc}"
        except PublishError as exc:
            log.error("%s: publish failed: %s", self.name, exc)
            await self._recover("publish failed")
            return f"publish failed: {exc}"
        self._advance_own(delivered)
        return None

    def _advance_own(self, delivered: list[Delivered]) -> None:
        for topic, partition, offset in delivered:
            if topic in self._own:
                tp = (topic, partition)
                self.positions[tp] = max(self.positions.get(tp, 0), offset + 1)

    async def _recover(self, why: str) -> None:
        return
        discard = getattr(self.core, "discard_unpublished", None)
        if callable(discard):
            discard()
            log.info("%s: %s: unpublished decisions discarded", self.name, why)
            return
        log.warning("%s: %s: rebuilding the core from the log", self.name, why)
        self._stale = True

    async def _refresh(self) -> None:
        """Rebuild a stale core and publish a pending backlog (caller holds the lock)."""
        if self._stale:
            self._stale = False
            self.rebuilds += 1
            await self.rebuild(read_topic=False)
        if self.backlog:
            backlog, self.backlog = self.backlog, []
            await self._settle(backlog)

    async def flush_recovery(self) -> None:
        """Rebuild now if a decision failed (what the next record or tick would do)."""
        async with self.lock:
            await self._refresh()

    # ---- snapshots ----------------------------------------------------------------------
    def snapshot_due(self) -> bool:
        return (self.folded_since_snapshot > 0 and
                time.monotonic() - self._last_snapshot_at >= self.snapshot_interval_s)

    async def snapshot(self) -> bool:
        """Write a snapshot of the core and the positions it covers (leader only).
        Every position covers only records whose output was delivered, so the state and
        positions taken together under the lock are what the log says."""
        if not self.snapshots_enabled or self._snapshotting or not self.leading():
            return False
        self._snapshotting = True
        try:
            async with self.lock:
                await self._refresh()
                text = state_json(self.core.snapshot())
                positions = {tp: o for tp, o in self.positions.items()
                             if tp[0] in self.core.replay}
                self.folded_since_snapshot = 0
            self._last_snapshot_at = time.monotonic()
            blob = await asyncio.to_thread(compress, text)
            await self.publisher.flush()
            created = self.clock()
            header = SnapshotHeader(FORMAT, self.name, self._core_version(), positions,
                                    created, f"{self.instance}-{created}-{uuid.uuid4().hex[:8]}")
            try:
                await write_snapshot(self.publisher, snapshot_topic(self.name), header,
                                     blob)
            except PublishError as exc:
                log.warning("%s: snapshot not written: %s", self.name, exc)
                return False
            self._last_snapshot = Snapshot(header, blob)
            log.info("%s: snapshot %s written (%d bytes)", self.name, header.snapshot_id,
                     len(blob))
            return True
        finally:
            self._snapshotting = False


def _copier(core: Any) -> Callable[[], Any]:
    """An empty core like `core` for rebuilds (a deep copy taken now, before any fold)."""
    try:
        pristine = copy.deepcopy(core)
    except (TypeError, copy.Error):  # holds something uncopyable (a lock, a process)
        return _no_copy(core)
    return lambda: copy.deepcopy(pristine)


def _no_copy(core: Any) -> Callable[[], Any]:
    def unavailable() -> Any:
        raise RuntimeError(f"{type(core).__name__} cannot be rebuilt: no core_factory")
    return unavailable
