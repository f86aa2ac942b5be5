"""The shell of a partitioned service: N instances of one consumer group, a core per partition.

A partitioned service (the job manager: `peloton serve jobmgr --partitioned`) runs as any
number of instances of the consumer group `peloton-<service>`. Kafka's group protocol
(Faust's co-partitioned, sticky assignor) gives each instance the same partition numbers of
every co-partitioned topic it reads: the service's own topics and its inbox
(`peloton.bus.routing`). Per instance:

- Router: the routed topics' partitions assigned to this instance are read by a
  `RouterCore` in a `CoreDriver` (stateless: it splits each fact by partition and
  publishes the parts to the inbox, then its records count as done).
- Shards: for each assigned partition p, one core (`shard_factory`) in its own
  `CoreDriver` named `<service>-p<p>`: it reads partition p of the co-partitioned topics
  and all of the others (the broadcast topics: the pools, the hosts; and the types it
  reads whole, `Route.shares`: the job manager's launches and statuses, the host
  manager's placements and job-events), replays partition p of its own replay topics
  plus the broadcast ones it folds, and writes its snapshots,
  named for it, on the service's snapshot topic (every rule of `peloton.bus.service`
  holds per shard: decide, publish, then commit; snapshots cover only published output).
- Broadcast topics are read by one plain consumer (no group: every instance reads them
  whole) from the log end at start, and each record is handed to every shard, which
  skips what its rebuild already folded (or handled again: a core's `rehandle` topics,
  whose positions its snapshots keep, `peloton.bus.rehandle`). On the dev broker a
  partition of job-events (the host manager's shards read it whole) is read at most
  every 100 ms (`devbroker.whole_read_pace`, `peloton.bus.fetchpace`: fewer, larger
  reads, cheaper per record for the host manager and the broker). A shard being built
  holds the broadcast reader back, so no broadcast record falls between its replay's end
  and its first live record.

Rebalances (a member joins, leaves, or, on Apache Kafka, is evicted after the session
timeout; the dev broker never evicts a killed member: a restart of the same instance
rejoins as it, `peloton.bus.devbroker`):
- Revoked (Faust first waits until the records in flight are done and commits): each
  revoked shard is suspended at once (no tick, no broadcast record, no snapshot timer),
  and a snapshot of it is written, so the next owner starts from it.
- Assigned: a suspended shard assigned again resumes as it was (nobody else owned it in
  between: the group completes a rebalance only after every member revoked); one assigned
  elsewhere is dropped; a newly assigned partition gets a new shard, built like a
  restarted service: its newest snapshot plus the tail of partition p, `after_replay`
  published, then live records from the group's committed offsets (records the rebuild
  folded are skipped). Records of a partition whose shard is still being built wait for it.
So a partition changes owner without losing a decision (the new owner replays every
decision its predecessor published, and receives again every input whose decision was not
committed) or repeating one (the cores are idempotent to redelivered inputs). A snapshot
names its shard (`<service>-p<k>`): another partition's snapshot is never restored (the
reader passes over its siblings' manifests on the shared topic).

Static membership (`static_membership=True`, the chart's StatefulSet: the instance name is
the pod name, stable across restarts): the member joins with `group.instance.id`
`peloton-<service>-<instance>`, so on Apache Kafka a restarted pod takes its partitions back
without a rebalance of the others if it returns within the session timeout, and no member
of a dead pod lingers (the restarted pod replaces it).

Limit: there is no zombie fencing. An instance cut off from the group that does not know
it yet could still publish for a partition its successor owns (Kafka transactions fence
this on Apache Kafka; the dev broker has none). Run the service where the broker evicts
or the orchestrator kills a stuck member (the chart's StatefulSet with liveness probes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from mode import Service

from peloton.bus.brokercounts import check_sharded
from peloton.bus.catalog import topic
from peloton.bus.codec import Codec, default_codec
from peloton.bus.devbroker import consumer_settings, log_end_offsets, whole_read_pace
from peloton.bus.driver import CoreDriver, Record
from peloton.bus.faustapp import ensure_topics, make_app
from peloton.bus.fetchpace import FetchPacer, paced_getmany
from peloton.bus.health import Health
from peloton.bus.intake import add_intake
from peloton.bus.kafkaconfig import client_settings
from peloton.bus.readiness import announce_ready
from peloton.bus.routing import Route, RouterCore, check_copartitioned
from peloton.bus.service import ServiceCore, run_worker

__all__ = ["PartitionedShell"]

log = logging.getLogger(__name__)

REVOKE_SNAPSHOT_S = 1.0  # at most this long for the snapshot of a revoked shard


class PartitionedShell:
    def __init__(
        self, name: str, instance: str, route: Route,
        shard_factory: Callable[[int], ServiceCore], bootstrap: str,
        codec: Codec | None = None, snapshot_interval_s: float = 10.0,
        snapshot_every: int = 20_000, snapshots: bool = True, batch_max: int = 500,
        health_port: int | None = None,
        health_bind: str = "0.0.0.0", web_port: int | None = None,
        web_bind: str = "127.0.0.1", static_membership: bool = False,
    ) -> None:
        check_copartitioned(route)
        self.name, self.instance, self.route = name, instance, route
        self.bootstrap = bootstrap
        self.codec = codec or default_codec()
        self.shard_factory = shard_factory
        sample = shard_factory(0)
        self.sharded = frozenset(route.sharded)
        self.live = [t for t in sample.inputs if t in self.sharded]
        self.broadcast = [t for t in sample.inputs if t not in self.sharded]
        #: the event types each shard input topic carries (what a driver accepts there)
        self.carries = {t: set(topic(t).events) for t in sample.inputs}
        self.tick_interval = sample.tick_interval
        self.driver_options: dict[str, Any] = dict(
            snapshot_interval_s=snapshot_interval_s, snapshot_every=snapshot_every,
            snapshots=snapshots)
        self.batch_max = batch_max
        self.health_port, self.health_bind = health_port, health_bind
        self.router = CoreDriver(f"{name}-router", RouterCore(route), bootstrap, self.codec,
                                 instance=instance, snapshots=False)
        self.shards: dict[int, CoreDriver] = {}
        self.suspended: dict[int, CoreDriver] = {}
        self._building: dict[int, asyncio.Task[CoreDriver]] = {}
        self._assigned: set[int] = set()  # the partitions of the latest assignment
        self._tail_lock: asyncio.Lock | None = None
        static: dict[str, Any] = ({"consumer_group_instance_id": f"peloton-{name}-{instance}"}
                                  if static_membership else {})
        self.app = make_app(f"peloton-{name}", bootstrap, web_port=web_port,
                            web_bind=web_bind, member=instance, **static)
        self.health = Health(f"{name}-{instance}", role=lambda: "partitioned")
        self.health.require("rebuilt", "consuming")
        self._wire()

    @property
    def tail_lock(self) -> asyncio.Lock:
        if self._tail_lock is None:
            self._tail_lock = asyncio.Lock()
        return self._tail_lock

    def owned(self) -> list[int]:
        return sorted(self.shards)

    # ---- running ----------------------------------------------------------------------
    def run(self) -> None:
        run_worker(self.app, self.health, self.health_port, self.health_bind, self._prepare)

    async def _prepare(self) -> None:
        await ensure_topics(self.bootstrap)
        # topics made with another count (an older setting) would split keys otherwise
        await check_sharded(self.bootstrap, self.name, self.sharded)
        self.health.passed("rebuilt")  # each shard rebuilds when it is assigned

    def _wire(self) -> None:
        router_carries = {t: set(topic(t).events) for t in self.router.core.inputs}
        for name in self.router.core.inputs:
            self._intake(name, self._to_router(router_carries))
        for name in self.live:
            self._intake(name, self._to_shards(self.carries))
        if self.tick_interval:
            self.app.timer(self.tick_interval, name=f"{self.name}-tick")(self._tick)
        self.app.timer(1.0, name=f"{self.name}-snapshot")(self._snapshots)
        shell = self

        @self.app.on_partitions_revoked.connect  # type: ignore[arg-type]
        async def _revoked(sender: Any, revoked: set[Any], **kwargs: Any) -> None:
            await shell.revoked({tp.partition for tp in revoked if tp.topic in shell.sharded})

        @self.app.on_partitions_assigned.connect  # type: ignore[arg-type]
        async def _assigned(sender: Any, assigned: set[Any], **kwargs: Any) -> None:
            current = shell.app.consumer.assignment()
            await shell.assigned({tp.partition for tp in current if tp.topic in shell.sharded})

        self.app.task(self._tail_broadcast)

        class Lifecycle(Service):
            async def on_start(self) -> None:
                shell.health.watch(asyncio.get_running_loop())
                async with shell.router.lock:
                    await shell.router.publisher.start()
                started()

            async def on_stop(self) -> None:
                shell.health.passed("consuming", False)
                for driver in (*shell.shards.values(), *shell.suspended.values()):
                    await driver.stop()
                await shell.router.stop()

        started = announce_ready(self.app, f"{self.name}-{self.instance}", after_start=True,
                                 on_ready=lambda: self.health.passed("consuming"))
        self.app.service(Lifecycle)

    def _intake(self, topic_name: str, handle: Callable[[list[Record]], Any]) -> None:
        add_intake(self.app, topic_name, f"{self.name}-{topic_name}", handle, self.batch_max)

    def _to_router(self, carries: dict[str, set[str]]) -> Callable[[list[Record]], Any]:
        async def handle(records: list[Record]) -> None:
            await self.router.on_records(records, carries)
        return handle

    def _to_shards(self, carries: dict[str, set[str]]) -> Callable[[list[Record]], Any]:
        async def handle(records: list[Record]) -> None:
            by_partition: dict[int, list[Record]] = {}
            for rec in records:
                by_partition.setdefault(rec[1], []).append(rec)
            for p, recs in sorted(by_partition.items()):
                driver = await self._shard(p)
                if driver is None:
                    log.warning("%s: %d records of partition %d, which this instance does "
                                "not own: left to its owner", self.name, len(recs), p)
                    continue
                await driver.on_records(recs, carries)
        return handle

    async def _shard(self, p: int) -> CoreDriver | None:
        if p in self.shards:
            return self.shards[p]
        task = self._building.get(p)
        if task is not None:
            await asyncio.shield(task)
            return self.shards.get(p)  # None if it was revoked while it was built
        return None

    # ---- rebalances --------------------------------------------------------------------
    async def revoked(self, partitions: set[int]) -> None:
        """Suspend the revoked shards now; snapshot them for whoever owns them next (a
        shard still being built is dropped when its build ends: `_build`)."""
        self._assigned -= partitions
        for p in sorted(partitions):
            driver = self.shards.pop(p, None)
            if driver is None:
                continue
            self.suspended[p] = driver
            if driver.snapshots_enabled and driver.folded_since_snapshot:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(driver.snapshot(), REVOKE_SNAPSHOT_S)
        if partitions:
            log.info("%s-%s: partitions %s revoked", self.name, self.instance,
                     sorted(partitions))

    async def assigned(self, partitions: set[int]) -> None:
        """Resume, drop or build shards so that this instance runs exactly `partitions`."""
        self._assigned = set(partitions)
        for p in sorted(set(self.suspended) - partitions):
            driver = self.suspended.pop(p)
            log.info("%s-%s: partition %d moved to another instance", self.name,
                     self.instance, p)
            await driver.stop()
        for p in sorted(partitions):
            if p in self.suspended:
                self.shards[p] = self.suspended.pop(p)
            elif p not in self.shards and p not in self._building:
                self._building[p] = asyncio.ensure_future(self._build(p))
        log.info("%s-%s: owns partitions %s", self.name, self.instance, sorted(partitions))

    async def _build(self, p: int) -> CoreDriver:
        started = time.monotonic()
        sharded = self.sharded

        def takes(topic_name: str, partition: int) -> bool:
            return topic_name not in sharded or partition == p

        driver = CoreDriver(f"{self.name}-p{p}", self.shard_factory(p), self.bootstrap,
                            self.codec, instance=self.instance,
                            core_factory=partial(self.shard_factory, p), takes=takes,
                            snapshot_service=self.name, **self.driver_options)
        try:
            async with self.tail_lock:  # no broadcast record between replay and joining
                async with driver.lock:
                    await driver.rebuild()
                await driver.start_live()
                if p in self._assigned:
                    self.shards[p] = driver
        finally:
            self._building.pop(p, None)
        if p not in self._assigned:
            # revoked while it was built: kept, it would tick and write snapshots of a
            # partition another instance owns (a stale snapshot the next owner restores)
            # and be taken for built if the partition came back
            log.info("%s-%s: partition %d was revoked while it was being built: dropped",
                     self.name, self.instance, p)
            await driver.stop()
            return driver
        log.info("%s-%s: partition %d ready in %.2fs", self.name, self.instance, p,
                 time.monotonic() - started)
        return driver

    # ---- periodic work -----------------------------------------------------------------
    async def _tick(self) -> None:
        for driver in list(self.shards.values()):
            await driver.tick()

    async def _snapshots(self) -> None:
        for driver in list(self.shards.values()):
            if driver.snapshot_due():
                await driver.snapshot()

    async def _tail_broadcast(self) -> None:
        """Hand every record of the broadcast topics to every shard (see module doc)."""
        if not self.broadcast:
            return
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    **consumer_settings(), **client_settings())  # type: ignore[arg-type]
        await consumer.start()
        try:
            tps = [TopicPartition(t, p) for t in self.broadcast
                   for p in range(topic(t).partitions)]
            consumer.assign(tps)
            async with self.tail_lock:
                # from the log end, or from where a shard built before this reader started
                # stopped its replay (it skips what it folded; without this it would miss
                # the records written between its replay's end and this reader's start)
                ends = await log_end_offsets(consumer, tps)
                for tp in tps:
                    built = [d.positions[(tp.topic, tp.partition)]
                             for d in (*self.shards.values(), *self.suspended.values())
                             if (tp.topic, tp.partition) in d.positions]
                    consumer.seek(tp, min([ends[tp], *built]))
            pacer = FetchPacer({t: ms for t, ms in whole_read_pace().items()
                                if t in self.broadcast})
            while True:
                batch = await paced_getmany(consumer, pacer, 200, self.batch_max)
                records = [(r.topic, r.partition, r.offset, r.key, r.value)
                           for recs in batch.values() for r in recs]
                if not records:
                    continue
                async with self.tail_lock:
                    for driver in list(self.shards.values()):
                        await driver.on_records(records, self.carries)
        finally:
            await consumer.stop()
