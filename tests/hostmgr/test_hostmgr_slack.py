"""Slack in the host manager's offers (OfferReceived v2) and revocable placements.

What `slack` means (the contract in peloton/hostmgr/domain/hosts.py): our agents report
no usage, so the host manager cannot lend what non-revocable runs hold but do not use (as
Peloton does); it offers as slack the resources allocated to no run, revocable or not:
the same figures as `free`, one pool. Revocable and non-revocable placements are checked
against one allocation, non-revocable ones first.
"""

from __future__ import annotations

from event_bodies import job_created, placement
from hostmgr_helpers import book_with, launched, of, place, rejections, tick

from peloton.bus.codec import default_codec
from peloton.hostmgr.domain.hosts import HostBook
from peloton.model.resources import Resources
from peloton.placement.domain.hostviews import HostViews


def _offers(book: HostBook, now: int) -> dict[str, dict]:
    return {o["host"]: o for ev in of(tick(book, now), "OfferReceived")
            for o in ev.body["offers"]}


def _revocable_book() -> HostBook:
    book = book_with("h1", cpu=4.0)  # j1: 4 ordinary tasks
    book.fold("JobCreated", job_created("r1", 4, revocable=True))
    task_level = job_created("r2", 2)
    task_level["default_task"] = dict(task_level["default_task"], revocable=True)
    book.fold("JobCreated", task_level)
    return book


def test_an_offer_carries_slack_equal_to_free_and_every_run_takes_from_both() -> None:
    book = _revocable_book()
    assert launched(place(book, placement("j1", 0, "h1", cpu=1), now=100))
    assert launched(place(book, placement("r1", 0, "h1", cpu=1.5), now=200))
    book.offered.clear()  # offer again, whatever was offered already
    book.derived_reset()
    offer = _offers(book, 300)["h1"]
    assert offer["free"]["cpu"] == offer["slack"]["cpu"] == 1.5
    assert offer["slack"] == offer["free"] == book.hosts["h1"].slack.as_dict()
    body = {"at": 300, "offers": [offer]}
    codec = default_codec()
    assert codec.decode(codec.encode("OfferReceived", body)) == ("OfferReceived", body)


def test_placement_reads_the_slack_of_our_offer() -> None:
    """The seam with the placement engine: its host view of our offer sees our slack."""
    book = _revocable_book()
    assert launched(place(book, placement("r1", 0, "h1", cpu=3), now=100))
    book.offered.clear()
    book.derived_reset()
    offer = _offers(book, 200)["h1"]
    views = HostViews()
    views.offer(offer, 200)
    view = views.view("h1")
    assert view is not None
    assert view.slack_free == book.hosts["h1"].slack == Resources(1.0, 4096 - 64, 10_000)
    assert view.free == view.slack_free


def test_non_revocable_placements_get_contested_room_first() -> None:
    # r1 sorts before j1: without the rule the revocable one would be checked first
    book = _revocable_book()
    out = place(book, placement("r1", 0, "h1", cpu=3), placement("j1", 0, "h1", cpu=3),
                placement("r2", 1, "h1", cpu=1), now=100)
    assert sorted(launched(out)) == [("h1", "j1", 0), ("h1", "r2", 1)]
    assert rejections(out) == [("r1", 0, "host h1 no longer fits: cpu 3>1")]
    assert book.hosts["h1"].allocated.cpu == 4 and book.hosts["h1"].slack.cpu == 0


def test_a_revocable_run_launched_first_keeps_its_room() -> None:
    """Taking room back from revocable runs is the resource manager's preemption: the
    host manager never double-books a host for a non-revocable placement."""
    book = _revocable_book()
    assert launched(place(book, placement("r2", 0, "h1", cpu=3), now=100))
    out = place(book, placement("j1", 0, "h1", cpu=2), now=200)
    assert rejections(out) == [("j1", 0, "host h1 no longer fits: cpu 2>1")]
