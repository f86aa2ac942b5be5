"""The shell every scheduling service runs in: rebuild, consume, decide, publish, commit.

Contract: decide, publish, then commit (the same for every service).
1. Start-up: create missing catalog topics. Load the service's newest snapshot the core
   can restore (`peloton.bus.snapshots`: the core's `restore` plus the log positions it
   covers; a newer unusable one is skipped with a warning) and fold only the tail of the
   core's `replay` topics from those positions to the log end (`core.fold`, no
   decisions; types in `core.replay_skips`, such as heartbeats, are passed over unread).
   With no usable snapshot (none, unreadable, another service's, an older format or core
   version, positions past the log end) fold them from the start, with a warning. Then
   `core.after_replay` gives a backlog of decisions, published like any other: it must
   decide whatever the replay folded that was never handled (the live intake skips it).
   An `after_replay` that raises leaves the core as the log says, with no backlog.
   A core that reads topics whole with no consumer group there (optional `rehandle`: a
   job manager shard's launches and statuses) keeps their positions in its snapshots,
   and its rebuild handles their records again from those positions, after the replay
   (`peloton.bus.rehandle`); the decisions go out before the backlog.
2. Live: a Faust intake task per input topic (`peloton.bus.intake`: the app's consumer
   group and conductor, without a per-record stream) takes the records available (up to
   `batch_max`) and hands the batch to the `CoreDriver`
   (`peloton.bus.driver`), which decides its records in order (the order of each
   partition is kept). Records below the driver's position (already folded by the
   rebuild) are skipped, as are records of the types in the core's optional `ignores`
   (their header names the type; the body is never decoded) and those its optional
   `acts_on(type, value)` says, from the encoded bytes, it would not act on (the host
   manager: a TaskStateChanged naming no end or kill). Undecodable or misplaced
   records go to the dead-letter topic with the reason, and the service keeps going.
3. Decide, publish, commit: every core call holds one lock (Faust runs one intake task per
   topic concurrently, so without it two decisions could interleave; batches of different
   topics take turns). Under it the driver handles each record of the batch, collects the
   events (with the key the catalog declares), hands them all to the producer and awaits
   their delivery once; only then do the positions of the batch's records advance and the
   records count as done (the intake acks a batch's records when the driver returned). So a
   snapshot, or a position, covers only inputs whose output reached the log, and a batch
   costs one broker round trip, not one per record.
4. A decision that does not reach the log leaves no trace: the core is brought back to
   what the log says, by `core.discard_unpublished()` when exactly one call is to be
   undone and the core has it, else by a rebuild (the newest snapshot this shell knows,
   or an empty core, plus the log tail, under the lock; the intake then skips what the
   rebuild folded). In a batch:
   - a record whose handler raises (or whose events do not encode) ends the batch: the
     events of the records before it are published (the core holds exactly those; they
     were decided on the log's state), then that one call is undone (or the core
     rebuilt), the record goes to dead-letters with the reason, and the records after it
     are decided afterwards (those the rebuild folded are skipped);
   - if the broker refuses the batch's events, or a leader finds at publish time that it
     lost its lease, none of the batch counts: the core is rebuilt (undone, for a batch
     of one call). A batch refused for now (a timeout, a partition's leader moving: a
     retriable `PublishError`) is decided again after a pause that doubles with each
     refusal in a row, up to 5 s: its records are facts nothing else brings back (an
     agent's report of a run's end, read live only), so they are neither dead-lettered
     nor passed; refused so for 2 minutes in a row, the service stops (its records not
     acked: a restart reads them again). A batch refused for good (records too large,
     not authorized) is dead-lettered; a dropped decision of a deposed leader is not the
     records' fault and is not dead-lettered (the leader decides them).
   A core that can only undo its last call takes its records one at a time when it has
   nothing to rebuild from (an agent) or does not lead (a standby undoes each decision
   rather than rebuilding per batch).
5. Every `core.tick_interval` seconds, `core.tick` makes the periodic decisions (leader
   only), by the same rule; sooner, right after a batch, when the core says work arrived
   (`core.tick_wanted()`, optional; paced by the driver). Every `snapshot_interval_s`
   (or after `snapshot_every` records; 0 turns either trigger off), the leader writes a
   snapshot, after the producer flushed. `snapshots=False` turns snapshots off: none is
   read or written, every start is a full replay.
A service with a `leader_key` elects a leader through etcd: every instance folds every
record (a hot standby), only the leader ticks, publishes and snapshots, and it checks that
it still holds the lease right before publishing. The election runs on its own thread
(`peloton.ha.threaded`): a decision that holds the event loop for longer than the lease
TTL does not depose the leader; a loop stalled for `MAX_STALL_S` does. A standby's
decisions are undone as in 4 (its rebuilds skip `after_replay`); an instance that wins
the lease starts from the log and publishes its `after_replay` backlog (it rebuilds
first, newest snapshot plus tail, if it has replay topics it does not consume live).

A replay topic the core does not consume live (the job manager's job-events) must be
written by this service alone: its position is the offset of the shell's own last
delivered record there.

Health and metrics (`peloton.bus.health`, `peloton.bus.metrics`): with a `health_port`,
`run` serves /healthz, /readyz and /metrics from before the start-up replay on (alive
throughout it; once the worker runs, alive = its event loop answers). Ready =
"rebuilt" (step 1 done) and "consuming" (partitions assigned); a standby is ready too
(its role is in the body). The shell counts consumed and published records per topic,
times each batch (`peloton_handler_duration_seconds`), samples consumer lag every
`LAG_SAMPLE_S`, and exposes leader state and snapshot age.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from mode import Service

from peloton.bus import eventloop, logformat
from peloton.bus.catalog import topic
from peloton.bus.codec import Codec, default_codec
from peloton.bus.consumerlag import LAG_SAMPLE_S, HandledOffsets, sample_lag
from peloton.bus.driver import CoreDriver, Record, now_ms
from peloton.bus.faustapp import ensure_topics, make_app
from peloton.bus.health import Health, health_server
from peloton.bus.intake import add_intake
from peloton.bus.metrics import (
    EVENTS_CONSUMED,
    HANDLER_SECONDS,
    LEADER,
    SNAPSHOT_AGE_SECONDS,
    count_published,
    service_label,
)
from peloton.bus.publisher import Delivered
from peloton.bus.readiness import announce_ready
from peloton.model.event import Event

__all__ = ["ServiceCore", "SnapshotCore", "ServiceShell", "now_ms", "run_worker"]

log = logging.getLogger(__name__)


class ServiceCore(Protocol):
    inputs: tuple[str, ...]
    replay: tuple[str, ...]
    tick_interval: float | None

    def fold(self, etype: str, body: dict[str, Any]) -> None: ...

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]: ...

    def tick(self, now: int) -> list[Event]: ...

    def after_replay(self, now: int) -> list[Event]: ...


class SnapshotCore(ServiceCore, Protocol):
    """Optional: a core with these is snapshotted (else every start is a full replay).
    `discard_unpublished`, also optional, forgets the decisions of the last call."""

    snapshot_version: int

    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, state: dict[str, Any]) -> None: ...


def run_worker(app: Any, health: Health, port: int | None, bind: str,
               prepare: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Blocking: serve `health` (if a port is set; a taken port fails here, before
    anything else), run `prepare`, then the Faust worker until it is stopped (both
    shells start this way); the worker logs the loop it runs on (`peloton serve` installs
    uvloop before the app is made, `peloton.bus.eventloop`)."""
    eventloop.announce(app, health.service)
    server = health_server(health, port, bind)
    try:
        asyncio.run(prepare())  # /healthz: alive ("starting") however long it takes
        asyncio.set_event_loop(asyncio.new_event_loop())
        logformat.worker(app).execute_from_commandline()
    finally:
        if server is not None:
            server.stop()


