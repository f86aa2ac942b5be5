"""Routing: the facts of other topics, split by the shard key of a partitioned service.

A partitioned service (the job manager, sharded by job id) runs as N instances of one
consumer group. Each instance owns the partitions it is assigned of the service's *own*
topics, which are co-partitioned (same key, same partition count: job-submitted,
job-kill-requested, job-update-requested, job-events all keyed by job id), and holds the
state of exactly the keys of those partitions (one core per partition). Facts on other
topics are keyed by something else and list items of many keys (a TaskStatusReported of
one host lists runs of many jobs; a PlacementMade places runs on many hosts).

A `Route` says, for each such event type, which list field carries the items and which
field of an item is the shard key (`Split`), or that the whole fact concerns one key
(`Whole`: a HostLost names one host), or that the service ignores the type. The router
(`RouterCore`, a stateless core in the common shell, decide-publish-commit like any other)
reads those topics and re-publishes each fact as parts, one per partition its items hash
to, on the service's internal inbox topic (`catalog.INTERNAL_TOPICS`, co-partitioned with
the own topics): the same event type and schema, every other field as it was, only the
items of that partition, in their order; the record key is the shard key of the part's
first item, so Kafka's partitioner puts it in that partition. An instance then reads only
its partitions of the inbox, and never decodes another instance's share.

A route may instead read a type whole in every partition (`Route.shares`): the router
leaves it alone, every partition reads the fact from its own topic and keeps the items of
its keys (`share`, the same cut as `split`). That saves a hop (a consume, a publish, a
consume) between the fact and its decision, and costs each partition the decode of the
whole fact: worth it for a fact on the path of every run's start whose items are few per
record compared with the service's own load (the host manager's placements: its load is
the heartbeats of its hosts), or when the instances are few (the job manager's launches
and statuses: with two instances a router's decode, publish and the owner's decode of the
part cost more than a second decode of the whole). A shared type the service decides on
(rather than folds) has no group offset to resume from: its positions are in the shard's
snapshots and a rebuild handles it again from there (`core.rehandle`,
`peloton.bus.rehandle`).

Guarantees (pure, property-tested): the parts' items are exactly the fact's items (each
once); every item of a part hashes to the part's partition; a fact with no items gives no
part (it concerns no key). Kafka delivers at least once, so a router that restarts may
publish a part twice: the services' consumers are idempotent. Parts of one fact land in
different partitions and are read by different instances: what the service decides per
key must not need the other keys' items (true of the job manager: every item is a fact
about one run of one job).

`partition_for` is Kafka's default partitioner (murmur2 of the key), as the real producer
uses; co-partitioning holds only if the own topics and the inbox have one partition
count (`check_copartitioned`, called when a partitioned service starts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from aiokafka.partitioner import murmur2

from peloton.bus.catalog import topic, topic_for_event
from peloton.model.event import Event
from peloton.model.jobshards import by_shard

__all__ = ["Split", "Whole", "Route", "RouterCore", "partition_for", "partition_of", "split",
           "share", "taken", "check_copartitioned", "item_field"]


@lru_cache(maxsize=1 << 13)
def partition_for(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner (murmur2 of the key), as the real producer uses.
    Remembered for the last 8,192 keys (about 2 MB): aiokafka's murmur2 is pure Python
    (several us a key), and a job's or host's records come in runs."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


#: keys each `partition_of` function remembers (then it starts again: memory only)
PARTITION_MEMO = 1 << 16


def partition_of(topic_name: str, count: int | None = None) -> Callable[[str], int]:
    """The partition of `topic_name` a key's records land in (with the topic's configured
    count, or `count`: the broker's, `peloton.bus.brokercounts`): what a core uses to put
    in one record only items of one partition. Each function remembers its last keys by
    their text (a core asks once per item of every fact it reads: a job's or host's items
    recur), up to `PARTITION_MEMO`."""
    n = topic(topic_name).partitions if count is None else count
    memo: dict[str, int] = {}

    def of(key: str) -> int:
        p = memo.get(key)
        if p is None:
            if len(memo) >= PARTITION_MEMO:
                memo.clear()
            p = memo[key] = partition_for(key.encode(), n)
        return p
    return of


def item_field(name: str) -> Callable[[Any], str]:
    """The shard key of an item is one of its fields."""
    def key(item: Any) -> str:
        return str(item[name])
    return key


@dataclass(frozen=True, slots=True)
class Split:
    """Items of the list field `items` go to the partition of `key(item)`."""

    items: str
    key: Callable[[Any], str]


@dataclass(frozen=True, slots=True)
class Whole:
    """The whole fact goes to the partition of its field `key` (it concerns one key)."""

    key: str


@dataclass(frozen=True)
class Route:
    """How one partitioned service gets its share of other topics' facts.

    `own`: the service's co-partitioned topics (keyed by the shard key already);
    `inbox`: its internal topic (None: nothing to route, as placement's engines);
    `splits`: event type -> Split; `ignored`: types on the routed topics the service does
    not use (the router drops them: no part is written); `shares`: event type -> Split of
    the types not routed but read whole by every partition, which keeps its items
    (`share`): no router hop between the fact and its decision, for the price of each
    partition decoding the whole fact (the host manager's placements)."""

    service: str
    inbox: str | None
    own: tuple[str, ...]
    splits: Mapping[str, Split | Whole]
    ignored: frozenset[str] = frozenset()
    shares: Mapping[str, Split] = field(default_factory=dict)
    topics: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        if both := set(self.shares) & {*self.splits, *self.ignored}:
            raise ValueError(f"{self.service}: {sorted(both)} both shared and routed")
        names = {topic_for_event(t).name for t in (*self.splits, *self.ignored)}
        # an own topic is read partition by partition, not routed (its types the
        # service ignores are skipped by the shards themselves)
        object.__setattr__(self, "topics", tuple(sorted(names - set(self.own))))
        if self.inbox is None:
            if self.splits:
                raise ValueError(f"{self.service}: a route that splits needs an inbox")
            return
        carried = set(topic(self.inbox).events)
        if missing := set(self.splits) - carried:
            raise ValueError(f"{self.inbox} does not carry {sorted(missing)}")

    @property
    def partitions(self) -> int:
        return topic(self.inbox or self.own[0]).partitions

    @property
    def sharded(self) -> tuple[str, ...]:
        """The topics a partition reads only its own partition of."""
        return (*self.own, *([self.inbox] if self.inbox else []))


def split(route: Route, etype: str, body: Mapping[str, Any]) -> list[Event]:
    """The parts of one fact for the service's inbox, in partition order (see module doc);
    [] for an ignored type. KeyError for a type the route does not know."""
    if etype in route.ignored:
        return []
    rule = route.splits[etype]
    n = route.partitions
    if isinstance(rule, Whole):
        return [Event(etype, str(body[rule.key]), dict(body), topic=route.inbox)]
    key = rule.key
    parts = by_shard(body[rule.items], lambda item: partition_for(key(item).encode(), n))
    return [Event(etype, key(part[0]), {**body, rule.items: part}, topic=route.inbox)
            for part in parts]


def share(rule: Split, body: Mapping[str, Any], partition: int,
          partition_of: Callable[[str], int]) -> dict[str, Any] | None:
    """The share of partition `partition` of a fact read whole (`Route.shares`): the fact
    with only the items whose key lies in that partition (`partition_of`), in their
    order, every other field as it was; itself if every item does; None if none does (it
    concerns no key of the partition), as `split` writes no part for it."""
    items = body[rule.items]
    mine = [item for item in items if partition_of(rule.key(item)) == partition]
    if not mine:
        return None
    return dict(body) if len(mine) == len(items) else {**body, rule.items: mine}


def taken(route: Route, etype: str, body: dict[str, Any], partition: int,
          partition_of: Callable[[str], int]) -> dict[str, Any] | None:
    """The fact as partition `partition` of a route's service takes it: a type the route
    shares (`Route.shares`) cut to the items of its keys (`share`; None: none is), any
    other type as it is."""
    rule = route.shares.get(etype)
    return body if rule is None else share(rule, body, partition, partition_of)


def check_copartitioned(route: Route) -> None:
    """Raise ValueError unless the own topics and the inbox have one partition count."""
    counts = {name: topic(name).partitions for name in route.sharded}
    if len(set(counts.values())) != 1:
        raise ValueError(
            f"{route.service}: its topics must have one partition count to be partitioned "
            f"by the same key, got {counts}")


class RouterCore:
    """The stateless router of one route: reads the routed topics, publishes parts."""

    replay: tuple[str, ...] = ()
    tick_interval: float | None = None

    def __init__(self, route: Route) -> None:
        self.route = route
        self.inputs: tuple[str, ...] = route.topics
        self.ignores = route.ignored  # the driver skips them undecoded
        self.routed = 0  # facts read
        self.parts = 0  # parts written

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        return None

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        out = split(self.route, etype, body)
        self.routed += 1
        self.parts += len(out)
        return out

    def tick(self, now: int) -> list[Event]:
        return []

    def after_replay(self, now: int) -> list[Event]:
        return []

    def discard_unpublished(self) -> None:
        """Nothing to undo: the router keeps no state (its counters are only figures)."""

