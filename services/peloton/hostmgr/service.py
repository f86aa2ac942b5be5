"""The host manager service: the HostBook core inside the common service shell."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from functools import cache
from typing import Any

from peloton.bus.catalog import topic
from peloton.bus.metrics import HOSTS_SILENCE_HELD, PLACEMENTS_REFUSED
from peloton.bus.routing import partition_for
from peloton.hostmgr.domain import maintenance, snapshot
from peloton.hostmgr.domain.hosts import HostBook, acts_on, refusal_class
from peloton.hostmgr.domain.silence import SilenceGuard, ZoneOf
from peloton.model.event import Event

__all__ = ["HostManagerCore"]

log = logging.getLogger(__name__)

#: the host managers of this process (one, or one per shard it owns): the gauge of hosts a
#: mass silence holds adds theirs up when scraped, so a shard handed over stops counting
_LIVE: weakref.WeakSet[HostManagerCore] = weakref.WeakSet()
HOSTS_SILENCE_HELD.set_function(
    lambda: sum(c._held[0] for c in list(_LIVE) if c._held is not None))


def heartbeat_partition(count: int | None = None) -> ZoneOf:
    """A host's zone for the mass-silence guard: the partition of host-registered its
    heartbeats are written to, of `count` partitions (the agents' producers partition by
    the broker's count, which the shell tells the core at start, `partitions_known`; the
    catalog's until then, and in the in-memory runner, which partitions by it); None with
    one partition (one zone: the cluster)."""
    if count is None:
        count = topic("host-registered").partitions
    if count < 2:
        return None

    @cache  # hosts are few and never renamed
    def zone(name: str) -> int:
        return partition_for(name.encode(), count)
    return zone


class HostManagerCore:
    inputs: tuple[str, ...] = ("host-registered", "task-status-reported",
              "placement-made", "task-launch-requested", "placement-rejected",
              "offer-received", "job-events", "host-maintenance-requested")
    #: host-events holds our maintenance states and announcements, read on replay only (the
    #: job manager's HostDrainProgressed there too: folded as nothing, so its records
    #: around the position of what we delivered do not matter)
    replay: tuple[str, ...] = (*inputs, "host-events")
    #: Events whose replay changes nothing (the fold ignores them without `received_ms`):
    #: a shell may skip them unread when it replays (heartbeats are most of host-registered).
    replay_skips: tuple[str, ...] = ("HostStatusReported",)
    #: Live records the fold would not act on, told from their bytes (the shell skips them
    #: undecoded): TaskStateChanged naming no end or kill, most of job-events.
    acts_on = staticmethod(acts_on)
    snapshot_version: int = snapshot.VERSION

    def __init__(self, heartbeat_timeout_s: float = 5.0, tick_interval: float = 0.05,
                 retention_s: float = 600.0, hold_s: float = 10.0,
                 restart_grace_s: float = 10.0,
                 silence_guard: SilenceGuard | None = None) -> None:
        timeout_ms = int(heartbeat_timeout_s * 1000)
        # no tick for longer than a host may be silent: a stall of ours (HostBook._stall)
        self.book = HostBook(timeout_ms, int(retention_s * 1000), int(hold_s * 1000),
                             int(restart_grace_s * 1000), silence_guard,
                             stall_after_ms=timeout_ms, zone_of=heartbeat_partition())
        self.tick_interval: float | None = tick_interval
        self._held: tuple[int, int] | None = None
        self._zones: tuple[int, ...] = ()
        _LIVE.add(self)

    def partitions_known(self, counts: Mapping[str, int]) -> None:
        """The broker's partition counts of our inputs (the shell, at each rebuild): the
        mass-silence zones follow host-registered's, which is the catalog's unless the
        topic was created with another (`peloton.bus.brokercounts`)."""
        count = counts.get("host-registered")
        if count is not None:
            self.book.zone_of = heartbeat_partition(count)

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        self.book.fold(etype, body)

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        if etype == "HostMaintenanceRequested":
            return maintenance.handle_request(self.book, body, now)
        self.book.fold(etype, body, received_ms=now)
        return []

    def tick_wanted(self) -> bool:
        return self.book.tick_wanted()

    def tick(self, now: int) -> list[Event]:
        events = self.book.tick(now)
        for ev in events:
            if ev.type == "PlacementRejected":
                for r in ev.body["rejections"]:
                    PLACEMENTS_REFUSED.labels(refusal_class(r["reason"])).inc()
        if self.book.stalled_ms is not None:
            log.warning("hostmgr: no tick for %.1fs (longer than the heartbeat timeout, "
                        "%.0fs): this host manager was stalled, so no host is declared lost "
                        "for silence in the next %.0fs (their heartbeats are read first)",
                        self.book.stalled_ms / 1000, self.book.heartbeat_timeout_ms / 1000,
                        self.book.heartbeat_timeout_ms / 1000)
        held, zones = self.book.silence_held, self.book.silence_zones
        if (held is None) != (self._held is None) or zones != self._zones:
            self._say_held(held, zones)
        self._held, self._zones = held, zones
        return events

    def _say_held(self, held: tuple[int, int] | None, zones: tuple[int, ...]) -> None:
        book = self.book
        if held is None:
            log.warning("hostmgr: mass silence over: hosts silent past %.0fs are lost again",
                        book.heartbeat_timeout_ms / 1000)
            return
        if zones:
            log.warning("hostmgr: %d of the %d hosts whose heartbeats go to partition(s) %s "
                        "of host-registered silent at once for over %.0fs: more likely "
                        "that partition is read late (or its broker is slow) than so many "
                        "hosts failed; they are declared lost only after %.0fs of silence "
                        "until it ends", held[0], held[1], ", ".join(map(str, zones)),
                        book.heartbeat_timeout_ms / 1000,
                        book.heartbeat_timeout_ms * book.silence_guard.factor / 1000)
            return
        log.warning("hostmgr: %d of %d hosts silent at once for over %.0fs: more likely this "
                    "host manager (or the broker) is behind than so many hosts failed; "
                    "hosts are declared lost only after %.0fs of silence until it ends",
                    held[0], held[1], book.heartbeat_timeout_ms / 1000,
                    book.heartbeat_timeout_ms * book.silence_guard.factor / 1000)

    def after_replay(self, now: int) -> list[Event]:
        # heartbeats in the log are old by now (and not replayed): every host gets a fresh
        # timeout window and a grace (our consumers still have to join their group before
        # they read live heartbeats), and is offered again at the first tick
        self.book.after_restart(now)
        return []

    def snapshot(self) -> dict[str, Any]:
        return snapshot.dump(self.book)

    def restore(self, state: dict[str, Any]) -> None:
        snapshot.load(self.book, state)
