"""The host manager partitioned by host: one `HostShardCore` per partition, and its route.

Partitioned mode (issue 10), as the job manager's (`peloton.jobmgr.shard`): N instances of
the consumer group `peloton-hostmgr`; an instance runs one `HostShardCore` per partition p
it owns of the host-keyed topics (host-registered, task-status-reported,
task-launch-requested, host-maintenance-requested, and host-events, all keyed by host and
co-partitioned): the same book and decisions as the single host manager
(`HostManagerCore`) for the hosts of that partition. Its inputs:
- partition p of those topics (the heartbeats, registrations and agents' statuses of its
  hosts: the bulk of the host manager's load at thousands of hosts) and of the inbox
  `hostmgr-inbox`, where the host router (`HOST_ROUTE`) puts its own refusals and offers
  (split by host) and the lost hosts among its own;
- placement-made, read whole: each partition keeps the placements on its hosts
  (`HOST_ROUTE.shares`, `routing.share`), so a placement reaches the shard that launches
  it without a router hop (measured: docs/performance.md, "Placements read whole by the
  host manager's shards"). Until session 32 the router split placements onto the inbox;
  parts it wrote before an upgrade are still read there (the book takes a placement once);
- job-events, read whole: a placement's launch needs its job's spec, and the ends of runs
  free room (a first version: routing the task changes by host is the next step).
Its replay is partition p of those topics and of the inbox, plus placement-made and
job-events; heartbeats are skipped unread as in the single host manager. Offers and
refusals are per host (a newer offer of a host replaces the older), so each partition
publishes its own batches.
"""

from __future__ import annotations

from typing import Any

from peloton.bus.routing import Route, Split, Whole, item_field, partition_of, taken
from peloton.hostmgr.domain import snapshot
from peloton.hostmgr.service import HostManagerCore
from peloton.model.event import Event

__all__ = ["HOST_ROUTE", "HostShardCore"]

HOST_ROUTE = Route(
    service="hostmgr",
    inbox="hostmgr-inbox",
    own=("host-registered", "task-status-reported", "task-launch-requested",
         "host-maintenance-requested", "host-events"),
    splits={
        "PlacementRejected": Split("rejections", item_field("host")),
        "OfferReceived": Split("offers", item_field("host")),
        "HostLost": Whole("host"),
    },
    shares={"PlacementMade": Split("placements", item_field("host"))},
)


class HostShardCore(HostManagerCore):
    """The host manager's core for the hosts of one partition (see the module doc)."""

    inputs: tuple[str, ...] = (
        "host-registered", "task-status-reported", "task-launch-requested",
        "host-maintenance-requested", "hostmgr-inbox", "placement-made", "job-events")
    replay: tuple[str, ...] = (*inputs, "host-events")
    #: the book's layout, and 1 since the shard's replay covers placement-made (session
    #: 32): a shard snapshot from before has no position of it, so its replay would fold
    #: placement-made from the start onto a book that had forgotten the jobs it retired,
    #: and take their old placements for new ones. Such a snapshot is not restored (the
    #: driver passes over another core version): the shard replays the whole log, exact.
    snapshot_version: int = snapshot.VERSION * 100 + 1

    def __init__(self, partition: int, *args: Any, **kwargs: Any) -> None:
        """The core of partition `partition` (`HostManagerCore`'s options follow)."""
        super().__init__(*args, **kwargs)
        self.partition = partition

    def _share(self, etype: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """The fact as this partition takes it: a shared type cut to the items of its
        hosts (None: none is), by host-registered's partition count as the broker has it
        (`book.zone_of`, `partitions_known`); any other as it is."""
        return taken(HOST_ROUTE, etype, body, self.partition,
                     self.book.zone_of or partition_of("host-registered"))

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        if (mine := self._share(etype, body)) is not None:
            super().fold(etype, mine)

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        if (mine := self._share(etype, body)) is None:
            return []
        return super().handle(etype, mine, now)

    def tick_wanted(self) -> bool:
        """Never: a shard launches at its timer ticks, as placement's shards place in their
        slots. Measured with two instances of each partitioned service (`bench scale`,
        paced at half the reference rate): with the shards ticking as soon as placements
        arrived, p50 submit -> RUNNING 0.99-1.31 s, p99 1.78-2.92 s; on their timer
        0.76-0.91 s and 1.62-1.78 s (docs/performance.md)."""
        return False
