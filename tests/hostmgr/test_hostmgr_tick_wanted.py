"""The host manager asks its shell for a tick as soon as placements arrive (they wait for
their launch until the next tick; `peloton.bus.driver` ticks soon), not for heartbeats,
offers or placements it has already seen."""

from __future__ import annotations

from event_bodies import heartbeat, placement, placement_made
from hostmgr_helpers import book_with, launched, tick


def test_a_tick_is_wanted_when_placements_arrive_not_for_other_facts() -> None:
    book = book_with("h1", "h2")
    assert not book.tick_wanted()
    book.fold("HostStatusReported", heartbeat("h1", at=50))
    assert not book.tick_wanted()
    made = placement_made(placement("j1", 0, "h1"), placement("j1", 1, "h2"), round_=7)
    book.fold("PlacementMade", made, received_ms=100)
    assert book.tick_wanted()
    assert sorted(launched(tick(book, 100))) == [("h1", "j1", 0), ("h2", "j1", 1)]
    assert not book.tick_wanted()
    book.fold("PlacementMade", made, received_ms=150)  # delivered again: decided already
    assert not book.tick_wanted()


def test_a_host_manager_shard_launches_at_its_timer_ticks_only() -> None:
    """A partitioned host manager's shard does not ask (docs/performance.md: its eager
    ticks made the two-instance cluster slower); its timer tick still launches."""
    from peloton.hostmgr.shard import HostShardCore

    shard = HostShardCore(0)
    shard.book = book_with("h1")
    shard.book.fold("PlacementMade", placement_made(placement("j1", 0, "h1"), round_=3),
                    received_ms=100)
    assert shard.book.tick_wanted()  # the book has placements waiting ...
    assert not shard.tick_wanted()  # ... but the shard leaves them to its timer
    assert launched(tick(shard.book, 100)) == [("h1", "j1", 0)]
