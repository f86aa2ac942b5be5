"""The host manager partitioned by host: one `HostShardCore` per partition, and its route.

Partitioned mode (issue 10), as the job manager's (`peloton.jobmgr.shard`): N instances of
the consumer group `peloton-hostmgr`; an instance runs one `HostShardCore` per partition p
it owns of the host-keyed topics (host-registered, task-status-reported,
task-launch-requested, host-maintenance-requested, and host-events, all keyed by host and
co-partitioned): the same book and decisions as the single host manager
(`HostManagerCore`) for the hosts of that partition. Its inputs:
- partition p of those topics (the heartbeats, registrations and agents' statuses of its
  hosts: the bulk of the host manager's load at thousands of hosts) and of the inbox
  `hostmgr-inbox`, where the host router (`HOST_ROUTE`) puts the placements onto its hosts,
  its own refusals and offers (split by host), and the lost hosts among its own;
- job-events, read whole: a placement's launch needs its job's spec, and the ends of runs
  free room (a first version: routing the task changes by host is the next step).
Its replay is partition p of those topics and of the inbox, plus job-events; heartbeats are
skipped unread as in the single host manager. Offers and refusals are per host (a newer
offer of a host replaces the older), so each partition publishes its own batches.
"""

from __future__ import annotations

from peloton.bus.routing import Route, Split, Whole, item_field
from peloton.hostmgr.service import HostManagerCore

__all__ = ["HOST_ROUTE", "HostShardCore"]

HOST_ROUTE = Route(
    service="hostmgr",
    inbox="hostmgr-inbox",
    own=("host-registered", "task-status-reported", "task-launch-requested",
         "host-maintenance-requested", "host-events"),
    splits={
        "PlacementMade": Split("placements", item_field("host")),
        "PlacementRejected": Split("rejections", item_field("host")),
        "OfferReceived": Split("offers", item_field("host")),
        "HostLost": Whole("host"),
    },
    ignored=frozenset({"PlacementFailed"}),
)


class HostShardCore(HostManagerCore):
    """The host manager's core for the hosts of one partition (see the module doc)."""

    inputs: tuple[str, ...] = (
        "host-registered", "task-status-reported", "task-launch-requested",
        "host-maintenance-requested", "hostmgr-inbox", "job-events")
    replay: tuple[str, ...] = (*inputs, "host-events")

    def tick_wanted(self) -> bool:
        """Never: a shard launches at its timer ticks, as placement's shards place in their
        slots. Measured with two instances of each partitioned service (`bench scale`,
        paced at half the reference rate): with the shards ticking as soon as placements
        arrived, p50 submit -> RUNNING 0.99-1.31 s, p99 1.78-2.92 s; on their timer
        0.76-0.91 s and 1.62-1.78 s (docs/performance.md)."""
        return False