class ServiceShell:
    def __init__(
        self, name: str, instance: str, core: ServiceCore, bootstrap: str,
        etcd: str | None = None, leader_key: str | None = None, lease_ttl: float = 2.0,
        codec: Codec | None = None, web_port: int | None = None, web_bind: str = "127.0.0.1",
        snapshot_interval_s: float = 10.0, snapshot_every: int = 20_000,
        core_factory: Callable[[], ServiceCore] | None = None, snapshots: bool = True,
        batch_max: int = 500,
        health_port: int | None = None, health_bind: str = "0.0.0.0",
    ) -> None:
        self.name = name
        self.health_port, self.health_bind = health_port, health_bind
        self.metrics_service = service_label(name)
        self.handled = HandledOffsets()
        self.batch_max = batch_max
        self.instance = instance
        self.bootstrap = bootstrap
        self.codec = codec or default_codec()
        self.election: Any = None
        if leader_key is not None:
            if etcd is None:
                raise ValueError(f"{name}: leader election needs an etcd endpoint")
            from peloton.ha.threaded import ThreadedElection

            # on its own thread: a decision that holds the loop for longer than the lease
            # does not depose the leader (a hung loop still does, peloton.ha.threaded)
            self.election = ThreadedElection(etcd, leader_key, f"{name}-{instance}",
                                             ttl=lease_ttl)
        self.driver = CoreDriver(name, core, bootstrap, self.codec, leading=self.leading,
                                 instance=instance, snapshot_interval_s=snapshot_interval_s,
                                 snapshot_every=snapshot_every, core_factory=core_factory,
                                 snapshots=snapshots)
        self.app = make_app(f"peloton-{name}-{instance}", bootstrap, web_port=web_port,
                            web_bind=web_bind)
        self.health = Health(f"{name}-{instance}", role=self.role)
        self.health.require("rebuilt", "consuming")
        self._wire(core)
        self._meter()

    @property
    def core(self) -> Any:
        """The current core (a rebuild may replace the object)."""
        return self.driver.core

    # ---- start-up -------------------------------------------------------------------
    async def prepare(self) -> None:
        await ensure_topics(self.bootstrap)
        await self.driver.rebuild()
        self.health.passed("rebuilt")

    def run(self) -> None:
        """Blocking: serve health, prepare, then run the Faust worker (`run_worker`)."""
        run_worker(self.app, self.health, self.health_port, self.health_bind, self.prepare)

    def leading(self) -> bool:
        return self.election is None or bool(self.election.still_leader())

    def role(self) -> str:
        """The role /readyz shows: leader or standby (with leader election), else single."""
        if self.election is None:
            return "single"
        return "leader" if self.leading() else "standby"

    # ---- metrics --------------------------------------------------------------------
    def _meter(self) -> None:
        svc = self.metrics_service
        for name in self.core.inputs:  # series exist (at 0) before the first record
            EVENTS_CONSUMED.labels(svc, name)
        LEADER.labels(svc).set_function(lambda: 1.0 if self.leading() else 0.0)
        if self.driver.snapshots_enabled:
            SNAPSHOT_AGE_SECONDS.labels(svc).set_function(self._snapshot_age)
        self.driver.publisher.on_delivered = self._delivered

    def _delivered(self, delivered: list[Delivered]) -> None:
        count_published(self.metrics_service, (t for t, _, _ in delivered))

    def _snapshot_age(self) -> float:
        taken = self.driver.last_snapshot_ms
        return math.nan if taken is None else max(0.0, (now_ms() - taken) / 1000)

    def _handled(self, topic_name: str, records: list[tuple[str, int, int]],
                 seconds: float) -> None:
        EVENTS_CONSUMED.labels(self.metrics_service, topic_name).inc(len(records))
        HANDLER_SECONDS.labels(self.metrics_service, topic_name).observe(seconds)
        self.handled.note(records)

    async def _sample_lag(self) -> None:
        await sample_lag(self.app, self.metrics_service, self.handled)

    # ---- wiring ---------------------------------------------------------------------
    def _wire(self, core: ServiceCore) -> None:
        for name in core.inputs:
            self._add_intake(name)
        if core.tick_interval:
            self.app.timer(core.tick_interval, name=f"{self.name}-tick")(self.driver.tick)
        if self.driver.snapshots_enabled:
            self.app.timer(1.0, name=f"{self.name}-snapshot")(self._maybe_snapshot)
        shell = self

        class Lifecycle(Service):
            async def on_start(self) -> None:
                shell.health.watch(asyncio.get_running_loop())
                if shell.election is not None:
                    await shell.election.start()
                await shell.driver.start_live()
                started()

            async def on_stop(self) -> None:
                shell.health.passed("consuming", False)
                if shell.election is not None:
                    await shell.election.stop()
                await shell.driver.stop()

        started = announce_ready(self.app, self.name, after_start=True,
                                 on_ready=lambda: self.health.passed("consuming"))
        self.app.service(Lifecycle)
        self.app.timer(LAG_SAMPLE_S, name=f"{self.name}-lag")(self._sample_lag)

    async def _maybe_snapshot(self) -> None:
        if self.driver.snapshot_due():
            await self.driver.snapshot()

    def _add_intake(self, topic_name: str) -> None:
        expected = set(topic(topic_name).events)
        driver = self.driver
        carries = {topic_name: expected}
        handled = self._handled

        async def consume(records: list[Record]) -> None:
            started = time.perf_counter()
            await driver.on_records(records, carries)
            handled(topic_name, [(t, p, o) for t, p, o, _k, _v in records],
                    time.perf_counter() - started)

        add_intake(self.app, topic_name, f"{self.name}-{topic_name}", consume,
                   self.batch_max)
