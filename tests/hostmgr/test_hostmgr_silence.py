"""Many hosts silent at once: the host manager suspects itself before the hosts
(peloton.hostmgr.domain.silence)."""

from __future__ import annotations

import logging

import hypothesis.strategies as st
import pytest
from event_bodies import heartbeat, host_registered, placement
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
from prometheus_client import REGISTRY

from peloton.hostmgr.domain.silence import SilenceGuard
from peloton.hostmgr.service import HostManagerCore

HOSTS = [f"h{i:02d}" for i in range(12)]


def test_the_guard_holds_only_for_most_of_enough_hosts() -> None:
    guard = SilenceGuard(fraction=0.5, min_hosts=10, factor=6)
    assert guard.holds(7, 12) and not guard.holds(6, 12)  # more than half
    assert not guard.holds(9, 9)  # too few hosts to tell
    assert guard.limit_ms(5000, 7, 12) == 30_000 and guard.limit_ms(5000, 6, 12) == 5000
    assert not SilenceGuard(fraction=1.0).holds(12, 12)  # off
    with pytest.raises(ValueError):
        SilenceGuard(fraction=0.0)
    with pytest.raises(ValueError):
        SilenceGuard(factor=0)


def test_most_hosts_silent_at_once_are_lost_only_after_the_longer_limit() -> None:
    book = book_with(*HOSTS)
    assert launched(place(book, placement("j1", 0, "h00")))
    for t in range(1000, 6 * TIMEOUT, 1000):  # 8 of 12 not heard of since t=0
        beat(book, HOSTS[8:], t)
        assert lost(tick(book, t)) == []
        assert book.silence_held == ((8, 12) if t > TIMEOUT else None)
    out = tick(book, 6 * TIMEOUT + 1)
    assert lost(out) == HOSTS[:8]  # then a real mass failure is declared, saying why
    reason = of(out, "HostLost")[0].body["reason"]
    assert "8 of 12 hosts silent at once" in reason and "after 30s, not 5s" in reason
    assert of(out, "HostLost")[0].body["runs"] == ["j1-0-1"]
    assert book.silence_held == (8, 12)
    assert lost(tick(book, 6 * TIMEOUT + 2)) == []  # the 4 others are heard of
    assert book.silence_held is None
    # 4 hosts left: too few to suspect ourselves, so their silence is judged plainly
    assert lost(tick(book, 6 * TIMEOUT - 1000 + TIMEOUT + 1)) == HOSTS[8:]


def test_a_lag_that_ends_loses_no_host() -> None:
    book = book_with(*HOSTS)
    assert lost(tick(book, 3 * TIMEOUT)) == []  # every host silent: we are behind
    assert book.silence_held == (12, 12)
    beat(book, HOSTS, 3 * TIMEOUT + 10)  # the backlog of heartbeats is read
    assert lost(tick(book, 3 * TIMEOUT + 20)) == []
    assert book.silence_held is None
    assert all(h.available for h in book.hosts.values())


def test_a_heartbeat_read_during_the_hold_can_end_it_for_the_rest() -> None:
    """The hold's end starts a timeout for the hosts it excused: a host manager catching
    up reads some hosts' heartbeats last; those still silent a timeout later are lost."""
    book = book_with(*HOSTS)
    assert lost(tick(book, TIMEOUT + 1)) == []  # 12 of 12
    beat(book, HOSTS[:7], TIMEOUT + 2)  # 5 of 12 left silent: no longer most
    assert lost(tick(book, TIMEOUT + 3)) == []
    assert book.silence_held is None and book.silence_released == {None: TIMEOUT + 3}
    beat(book, HOSTS[7:9], TIMEOUT + 500)  # two of them were only read late
    beat(book, HOSTS[:7], 2 * TIMEOUT)
    assert lost(tick(book, 2 * TIMEOUT + 3)) == []
    assert lost(tick(book, 2 * TIMEOUT + 4)) == HOSTS[9:]


def test_the_hold_excuses_only_the_hosts_silent_when_it_ends() -> None:
    book = book_with(*HOSTS)
    beat(book, HOSTS[:2], 3000)
    assert lost(tick(book, TIMEOUT + 1)) == []  # 10 of 12 silent: held
    assert book.silence_held == (10, 12)
    beat(book, HOSTS[2:11], TIMEOUT + 2)  # 1 left: the hold ends
    assert lost(tick(book, TIMEOUT + 3)) == []
    # h00, h01 were heard within the timeout when it ended: their silence counts plainly
    assert lost(tick(book, 3000 + TIMEOUT + 1)) == HOSTS[:2]
    beat(book, HOSTS[2:11], 2 * TIMEOUT)
    assert lost(tick(book, 2 * TIMEOUT + 3)) == []
    assert lost(tick(book, 2 * TIMEOUT + 4)) == HOSTS[11:]


@pytest.mark.parametrize("hosts,silent", [(12, 6), (9, 9)])
def test_few_silent_hosts_or_a_small_cluster_keep_the_plain_rule(hosts: int,
                                                                 silent: int) -> None:
    names = HOSTS[:hosts]
    book = book_with(*names)
    beat(book, names[silent:], 4000)
    assert lost(tick(book, TIMEOUT + 1)) == names[:silent]
    assert book.silence_held is None


def test_the_guard_turned_off_loses_them_at_the_timeout() -> None:
    book = book_with(*HOSTS, silence_guard=SilenceGuard(fraction=1.0))
    assert lost(tick(book, TIMEOUT + 1)) == HOSTS


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4000), st.sets(st.sampled_from(HOSTS)),
                          st.booleans()), min_size=1, max_size=25))
def test_skipped_scans_decide_as_a_full_scan_every_tick(steps: list) -> None:
    """The book skips silence scans until the earliest time one could decide anything;
    the same ticks with a full scan each time (derived caches dropped) lose the same hosts
    at the same times, whether or not a mass silence holds."""
    assert_scans_agree(book_with(*HOSTS), book_with(*HOSTS),
                       [(gap, sorted(beating), ticks) for gap, beating, ticks in steps])


def test_the_service_logs_when_a_mass_silence_starts_and_ends(
        caplog: pytest.LogCaptureFixture) -> None:
    core = HostManagerCore(heartbeat_timeout_s=TIMEOUT / 1000)
    for h in HOSTS:
        core.handle("HostRegistered", host_registered(h), 0)
    caplog.set_level(logging.WARNING, logger="peloton.hostmgr.service")
    core.tick(TIMEOUT)
    assert caplog.records == []
    before = held_gauge()
    core.tick(TIMEOUT + 1)
    core.tick(TIMEOUT + 50)  # said once
    assert held_gauge() == before + 12
    assert [r.getMessage() for r in caplog.records] == [
        "hostmgr: 12 of 12 hosts silent at once for over 5s: more likely this host manager "
        "(or the broker) is behind than so many hosts failed; hosts are declared lost only "
        "after 30s of silence until it ends"]
    for h in HOSTS:
        core.handle("HostStatusReported", heartbeat(h, TIMEOUT + 60), TIMEOUT + 60)
    assert of(core.tick(TIMEOUT + 100), "HostLost") == []
    assert caplog.records[-1].getMessage() == (
        "hostmgr: mass silence over: hosts silent past 5s are lost again")
    assert held_gauge() == before


def held_gauge() -> float:
    value = REGISTRY.get_sample_value("peloton_hostmgr_hosts_silence_held")
    assert value is not None
    return value
