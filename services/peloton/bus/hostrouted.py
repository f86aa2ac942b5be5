"""Host-routed consumption: an agent reads only the partitions its hosts hash to, and only
the records keyed by its hosts reach its decoder.

Rule (`HostRoute`): the topics an agent reads are keyed by host (the catalog's `key` of
task-launch-requested, task-kill-requested, host-registered), so the producer's default
partitioner (Kafka's murmur2 of the key, `peloton.bus.routing.partition_for`, the same
the in-memory runner uses) puts every record for host H in partition murmur2(H) mod P.
An agent serving hosts S is assigned (manual assignment, no consumer group: no join, no
rebalance; the dev broker's group joins take seconds) exactly {partition_for(h, P) | h in
S} of each topic, with P the topic's partition count as the BROKER reports it (not the
catalog's: a topic keeps the count it was created with, `peloton.bus.partitions`). Of what
it fetches it keeps the records whose key is one of its hosts (`wants`, a set lookup on the raw key
bytes) and, per topic, of the event types it asked for (`codec.event_type`: the schema
fingerprint, read without decoding); everything else is counted (`skipped`) and never
decoded. So a launch for host A is decoded by the agent of A only, and with enough
partitions (task-launch-requested=64, say) an agent of a few hosts fetches little else.

Where it starts: at the log end of each assigned partition, taken at `start()`, before
the agent registers (the dev broker's ListOffsets "latest" is wrong: `log_end_offsets`
reads the fetch's high watermark instead). Every launch for a new incarnation is decided
after the host manager read that registration, so it lies past this point; launches and
kills written before it are for earlier incarnations, whose runs died with them (the
agent ignores launches that name another incarnation, and the host manager declares the
old incarnation's runs lost: nothing is lost across a restart, nothing is re-read). No
offsets are committed: a restart is a new incarnation and starts at the end again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, TopicPartition

from peloton.bus.codec import Codec
from peloton.bus.devbroker import consumer_settings, log_end_offsets
from peloton.bus.driver import Record
from peloton.bus.kafkaconfig import client_settings
from peloton.bus.routing import partition_for

__all__ = ["host_partitions", "HostRoute", "HostRoutedConsumer"]

log = logging.getLogger(__name__)


def host_partitions(hosts: Iterable[str], partitions: int) -> frozenset[int]:
    """The partitions of a host-keyed topic of `partitions` partitions that hold the
    records of `hosts`."""
    return frozenset(partition_for(h.encode(), partitions) for h in hosts)


@dataclass
class HostRoute:
    """Which records of host-keyed topics an agent serving `hosts` reads (module doc).
    `types`: per topic, the event types kept (a topic not named keeps every type)."""

    hosts: frozenset[str]
    types: Mapping[str, Collection[str]] = field(default_factory=dict)
    kept: int = 0
    skipped: int = 0

    def __post_init__(self) -> None:
        self._keys = frozenset(h.encode() for h in self.hosts)

    def partitions(self, partitions: int) -> frozenset[int]:
        return host_partitions(self.hosts, partitions)

    def wants(self, topic: str, key: bytes | None, value: bytes | None,
              codec: Codec) -> bool:
        """Whether a fetched record goes to the decoder; counts it either way."""
        keep = key is not None and key in self._keys
        if keep and topic in self.types:
            keep = codec.event_type(value) in self.types[topic]
        if keep:
            self.kept += 1
        else:
            self.skipped += 1
        return keep


class HostRoutedConsumer:
    """Reads `topics` for `route`'s hosts from their log end on and hands each fetched
    batch of kept records, in partition order, to `on_records` (awaited before the next
    fetch; a record that decodes badly is the handler's business: the driver dead-letters
    it)."""

    def __init__(self, bootstrap: str, topics: Collection[str], route: HostRoute,
                 codec: Codec, on_records: Callable[[list[Record]], Awaitable[object]],
                 max_records: int = 500) -> None:
        self.bootstrap = bootstrap
        self.topics = tuple(topics)
        self.route = route
        self.codec = codec
        self.on_records = on_records
        self.max_records = max_records
        self.assigned: list[TopicPartition] = []
        self._consumer: AIOKafkaConsumer | None = None

    async def start(self) -> None:
        """Assign the route's partitions and position each at its log end (module doc)."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, enable_auto_commit=False,
            auto_offset_reset="latest", max_partition_fetch_bytes=8 << 20,
            **consumer_settings(), **client_settings())  # type: ignore[arg-type]
        await consumer.start()
        self._consumer = consumer
        await consumer.topics()  # loads the metadata of every topic
        tps: list[TopicPartition] = []
        for name in self.topics:
            count = len(consumer.partitions_for_topic(name) or ())
            if count == 0:
                raise RuntimeError(f"topic {name} does not exist (create the topics first)")
            tps += [TopicPartition(name, p) for p in sorted(self.route.partitions(count))]
        consumer.assign(tps)
        ends = await log_end_offsets(consumer, tps)
        for tp in tps:
            consumer.seek(tp, ends[tp])
        self.assigned = tps
        log.info("routed consumer for %d host(s): %d partition(s) of %s, from their ends",
                 len(self.route.hosts), len(tps), ", ".join(self.topics))

    async def run(self) -> None:
        """Fetch, filter and hand over until cancelled."""
        consumer = self._consumer
        assert consumer is not None, "start() first"
        route, codec = self.route, self.codec
        while True:
            batch = await consumer.getmany(timeout_ms=1000, max_records=self.max_records)
            records: list[Record] = [
                (tp.topic, tp.partition, r.offset, r.key, r.value)
                for tp, recs in batch.items() for r in recs
                if route.wants(tp.topic, r.key, r.value, codec)]
            if records:
                await self.on_records(records)

    async def stop(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            await consumer.stop()

