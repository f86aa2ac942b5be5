"""A partitioned host manager reads placements whole: each shard keeps the placements on
its hosts (`HOST_ROUTE.shares`, `routing.share`), with no router hop in between.

Properties: the shares of a fact are exactly the parts the router would have written
(`routing.split`, the cut used before: same items, same partitions, same order, none for a
partition without items); shards, each fed every placement round live or on replay, launch
together exactly what one host manager of all hosts launches, each placement by the shard
of its host, and none of them refuses a placement on a host it does not hold.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from event_bodies import placement, placement_made
from hostmgr_helpers import book_with, launched, rejections, tick
from hypothesis import given, settings

from peloton.bus.routing import Route, Split, item_field, partition_for, share, split
from peloton.hostmgr.domain import snapshot
from peloton.hostmgr.domain.hosts import acts_on
from peloton.hostmgr.service import HostManagerCore
from peloton.hostmgr.shard import HOST_ROUTE, HostShardCore
from peloton.model.event import Event

HOSTS = [f"host-{i}" for i in range(1, 13)]
N = HOST_ROUTE.partitions
RULE = HOST_ROUTE.shares["PlacementMade"]


def of(host: str) -> int:
    return partition_for(host.encode(), N)


#: a route that splits placements onto the inbox, as the host router did before
OLD_ROUTE = Route(service="hostmgr", inbox="hostmgr-inbox", own=HOST_ROUTE.own,
                  splits={"PlacementMade": Split("placements", item_field("host"))})

#: a round places each run once (instances 0-3 of j1, on any hosts)
rounds = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(HOSTS)),
                  max_size=4, unique_by=lambda t: t[0])


def made(items: list[tuple[int, str]], round_: int = 5) -> dict[str, Any]:
    return placement_made(*[placement("j1", i, h, cpu=0.5) for i, h in items],
                          round_=round_, at=50)


@settings(max_examples=150, deadline=None)
@given(rounds)
def test_the_shares_are_the_parts_the_router_wrote(items: list[tuple[int, str]]) -> None:
    body = made(items)
    shares = [share(RULE, body, p, of) for p in range(N)]
    parts = split(OLD_ROUTE, "PlacementMade", body)
    assert [s for s in shares if s is not None] == [part.body for part in parts]
    for p, mine in enumerate(shares):
        expected = [x for x in body["placements"] if of(x["host"]) == p]
        if not expected:
            assert mine is None
            continue
        assert mine is not None and mine["placements"] == expected
        assert {k: v for k, v in mine.items() if k != "placements"} == {
            k: v for k, v in body.items() if k != "placements"}


def shards() -> list[HostShardCore]:
    out = []
    for p in range(N):
        core = HostShardCore(p)
        core.book = book_with(*[h for h in HOSTS if of(h) == p], jobs={"j1": 4})
        out.append(core)
    return out


@settings(max_examples=80, deadline=None)
@given(rounds, st.booleans())
def test_shards_fed_every_round_launch_what_one_host_manager_launches(
        items: list[tuple[int, str]], on_replay: bool) -> None:
    body = made(items)
    whole = HostManagerCore()
    whole.book = book_with(*HOSTS, jobs={"j1": 4})
    whole.handle("PlacementMade", body, 100)
    expected = launched(tick(whole.book))
    got: list[Event] = []
    for core in shards():
        if on_replay:
            core.fold("PlacementMade", body)
        else:
            assert core.handle("PlacementMade", body, 100) == []
        assert {key for key in core.book.pending} <= {
            ("j1", i, 1) for i, h in items if of(h) == core.partition}
        out = tick(core.book)
        assert rejections(out) == []  # no "unknown host" for another partition's hosts
        assert {h for h, _j, _i in launched(out)} <= {
            h for h in HOSTS if of(h) == core.partition}
        got += out
    assert sorted(launched(got)) == sorted(expected)
    assert len(expected) == len(items)


def test_a_round_again_through_the_old_inbox_launches_nothing_twice() -> None:
    """Parts a router wrote before the upgrade may follow the same round read whole."""
    body = made([(0, HOSTS[0]), (1, HOSTS[1])])
    for core in shards():
        core.handle("PlacementMade", body, 100)
        first = launched(tick(core.book))
        for part in split(OLD_ROUTE, "PlacementMade", body):
            core.handle("PlacementMade", part.body, 120)
        assert launched(tick(core.book, 150)) == []
        assert len(first) == sum(of(h) == core.partition for h in HOSTS[:2])


def test_the_other_type_on_placement_made_is_passed_over_undecoded() -> None:
    assert not acts_on("PlacementFailed", b"")
    assert acts_on("PlacementMade", b"")


def test_a_shard_snapshot_from_before_placements_were_read_whole_is_not_restored() -> None:
    """Shards wrote their snapshots with the book's version until their replay covered
    placement-made; such a snapshot has no position of it (its replay would start there at
    offset 0, onto a book that forgot retired jobs), so its core version must differ: the
    driver then replays the whole log instead."""
    assert snapshot.VERSION == HostManagerCore.snapshot_version
    assert HostShardCore(0).snapshot_version not in (snapshot.VERSION, 0)
