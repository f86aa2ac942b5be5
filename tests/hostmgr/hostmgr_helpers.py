"""Shared helpers for the host manager's tests (not a test module)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from event_bodies import heartbeat, host_registered, job_created, placement_made

from peloton.hostmgr.domain.hosts import HostBook
from peloton.model.event import Event

Body = dict[str, Any]
TIMEOUT = 5000
HOLD = 2000


def book_with(*hosts: str, cpu: float = 4.0, jobs: dict[str, int] | None = None,
              ports: tuple[int, int] = (31000, 31009), timeout: int = TIMEOUT,
              **kw: Any) -> HostBook:
    """Hosts registered at t=0 with `cpu` cores each (incarnation inc-1, after an earlier
    inc-0), jobs created, first offers taken."""
    book = HostBook(heartbeat_timeout_ms=timeout, hold_ms=HOLD, **kw)
    for name in hosts:
        for inc in ("inc-0", "inc-1"):
            book.fold("HostRegistered", host_registered(name, cpu=cpu, ports=ports,
                                                        incarnation=inc))
    for job_id, n in (jobs or {"j1": 4}).items():
        book.fold("JobCreated", job_created(job_id, n, ports=("http",), grace_s=7))
    book.tick(0)
    return book


def tick(book: HostBook, now: int = 100) -> list[Event]:
    """One tick whose events are folded back, as the service reads its own topics (the
    derived caches checked against a full scan first)."""
    assert_caches_exact(book)
    out = book.tick(now)
    for ev in out:
        book.fold(ev.type, ev.body)
    return out


def of(events: list[Event], etype: str) -> list[Event]:
    return [e for e in events if e.type == etype]


def rejections(events: list[Event]) -> list[tuple[str, int, str]]:
    return [(r["job_id"], r["instance"], r["reason"])
            for e in of(events, "PlacementRejected") for r in e.body["rejections"]]


def launched(events: list[Event]) -> list[tuple[str, str, int]]:
    return [(e.body["host"], x["job_id"], x["instance"])
            for e in of(events, "TaskLaunchRequested") for x in e.body["launches"]]


ROUNDS = itertools.count(1)


def place(book: HostBook, *placements: Body, now: int = 100,
          received: int | None = None) -> list[Event]:
    """One placement round (each call a new round number, as the placement engine does),
    read at `received` (default: `now`), then one tick at `now`."""
    book.fold("PlacementMade", placement_made(*placements, round_=next(ROUNDS)),
              received_ms=now if received is None else received)
    return tick(book, now)


def allocations(book: HostBook) -> dict[str, dict[tuple[str, int, int], tuple[Any, ...]]]:
    """Every host's runs as (incarnation, resources, ports), for comparing books."""
    return {name: {k: (h.incarnation, h.available, a.resources, a.ports)
                   for k, a in h.runs.items()}
            for name, h in book.hosts.items()}


def assert_caches_exact(book: HostBook) -> None:
    """The derived caches an idle tick relies on miss nothing a full scan would find: every
    host whose offer is out of date is in `to_offer`, and `maint.moving` is exactly the
    hosts DRAINING or DRAINED."""
    stale = {n for n, h in book.hosts.items() if book.offered.get(n) != h.generation}
    assert stale <= book.to_offer, sorted(stale - book.to_offer)
    moving = {n for n, m in book.maint.hosts.items()
              if m.state.value in ("DRAINING", "DRAINED")}
    assert book.maint.moving == moving


def beat(book: HostBook, hosts: list[str], at: int) -> None:
    """A heartbeat of each of `hosts`, read at `at`."""
    for h in hosts:
        book.fold("HostStatusReported", heartbeat(h, at), received_ms=at)


def lost(events: list[Event]) -> list[str]:
    """The hosts the events declare lost."""
    return [e.body["host"] for e in of(events, "HostLost")]


def assert_scans_agree(fast: HostBook, full: HostBook,
                       steps: Iterable[tuple[int, list[str], bool]]) -> None:
    """Per step (gap, hosts heard, tick or not): the same heartbeats to both books; at a
    tick, `full` drops its derived caches first (a full silence scan), and both lose the
    same hosts with the same reasons and hold the same zones."""
    now = 0
    for gap, beating, ticks in steps:
        now += gap
        for book in (fast, full):
            beat(book, beating, now)
        if ticks:
            full.derived_reset()
            got = [(e.body["host"], e.body["reason"]) for e in of(tick(fast, now), "HostLost")]
            want = [(e.body["host"], e.body["reason"]) for e in of(tick(full, now), "HostLost")]
            assert got == want, now
            assert fast.silence_zones == full.silence_zones
