"""CoreDriver: runs one core by the contract of `peloton.bus.service` ("decide, publish,
then commit"), with no Faust in it, so tests drive it batch by batch (`on_records`) or
record by record (`on_record`, a batch of one).

Every call into the core (`handle`, `tick`, `after_replay`, `snapshot`, a rebuild) holds
one asyncio lock. A batch of records is decided in order under it; the events of the whole
batch are then published at once and their delivery awaited once (one broker round trip
per batch, not per record), before the next decision starts. The records' positions
advance only after that. Batches that arrive while the lock is held (other topics'
agents) wait in an inbox; one task (`_drain`) decides all that waits at each turn of the
lock as one batch, and each caller returns as soon as its own batch is done.

When a decision does not reach the log (the core raised, an event did not encode, the
broker refused it, or this instance is not the leader at publish time) the core is brought
back to what the log says: `core.discard_unpublished()` if the core has it and only its
last call is to be undone, otherwise a rebuild (the newest snapshot, or an empty core, plus
the log tail; the start-up path). `_decide_batch` says what that means in a batch.

A record may hold several facts (the job manager's TaskStateChanged of many jobs, joined
by `peloton.bus.coalesce`): the core is called once per fact, in order, and a failure in
one of them undoes the record's calls so far (a rebuild when more than one is to be undone).

A core may read some topics whole with no group offset there (`core.rehandle`: a job
manager shard's launches and statuses): their positions go into its snapshots, and a
rebuild that decides handles their records again from the restored snapshot's positions
(`peloton.bus.rehandle`), its decisions published before the `after_replay` backlog.

Ticks leave the loop to the consumers: a tick that took longer than `SLOW_TICK_S` is
followed by as long without ticks (calls of `tick` in that window return at once), so a
core whose periodic decisions grow costly (the resource manager with tens of thousands of
queued jobs) still folds its inputs at least half of the time, instead of deciding on an
ever staler state while its backlog grows.

Ticks come sooner when work arrives: a core that says so (`tick_wanted()`: the resource
manager when runs began to wait for admission, placement when runs joined its queue, the
host manager when placements wait for their launch; the shards of a partitioned placement
or host manager do not ask, they keep their timers) is ticked right after the batch that
brought it, instead of at its next timer tick (up to `tick_interval` later, on every stage
of a task's way to its host), but never sooner than `EAGER_TICK_GAP_S` after the last
tick began, nor so often that ticks take more than `EAGER_TICK_SHARE` of the time.

Snapshots: `snapshots=False` turns them off (never read nor written: every start is a full
replay). Otherwise the leader writes one every `snapshot_interval_s` seconds and after
`snapshot_every` records (0 turns that trigger off), if anything was folded since the last,
but never sooner after the last than its cost allows: writing the state is O(state), so
the next waits at least as long as the last took divided by `SNAPSHOT_SHARE` (snapshots
take at most that share of the time). A service with 100,000 tasks in flight otherwise
spent a quarter of its time snapshotting (the records trigger fired every few seconds) and
a burst's cost per task grew with its size; the tail a restart replays grows instead, about
as long as the state itself. The state is written by a forked child (`peloton.bus.
snapshotfork`), so the loop is held only for the fork, not for the writing (which held it
100-350 ms per snapshot under load and set the p99 of submit -> RUNNING); the log line says
how long each took and held.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from peloton.bus import snapshotfork
from peloton.bus.brokercounts import broker_partition_counts
from peloton.bus.catalog import DEAD_LETTER, SNAPSHOT_TOPICS, snapshot_topic
from peloton.bus.codec import Codec, DecodeError, EncodeError
from peloton.bus.deadletter import dead_letter
from peloton.bus.keys import key_of
from peloton.bus.metrics import PUBLISH_REFUSED, service_label
from peloton.bus.publisher import Delivered, Publisher, PublishError
from peloton.bus.rehandle import rehandle_topics
from peloton.bus.replay import Positions, StartBeyondEnd, replay_topics
from peloton.bus.snapshots import (
    FORMAT,
    Snapshot,
    SnapshotHeader,
    SnapshotUnreadable,
    compress,
    decode_state,
    read_snapshots,
    state_json,
    write_snapshot,
)
from peloton.model.event import Event

__all__ = ["CoreDriver", "Record", "now_ms"]

log = logging.getLogger(__name__)


#: what `_publish_batch` made of a batch's events
_PUBLISHED, _DROPPED, _RETRY = object(), object(), object()

Record = tuple[str, int, int, bytes | None, bytes | None]
"""A consumed record: (topic, partition, offset, key, value)."""
_Inbound = tuple[list[Record], Mapping[str, Collection[str]], "asyncio.Future[int]"]


SLOW_TICK_S = 0.05
#: a tick the core asked for (`tick_wanted`) waits at least this long after the last began
EAGER_TICK_GAP_S = 0.01
#: ... and at least as long as the last took divided by this (ticks asked for take at
#: most this share of the time, beside the timer's)
EAGER_TICK_SHARE = 0.25
#: at most this share of a service's time goes to writing snapshots (module doc)
SNAPSHOT_SHARE = 0.02
#: a batch whose events the broker refused for now (`PublishError.retriable`) is decided
#: again after this long, doubled at each refusal in a row up to `REFUSED_RETRY_MAX_S`
REFUSED_RETRY_S = 0.1
REFUSED_RETRY_MAX_S = 5.0
#: refused for this long in a row, the driver gives up: the batch's records are neither
#: handled nor acked, the error reaches the shell and the process stops, so that a
#: restart reads them again (as a Kafka Streams thread dies when its producer's delivery
#: timeout passes) rather than holding every input, tick and snapshot behind the lock
REFUSED_GIVE_UP_S = 120.0


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
        snapshots: bool = True, takes: Callable[[str, int], bool] | None = None,
        snapshot_service: str | None = None,
    ) -> None:
        self.name = name
        #: the partitions this driver's core reads (None: all; a shard: its own)
        self.takes = takes
        #: whose snapshot topic it writes to (a shard: its service's; headers name `name`)
        self.snapshot_service = snapshot_service or name
        self.instance = instance
        self.core = core
        self.bootstrap = bootstrap
        self.codec = codec
        self.leading = leading
        self.clock = clock
        self.positions: Positions = {}
        self.publisher = Publisher(bootstrap, codec)
        self.snapshots = snapshots
        self.snapshot_interval_s = snapshot_interval_s
        self.snapshot_every = snapshot_every
        self.folded_since_snapshot = 0
        self.rebuilds = 0
        self.backlog: list[Event] = []
        self._factory = core_factory or (_copier(core) if core.replay else _no_copy(core))
        self._lock: asyncio.Lock | None = None
        self._inbox: list[_Inbound] = []  # batches waiting for the lock (`on_records`)
        self._refusals = 0  # publishes the broker refused in a row (`_refused`)
        self._refused_since: float | None = None  # monotonic time of the first of them
        self._drainer: asyncio.Task[None] | None = None  # deciding the inbox (`_drain`)
        self._stale = False
        self._stale_read_topic = False  # the next rebuild reads the snapshot topic
        self._led: bool | None = None  # leading at the last refresh (None: not checked yet)
        self._used = False  # has the core folded or decided anything yet
        self._last_snapshot: Snapshot | None = None
        self._last_snapshot_at = time.monotonic()
        self._snapshot_cost_s = 0.0  # how long the last snapshot took to build
        self._snapshotting = False
        self._fork = True  # off once a child crashed (`peloton.bus.snapshotfork`)
        self._tick_free_at = 0.0  # monotonic time before which a tick yields (see doc)
        self._tick_began = self._tick_took = 0.0  # the last tick's start, duration (monotonic)
        self._eager: asyncio.Handle | asyncio.Task[None] | None = None  # a tick asked for
        # replay topics the core does not consume live: only its own output lands there,
        # so their position is what this shell delivered (see `_advance_own`)
        self._own = set(core.replay) - set(core.inputs)
        self._partition_counts: dict[str, int] | None = None  # `_tell_partitions`
        self._restored_from: Positions = {}  # the positions of the snapshot restored last

    # ---- properties of the core ---------------------------------------------------------
    @property
    def snapshots_enabled(self) -> bool:
        return (self.snapshots and bool(self.core.replay)
                and callable(getattr(self.core, "snapshot", None))
                and any(t.name == f"{self.snapshot_service}-snapshots"
                        for t in SNAPSHOT_TOPICS))

    @property
    def last_snapshot_ms(self) -> int | None:
        """When the newest snapshot this driver restored or wrote was taken (ms since the
        epoch), None if none (metrics: snapshot age)."""
        snap = self._last_snapshot
        return None if snap is None else snap.header.created_at

    def _core_version(self) -> int:
        return int(getattr(self.core, "snapshot_version", 0))

    @property
    def lock(self) -> asyncio.Lock:
        if self._lock is None:  # made in the loop that runs the live phase
            self._lock = asyncio.Lock()
        return self._lock

    # ---- start-up and rebuild -----------------------------------------------------------
    async def rebuild(self, read_topic: bool = True, decide: bool = True) -> int:
        """Bring the core to the log's state: newest snapshot (read from the topic, or the
        one this driver wrote last) plus the tail; sets positions and, if `decide`, the
        backlog (`after_replay`: the decisions for what the replay folded). Returns the
        number of records folded. Caller holds the lock (or no other task runs yet). If
        `after_replay` raises, the core is rebuilt once more without it (a core as the log
        says, no backlog): a start never crashes on it."""
        folded = await self._rebuild(read_topic)
        await self._tell_partitions()
        self.backlog = []
        if not decide:
            return folded
        again = await self._handle_again()
        try:
            self.backlog = again + self.core.after_replay(self.clock())
        except Exception:  # a core bug: no decisions now, the state stays as the log says
            log.exception("%s: after_replay raised; rebuilding without its decisions",
                          self.name)
            self.backlog = []
            if self.core.replay:
                folded = await self._rebuild(read_topic=False)
                await self._tell_partitions()
                self.backlog = await self._handle_again()
        return folded

    async def _handle_again(self) -> list[Event]:
        """The decisions of the records of the core's `rehandle` topics (read whole, no
        group offset) since the restored snapshot's positions (`peloton.bus.rehandle`);
        their positions move to where that ended (none for a core without them)."""
        decided, reached, handled = await rehandle_topics(
            self.bootstrap, self.core, self.codec, self._restored_from, self.clock(),
            self.takes, self.name)
        self.positions.update(reached)
        # records past what the newest snapshot covers make the next one due, as folds do
        # (else a shard that only handled records again would wait for new ones)
        self.folded_since_snapshot += handled
        return decided

    async def _tell_partitions(self) -> None:
        """Tell a core that asks (`partitions_known`) its input topics' partition counts on
        the broker (`peloton.bus.brokercounts`), asked once per driver: counts never shrink
        and a grown topic is seen at the next start."""
        tell = getattr(self.core, "partitions_known", None)
        if tell is None:
            return
        if self._partition_counts is None:
            self._partition_counts = await broker_partition_counts(self.bootstrap,
                                                                   self.core.inputs)
        tell(self._partition_counts)

    async def _rebuild(self, read_topic: bool) -> int:
        started = time.monotonic()
        if not self.core.replay:
            return 0
        candidates = await self._snapshots(read_topic)
        start: Positions = {}
        self._restored_from = start
        restored = ""
        fresh = self._used  # the given core is still empty on the first start
        for snap in candidates:
            try:
                state = decode_state(snap.blob)
                if fresh:
                    self.core = self._factory()
                fresh = True  # a restore that fails half-way leaves a core to throw away
                self.core.restore(state)
            except (SnapshotUnreadable, ValueError, KeyError, TypeError,
                    ArithmeticError) as exc:  # ArithmeticError: int(inf) in a core
                log.warning("%s: snapshot %s unusable (%s)", self.name,
                            snap.header.snapshot_id, exc)
                continue
            start = self._restored_from = dict(snap.header.positions)
            restored = f"snapshot {snap.header.snapshot_id} + tail"
            self._last_snapshot = snap
            break
        if not restored and candidates:
            log.warning("%s: no snapshot could be restored; replaying the whole log",
                        self.name)
        if not restored and fresh:
            self.core = self._factory()
        self._used = True
        try:
            return await self._fold_tail(start, restored or "full replay", started)
        except StartBeyondEnd as exc:
            log.warning("%s: snapshot %s does not fit this log (%s); replaying the whole "
                        "log", self.name, restored, exc)
            self._last_snapshot = None
            self._restored_from = {}
            self.core = self._factory()
            return await self._fold_tail({}, "full replay", started)

    async def _fold_tail(self, start: Positions, how: str, started: float) -> int:
        """Fold the replay topics from `start` to the log end and set their positions."""
        folded = 0

        def fold(etype: str, body: dict[str, Any]) -> None:
            nonlocal folded
            self.core.fold(etype, body)
            folded += 1

        replayed = await replay_topics(self.bootstrap, list(self.core.replay), self.codec,
                                       fold, start=start,
                                       skip=getattr(self.core, "replay_skips", ()),
                                       takes=self.takes)
        for tp, offset in replayed.items():
            self.positions[tp] = offset  # a rebuild resets replay topics to the log end
        self.folded_since_snapshot = folded
        log.info("%s: state rebuilt in %.2fs (%s, %d records folded)", self.name,
                 time.monotonic() - started, how, folded)
        return folded

    async def _snapshots(self, read_topic: bool) -> list[Snapshot]:
        """Snapshots to try, newest first: those on the topic (start-up, a new leader),
        or the last one this driver restored or wrote (a rebuild after a failed decision)."""
        if not self.snapshots_enabled:
            return []
        if not read_topic:
            return [] if self._last_snapshot is None else [self._last_snapshot]
        found, reasons = await read_snapshots(self.bootstrap,
                                              snapshot_topic(self.snapshot_service),
                                              self.name, self._core_version())
        if reasons:
            log.warning("%s: snapshots skipped: %s", self.name, "; ".join(reasons))
        if not found:
            log.log(logging.WARNING if reasons else logging.INFO,
                    "%s: no usable snapshot; replaying the whole log", self.name)
        return found

    async def start_live(self) -> None:
        """Start the producer and publish the start-up backlog (under the lock)."""
        async with self.lock:
            await self.publisher.start()
            await self._refresh()

    async def stop(self) -> None:
        if self._drainer is not None:
            self._drainer.cancel()
            self._drainer = None
        for _, _, fut in self._inbox:
            fut.cancel()
        self._inbox = []
        if self._eager is not None:
            self._eager.cancel()
            self._eager = None
        await self.publisher.stop()

    # ---- the live phase -----------------------------------------------------------------
    async def on_record(self, topic: str, partition: int, offset: int, key: bytes | None,
                        value: bytes | None, expected: Collection[str]) -> bool:
        """Handle one consumed record; False if it was skipped (already folded)."""
        return await self.on_records([(topic, partition, offset, key, value)],
                                     {topic: expected}) == 1

    async def on_records(self, records: Sequence[Record],
                         expected: Mapping[str, Collection[str]]) -> int:
        """Handle a batch of consumed records, in order (`expected`: the event types each
        topic carries). Returns how many were handled (the others were skipped: already
        folded).

        Batches that arrive while another is being decided (other agents' topics) wait in
        an inbox; the drainer (`_drain`) decides all of them as one batch at its next turn
        of the lock, in the order they came (each agent's records keep their order: an
        agent hands over its next batch only once this call returned), so they share one
        broker round trip.
        See `_decide_batch` for what one batch does and how it fails."""
        if not records:
            return 0
        mine: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._inbox.append((list(records), expected, mine))
        if self._drainer is None:
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        handled = await mine
        if (self.snapshot_every and self.folded_since_snapshot >= self.snapshot_every
                and self.snapshot_affordable()):
            await self.snapshot()
        self._tick_soon()
        return handled

    async def _drain(self) -> None:
        """Decide the inbox's batches until it is empty, all that waits at each turn of the
        lock as one batch. The callers of `on_records` only await their own batch: one
        whose records were decided returns at once, not after the lock went round every
        other caller queued behind it (with seven input topics the job manager's records
        waited ~200 ms per visit that way, its lock busy deciding others' batches)."""
        try:
            while self._inbox:
                async with self.lock:
                    taken, self._inbox = self._inbox, []
                    try:
                        await self._decide_all(taken)
                    except BaseException as exc:  # each caller learns its batch failed
                        for _, _, fut in taken:
                            if fut.done():
                                continue
                            if isinstance(exc, asyncio.CancelledError):
                                fut.cancel()
                            else:
                                fut.set_exception(exc)
                        if not isinstance(exc, Exception):
                            raise
        finally:
            if self._drainer is asyncio.current_task():  # not one `stop` already replaced
                self._drainer = None

    def _tick_soon(self) -> None:
        """Tick soon if the core asks for it (module doc), unless a tick is on its way."""
        wanted = getattr(self.core, "tick_wanted", None)
        if wanted is None or self._eager is not None or not self._led or not wanted():
            return
        due = self._tick_began + max(EAGER_TICK_GAP_S, self._tick_took / EAGER_TICK_SHARE)
        loop = asyncio.get_running_loop()
        self._eager = loop.call_at(loop.time() + max(0.0, due - time.monotonic()),
                                   self._eager_tick)

    def _eager_tick(self) -> None:
        task = asyncio.get_running_loop().create_task(self.tick())
        self._eager = task  # keeps the task referenced, and no second one is asked for
        task.add_done_callback(self._eager_done)

    def _eager_done(self, task: asyncio.Task[None]) -> None:
        self._eager = None
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: a tick asked for failed: %r", self.name, task.exception())

    async def _decide_all(self, taken: list[_Inbound]) -> None:
        """Decide the batches in `taken` as one (caller holds the lock); each batch's
        future gets how many of its records were handled."""
        records = [rec for recs, _, _ in taken for rec in recs]
        expected: dict[str, Collection[str]] = {}
        for _, carries, _ in taken:
            expected.update(carries)
        handled: set[tuple[str, int, int]] = set()
        step = 1 if self._one_at_a_time() else len(records)
        await self._refresh()
        todo = records
        while todo:
            head, todo = todo[:step], todo[step:]
            while head:  # the records after a failed one go again, after recovery
                done, head = await self._decide_batch(head, expected)
                handled.update(done)
                await self._refresh()
                while head and self._stale and self.leading():
                    # the rebuild's backlog was refused too: the core is not the log's
                    await asyncio.sleep(self._refused_pause_s())
                    await self._refresh()
        self.folded_since_snapshot += len(handled)
        for recs, _, fut in taken:
            if not fut.done():
                fut.set_result(sum((t, p, o) in handled for t, p, o, _, _ in recs))

    def _one_at_a_time(self) -> bool:
        """A core that can only undo its last call takes its records one by one when a
        failed batch could not be rebuilt (it has no replay topics: an agent), or when
        every decision is to be undone anyway (a standby: one undo per record, not a
        rebuild per batch)."""
        if not callable(getattr(self.core, "discard_unpublished", None)):
            return False
        return not self.core.replay or not self.leading()

    async def _decide_batch(self, records: list[Record],
                            expected: Mapping[str, Collection[str]],
                            ) -> tuple[list[tuple[str, int, int]], list[Record]]:
        """Decide the records in order, publish all their events at once, await every
        delivery once, and only then advance the records' positions. Returns the (topic,
        partition, offset) of the records handled, and the records left to decide after a
        failure. Caller holds the lock.

        - A record below its position (folded by a rebuild) is skipped.
        - An undecodable or misplaced record is dead-lettered; the core never sees it.
        - A record whose handler raises, or whose events do not encode, ends the batch:
          the events of the records before it are published (the core holds exactly
          them: they were decided on the log's state), then the core is brought back to
          the log (`_recover`: undo of that one last call, or a rebuild) and the record
          is dead-lettered. The records after it are returned, to be decided after the
          recovery (a rebuild folds those of the replay topics: they are then skipped).
        - Not the leader at publish time, or the broker refuses: nothing of the batch
          counts; the core is brought back to the log (a rebuild, unless the batch was a
          single call). A batch the broker refused for now (a timeout, a leader moving: a
          retriable `PublishError`) is decided again, from its first record the core saw,
          after a pause that doubles with each refusal in a row (`REFUSED_RETRY_S`): its
          records are facts (an agent's end report, a submission) that nothing else would
          bring back, so they are neither dead-lettered nor passed (after
          `REFUSED_GIVE_UP_S` of refusals in a row the error is raised instead: the
          records stay unread for a restart). A batch refused for good (its records too
          large, not authorized) is dead-lettered, as a failed record is; a deposed
          leader's is not (the leader decides it).
        """
        decided: list[Record] = []  # handled by the core; their events are in `out`
        letters: list[tuple[Record, str]] = []
        out: list[tuple[str, bytes, bytes]] = []
        failed: Record | None = None
        failed_calls = 0
        handled: list[tuple[str, int, int]] = []
        rest: list[Record] = []
        calls = 0  # the core's handle calls (a joined record makes one per job)
        seen_from = len(records)  # the first record the core saw
        for i, rec in enumerate(records):
            topic, partition, offset = rec[0], rec[1], rec[2]
            if offset < self.positions.get((topic, partition), 0):
                continue
            handled.append((topic, partition, offset))
            problem, etype, events, made = self._decide_one(rec, expected.get(topic, ()))
            calls += made
            if etype is not None:
                seen_from = min(seen_from, i)
            if events is not None:
                decided.append(rec)
                out += events
            elif etype is None:  # the core never saw it: dead-letter, go on
                letters.append((rec, problem or "unreadable"))
            else:
                failed, failed_calls = rec, made
                letters.append((rec, problem or "failed"))
                rest = records[i + 1:]
                break
        outcome = await self._publish_batch(out, calls, decided, letters)
        if outcome is _RETRY:  # from the first record the core saw (docstring)
            rest = records[seen_from:]
            earlier = {(rec[0], rec[1], rec[2]) for rec in records[:seen_from]}
            letters = [(rec, why) for rec, why in letters if (rec[0], rec[1], rec[2]) in earlier]
            handled = [h for h in handled if h in earlier]
            await asyncio.sleep(self._refused_pause_s())
        elif failed is not None and outcome is _PUBLISHED:  # the earlier ones are in the log
            await self._recover(f"decision failed on {failed[0]}@{failed[2]}", failed_calls)
        for topic, partition, offset, _, _ in records[:len(records) - len(rest)]:
            tp = (topic, partition)
            self.positions[tp] = max(self.positions.get(tp, 0), offset + 1)
        await self._dead_letter(letters)
        return handled, rest

    def _decide_one(self, rec: Record, expected: Collection[str],
                    ) -> tuple[str | None, str | None, list[tuple[str, bytes, bytes]] | None,
                               int]:
        """Decode, decide, encode one record: (problem, event type, encoded events, the
        core's calls). No type: the record never reached the core. Events None: the
        decision failed. A record that joins several jobs' facts is handled fact by fact
        (`Codec.decode_each`), one call each."""
        topic, _, _, _, value = rec
        ignores = getattr(self.core, "ignores", None)
        acts_on = getattr(self.core, "acts_on", None)
        if ignores or acts_on is not None:
            peek = self.codec.event_type(value)
            if peek in expected and ((ignores and peek in ignores) or (
                    acts_on is not None and not acts_on(peek, value))):
                return None, peek, [], 0  # the core would drop it: not even decoded
        try:
            facts = self.codec.decode_each(value)
        except DecodeError as exc:
            return str(exc), None, None, 0
        etype = facts[0][0]
        if etype not in expected:
            return f"{etype} does not belong on topic {topic}", None, None, 0
        events: list[Event] = []
        now = self.clock()
        for calls, (_, body) in enumerate(facts, 1):
            try:
                events += self.core.handle(etype, body, now)
            except Exception as exc:  # a core bug must not stop the service: keep the record
                log.exception("%s: handling %s failed", self.name, etype)
                return f"handler failed: {exc!r}", etype, None, calls
        try:
            return None, etype, self.publisher.encode(events), len(facts)
        except (EncodeError, KeyError) as exc:
            log.error("%s: events do not encode: %s", self.name, exc)
            return f"unencodable event: {exc} (after {etype})", etype, None, len(facts)

    async def _publish_batch(self, out: list[tuple[str, bytes, bytes]], calls: int,
                             decided: list[Record], letters: list[tuple[Record, str]],
                             ) -> object:
        """Publish a batch's events: `_PUBLISHED`, or `_DROPPED` (the core was brought back
        to the log, the whole batch undone; its records dead-lettered when the broker
        refused them for good), or `_RETRY` (undone too; the broker may take them later:
        `_decide_batch` decides the batch again)."""
        if not out:
            return _PUBLISHED
        if not self.leading():
            log.info("%s: not leader, dropping %d events of %d records", self.name,
                     len(out), len(decided))
            await self._recover("not leader at publish time", calls)
            return _DROPPED
        try:
            delivered = await self.publisher.send_all(out)
        except PublishError as exc:
            await self._recover("publish failed", calls)
            self._refused(exc)
            if exc.retriable:
                log.error("%s: publish of %d events of %d records refused (%d in a row), "
                          "deciding them again: %s", self.name, len(out), len(decided),
                          self._refusals, exc)
                return _RETRY
            log.error("%s: publish of %d events failed for good: %s", self.name, len(out),
                      exc)
            letters += [(r, f"publish failed: {exc}") for r in decided]
            return _DROPPED
        self._refusals, self._refused_since = 0, None
        self._advance_own(delivered)
        return _PUBLISHED

    def _refused(self, exc: PublishError) -> None:
        """Count a refusal (`peloton_publish_refused_total`; in a row, for the pause before
        the next try); raise once refusals for now have lasted `REFUSED_GIVE_UP_S`."""
        PUBLISH_REFUSED.labels(service_label(self.name), str(exc.retriable).lower()).inc()
        if not exc.retriable:
            return
        now = time.monotonic()
        self._refusals += 1
        if self._refused_since is None:
            self._refused_since = now
        elif now - self._refused_since > REFUSED_GIVE_UP_S:
            log.critical("%s: the broker refused every publish for %.1f s (%d in a row): "
                         "stopping, so that a restart reads the records again: %s", self.name,
                         now - self._refused_since, self._refusals, exc)
            raise PublishError(f"refused for {now - self._refused_since:.1f} s in a row: "
                               f"{exc}", retriable=True) from exc

    def _refused_pause_s(self) -> float:
        """The pause before trying again after `_refusals` refusals in a row."""
        return min(REFUSED_RETRY_MAX_S,
                   REFUSED_RETRY_S * 2.0 ** min(max(0, self._refusals - 1), 32))

    async def _dead_letter(self, letters: list[tuple[Record, str]]) -> None:
        if not letters:
            return
        out = []
        for (topic, partition, offset, key, value), reason in letters:
            log.warning("%s: dead-lettering %s[%d]@%d: %s", self.name, topic, partition,
                        offset, reason)
            ev = dead_letter(self.name, topic, partition, offset, reason, key, value,
                             self.clock())
            out.append((DEAD_LETTER, key_of(ev.type, ev.body).encode(),
                        self.codec.encode(ev.type, ev.body)))
        try:
            await self.publisher.send_all(out)
        except PublishError as exc:  # the records stay in their topics; say so
            log.error("%s: %d dead letters not written: %s", self.name, len(out), exc)

    async def tick(self) -> None:
        if time.monotonic() < self._tick_free_at:
            return  # the last tick was slow: the consumers have the loop for as long
        async with self.lock:
            await self._refresh()
            if not self.leading():
                return
            started = self._tick_began = time.monotonic()
            try:
                out = self.core.tick(self.clock())
            except Exception:  # same rule as a handler; nothing to dead-letter
                log.exception("%s: tick failed", self.name)
                await self._recover("tick raised")
            else:
                await self._settle(out)
            took = self._tick_took = time.monotonic() - started
            if took > SLOW_TICK_S:
                self._tick_free_at = time.monotonic() + took
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
            self._refused(exc)
            return f"publish failed: {exc}"
        self._refusals, self._refused_since = 0, None
        self._advance_own(delivered)
        return None

    def _advance_own(self, delivered: list[Delivered]) -> None:
        for topic, partition, offset in delivered:
            if topic in self._own:
                tp = (topic, partition)
                self.positions[tp] = max(self.positions.get(tp, 0), offset + 1)

    async def _recover(self, why: str, calls: int = 1) -> None:
        """Bring the core back to the log: undo its last call if it can and only one call
        is to be undone, else a rebuild (at the next `_refresh`)."""
        discard = getattr(self.core, "discard_unpublished", None)
        if callable(discard) and (calls <= 1 or not self.core.replay):
            discard()
            log.info("%s: %s: unpublished decisions discarded", self.name, why)
            return
        log.warning("%s: %s: rebuilding the core from the log", self.name, why)
        self._stale = True

    async def _refresh(self) -> None:
        """Rebuild a stale core and publish a pending backlog (caller holds the lock).

        An instance that has just won the lease starts from what the log says and
        publishes the backlog (`after_replay`) of that state: a core with replay topics it
        does not consume live rebuilds first (newest snapshot on the topic plus the tail);
        one that consumes them all already holds the log's state. A standby decides
        nothing: its rebuilds skip `after_replay`, and a backlog left from the start is
        undone."""
        leading = self.leading()
        if leading and self._led is False:
            if self._own:  # a standby does not see its own topics live: catch up
                log.info("%s: now the leader: rebuilding from the log", self.name)
                self._stale, self._stale_read_topic = True, True
            elif not self._stale:  # its core folded every input: it is the log's state
                log.info("%s: now the leader: deciding its backlog", self.name)
                try:
                    self.backlog = self.core.after_replay(self.clock())
                except Exception:  # as at a rebuild: no decisions, the log's state
                    log.exception("%s: after_replay raised", self.name)
                    await self._recover("after_replay raised")
        self._led = leading
        if self._stale:
            read_topic = self._stale_read_topic
            self._stale = self._stale_read_topic = False
            self.rebuilds += 1
            await self.rebuild(read_topic=read_topic, decide=leading)
        if self.backlog and leading:
            backlog, self.backlog = self.backlog, []
            await self._settle(backlog)
        elif self.backlog:  # a standby decides nothing: forget what after_replay decided
            log.info("%s: standby: %d backlog events left to the leader", self.name,
                     len(self.backlog))
            self.backlog = []
            await self._recover("standby")
            if self._stale:
                self._stale = False
                self.rebuilds += 1
                await self.rebuild(read_topic=False, decide=False)

    async def flush_recovery(self) -> None:
        """Rebuild now if a decision failed (what the next record or tick would do)."""
        async with self.lock:
            await self._refresh()

    # ---- snapshots ----------------------------------------------------------------------
    def snapshot_due(self) -> bool:
        return (self.snapshot_interval_s > 0 and self.folded_since_snapshot > 0 and
                time.monotonic() - self._last_snapshot_at >= self.snapshot_interval_s
                and self.snapshot_affordable())

    def snapshot_affordable(self) -> bool:
        """Has enough time passed since the last snapshot for its cost (module doc)?"""
        return (time.monotonic() - self._last_snapshot_at
                >= self._snapshot_cost_s / SNAPSHOT_SHARE)

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
                began = time.monotonic()
                last = self._last_snapshot
                child = (snapshotfork.start(self._snapshot_blob) if self._fork and
                         snapshotfork.worth_forking(len(last.blob) if last else None)
                         else None)
                text = b"" if child else state_json(self.core.snapshot())
                covered = {*self.core.replay, *getattr(self.core, "rehandle", ())}
                positions = {tp: o for tp, o in self.positions.items() if tp[0] in covered}
                self.folded_since_snapshot = 0
            held_s = time.monotonic() - began
            try:
                if child:
                    blob = await asyncio.to_thread(child.collect)
                else:
                    blob = await asyncio.to_thread(compress, text)
            except snapshotfork.BuildFailed as exc:
                log.warning("%s: snapshot not written: %s", self.name, exc)
                if exc.crashed:
                    self._fork = False
                    log.warning("%s: snapshots are built in the loop from now on",
                                self.name)
                return False
            finally:
                self._last_snapshot_at = time.monotonic()
                self._snapshot_cost_s = self._last_snapshot_at - began
            await self.publisher.flush()
            created = self.clock()
            header = SnapshotHeader(FORMAT, self.name, self._core_version(), positions,
                                    created, f"{self.instance}-{created}-{uuid.uuid4().hex[:8]}")
            try:
                await write_snapshot(self.publisher, snapshot_topic(self.snapshot_service),
                                     header, blob)
            except PublishError as exc:
                log.warning("%s: snapshot not written: %s", self.name, exc)
                return False
            self._last_snapshot = Snapshot(header, blob)
            log.info("%s: snapshot %s written (%d bytes; built in %.0f ms%s; held the loop "
                     "%.0f ms)", self.name, header.snapshot_id, len(blob),
                     self._snapshot_cost_s * 1000, " by a child" if child else "",
                     held_s * 1000)
            return True
        finally:
            self._snapshotting = False

    def _snapshot_blob(self) -> bytes:
        """The core's state, compressed (run by the forked child: `bus/snapshotfork`)."""
        return compress(state_json(self.core.snapshot()))


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
