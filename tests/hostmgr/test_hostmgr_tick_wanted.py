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
