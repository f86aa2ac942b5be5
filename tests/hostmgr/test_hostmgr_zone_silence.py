"""Most hosts of one zone silent at once (the service's zones: the partitions of
host-registered the heartbeats go to): a partition read late, or a slow broker leading it,
must not cost the cluster a quarter of its hosts (peloton.hostmgr.domain.silence)."""

from __future__ import annotations

import logging

import hypothesis.strategies as st
import pytest
from event_bodies import host_registered, placement
from hostmgr_helpers import (
    TIMEOUT,
    assert_scans_agree,
    beat,
    book_with,
    launched,
    lost,
    of,
    place,
    tick,
)
from hypothesis import given, settings

from peloton.bus.catalog import topic
from peloton.bus.routing import partition_for
from peloton.hostmgr.domain.silence import SilenceGuard
from peloton.hostmgr.service import HostManagerCore, heartbeat_partition

HOSTS = [f"h{i:02d}" for i in range(40)]


def zone(name: str) -> int:
    return int(name[1:]) % 4  # 10 hosts in each of 4 zones


def test_a_zone_silent_at_once_is_lost_only_after_the_longer_limit() -> None:
    book = book_with(*HOSTS, zone_of=zone)
    assert launched(place(book, placement("j1", 0, "h02")))
    quiet = [h for h in HOSTS if zone(h) == 2]  # a quarter of the cluster: zone 2
    heard = [h for h in HOSTS if zone(h) != 2]
    for t in range(1000, 6 * TIMEOUT, 1000):
        beat(book, heard, t)
        assert lost(tick(book, t)) == []
        assert book.silence_zones == ((2,) if t > TIMEOUT else ())
        assert book.silence_held == ((10, 10) if t > TIMEOUT else None)
    beat(book, heard, 6 * TIMEOUT)
    out = tick(book, 6 * TIMEOUT + 1)
    assert lost(out) == quiet  # a real failure of the zone is still declared, saying why
    reason = of(out, "HostLost")[0].body["reason"]
    assert "10 of 10 hosts whose heartbeats share partition 2 silent at once" in reason
    assert "after 30s, not 5s" in reason and of(out, "HostLost")[0].body["runs"] == ["j1-0-1"]


def test_without_zones_the_same_silence_loses_the_zone_at_the_timeout() -> None:
    """The gap the zones close: a quarter of the hosts is too few for the cluster's rule."""
    book = book_with(*HOSTS)
    heard = [h for h in HOSTS if zone(h) != 2]
    gone: list[str] = []
    for t in range(1000, TIMEOUT + 2000, 1000):
        beat(book, heard, t)
        gone += lost(tick(book, t))
    assert sorted(gone) == [h for h in HOSTS if zone(h) == 2]


def test_hosts_that_fail_in_every_zone_are_lost_at_the_timeout() -> None:
    """Real failures hash evenly: three hosts of each zone dead is no zone's mass silence."""
    book = book_with(*HOSTS, zone_of=zone)
    dead = [h for h in HOSTS if int(h[1:]) < 12]
    gone: list[str] = []
    for t in range(1000, TIMEOUT + 2000, 1000):
        beat(book, [h for h in HOSTS if h not in dead], t)
        gone += lost(tick(book, t))
    assert sorted(gone) == dead and book.silence_zones == ()


def test_a_zone_that_is_heard_again_loses_nothing_and_the_hold_ends() -> None:
    book = book_with(*HOSTS, zone_of=zone)
    heard = [h for h in HOSTS if zone(h) != 1]
    for t in range(1000, 3 * TIMEOUT, 1000):
        beat(book, heard, t)
        assert lost(tick(book, t)) == []
    beat(book, HOSTS, 3 * TIMEOUT)  # the partition is read again: every heartbeat
    assert lost(tick(book, 3 * TIMEOUT + 1)) == []
    assert book.silence_zones == () and book.silence_held is None


@settings(max_examples=200, deadline=None)
@given(quiet=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40_000)), max_size=60))
def test_each_host_gets_the_longer_limit_exactly_when_its_zone_or_the_cluster_holds(
        quiet: list[tuple[int, int]]) -> None:
    guard = SilenceGuard(fraction=0.5, min_hosts=10, factor=6)
    v = guard.verdict(TIMEOUT, quiet)
    silent = sum(q > TIMEOUT for _, q in quiet)
    cluster = silent > 0.5 * len(quiet) and len(quiet) >= 10
    for z in range(4):
        mine = [q for zz, q in quiet if zz == z]
        held = sum(q > TIMEOUT for q in mine) > 0.5 * len(mine) and len(mine) >= 10
        assert v.limit_of(z) == (6 * TIMEOUT if cluster or held else TIMEOUT)
    assert (v.held is None) == (not cluster and not v.zones)


def test_the_service_zones_hosts_by_their_heartbeat_partition(
        caplog: pytest.LogCaptureFixture) -> None:
    zone_of = heartbeat_partition()
    count = topic("host-registered").partitions
    assert zone_of is not None and count > 1
    assert all(zone_of(h) == partition_for(h.encode(), count) for h in HOSTS)
    core = HostManagerCore(heartbeat_timeout_s=TIMEOUT / 1000)
    book = core.book
    assert book.zone_of is not None and book.zone_of("h01") == zone_of("h01")
    names = [f"host-{i}" for i in range(1, 81)]
    for h in names:
        book.fold("HostRegistered", host_registered(h, cpu=4.0, incarnation="inc-1"))
    core.tick(0)
    by = {z: [h for h in names if zone_of(h) == z] for z in range(count)}
    quiet_zone = max(by, key=lambda z: len(by[z]))  # a zone of at least 10 hosts
    assert len(by[quiet_zone]) >= 10
    with caplog.at_level(logging.WARNING, logger="peloton.hostmgr.service"):
        for t in range(1000, TIMEOUT + 2000, 1000):
            beat(book, [h for h in names if zone_of(h) != quiet_zone], t)
            assert lost(core.tick(t)) == []
    assert book.silence_zones == (quiet_zone,)
    assert f"partition(s) {quiet_zone} of host-registered silent at once" in caplog.text




ZONED = [f"h{i:02d}" for i in range(24)]  # two zones of 12


def halves(name: str) -> int:
    return int(name[1:]) % 2


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4000), st.sets(st.sampled_from([0, 1])),
                          st.sets(st.sampled_from(ZONED), max_size=8), st.booleans()),
                min_size=1, max_size=25))
def test_skipped_scans_decide_as_a_full_scan_every_tick_with_zones(steps: list) -> None:
    """The silence scans a tick skips (until the earliest time one could decide anything)
    lose the same hosts at the same times, with the same reasons, as a full scan at every
    tick, whether the cluster, a zone or nothing holds (each step's heartbeats: the hosts
    of some zones, and a few others)."""
    assert_scans_agree(
        book_with(*ZONED, zone_of=halves), book_with(*ZONED, zone_of=halves),
        [(gap, sorted({h for h in ZONED if halves(h) in zones} | few), ticks)
         for gap, zones, few, ticks in steps])
