"""A host manager that did not tick for longer than the heartbeat timeout (its process
paused or starved) judges no host by the silence of its own stall: no host is declared lost
for silence until one timeout after it resumes (HostBook._stall). Unlike the mass-silence
guard this holds for any number of hosts (here 3, below the guard's 10) and however long the
stall; a host that really is gone is still declared lost, one timeout after the resume."""

from __future__ import annotations

import logging

import pytest
from event_bodies import placement
from hostmgr_helpers import TIMEOUT, beat, book_with, launched, lost, place, tick

from peloton.hostmgr.domain.hosts import HostBook
from peloton.hostmgr.service import HostManagerCore

HOSTS = ["h1", "h2", "h3"]


def running_book() -> HostBook:
    """3 hosts heard every second and ticked every 50 ms up to t=10 s, a run on h1."""
    book = book_with(*HOSTS, stall_after_ms=TIMEOUT)  # as HostManagerCore makes it
    assert launched(place(book, placement("j1", 0, "h1")))
    for t in range(50, 10_001, 50):
        if t % 1000 == 0:
            beat(book, HOSTS, t)
        assert lost(tick(book, t)) == []
    return book


def test_a_stall_longer_than_the_timeout_loses_no_host_at_the_resume() -> None:
    book = running_book()
    resume = 10_000 + 3 * TIMEOUT  # no tick (nor read) for three timeouts
    assert all(resume - book.hosts[h].last_seen_ms > TIMEOUT for h in HOSTS)  # all silent
    assert lost(tick(book, resume)) == []
    assert book.stalled_ms == 3 * TIMEOUT
    beat(book, HOSTS[:2], resume + 20)  # the heartbeats that waited in the log
    for t in range(resume + 50, resume + TIMEOUT, 50):
        assert lost(tick(book, t)) == []
        assert book.stalled_ms is None
    out = tick(book, resume + TIMEOUT)  # h3 stays silent: gone after all
    assert lost(out) == ["h3"]


def test_a_host_gone_is_lost_when_the_ticks_are_regular() -> None:
    """The same silence without a stall: h3 is lost one timeout after its last heartbeat
    (the rule above waits only when the host manager itself was not looking)."""
    book = running_book()
    first_lost = None
    for t in range(10_050, 10_000 + 2 * TIMEOUT, 50):
        if t % 1000 == 0:
            beat(book, HOSTS[:2], t)
        if lost(tick(book, t)) == ["h3"]:
            first_lost = t
            break
    assert first_lost == 10_000 + TIMEOUT + 50
    assert book.stalled_ms is None


@pytest.mark.parametrize("gap", [TIMEOUT // 2, TIMEOUT])
def test_a_gap_up_to_the_timeout_is_no_stall(gap: int) -> None:
    book = running_book()
    tick(book, 10_000 + gap)
    assert book.stalled_ms is None and book.grace_until <= 10_000 + gap


def test_the_stall_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    core = HostManagerCore(heartbeat_timeout_s=TIMEOUT / 1000)
    core.tick(1_000)
    with caplog.at_level(logging.WARNING, logger="peloton.hostmgr.service"):
        core.tick(1_000 + 2 * TIMEOUT)
    assert f"no tick for {2 * TIMEOUT / 1000:.1f}s" in caplog.text
    assert "this host manager was stalled" in caplog.text
