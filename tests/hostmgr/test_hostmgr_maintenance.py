"""Host maintenance in the host manager (hostmgr/domain/maintenance.py).

1. The walk: start -> DRAINING (no new work: offered unavailable, placements rejected),
   the last run ends -> DRAINED, next tick -> DOWN, complete -> UP (work again); cancel.
2. Refusals name the reason: unknown host, already DOWN, not in maintenance.
3. Presence: first registration, loss and return are announced; maintenance survives
   a loss and a new incarnation.
4. Properties: any order of commands, run ends, losses and ticks only ever moves a host
   along the machine; a replay of the log (requests undecided or decided, in any
   cross-topic order) rebuilds the same maintenance states; a snapshot keeps them.
"""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
from event_bodies import (
    agent_status,
    heartbeat,
    host_lost,
    host_maintenance_requested,
    host_registered,
    launch,
    launch_requested,
    placement,
    placement_made,
)
from hostmgr_helpers import book_with, of, rejections, tick
from hypothesis import given, settings

from peloton.bus.check import check_event
from peloton.hostmgr.domain import maintenance, snapshot
from peloton.hostmgr.domain.hosts import HostBook
from peloton.hostmgr.service import HostManagerCore
from peloton.model.event import Event
from peloton.model.hoststate import TRANSITIONS, HostState

Body = dict[str, Any]


def request(book: HostBook, host: str, command: str, now: int, **kw: Any) -> list[Event]:
    out = maintenance.handle_request(
        book, host_maintenance_requested(host, command, at=now, **kw), now)
    for ev in out:
        check_event(ev)
    return out


def states(book: HostBook) -> dict[str, str]:
    return {name: m.state.value for name, m in sorted(book.maint.hosts.items())}


def offer_of(events: list[Event], host: str) -> Body:
    offers = [o for e in of(events, "OfferReceived") for o in e.body["offers"]
              if o["host"] == host]
    assert offers, f"no offer of {host}"
    return offers[-1]


def run_on(book: HostBook, host: str, instance: int = 0) -> None:
    book.fold("TaskLaunchRequested", launch_requested(host, launch("j1", instance), at=50))


def test_first_registration_is_announced_up_and_present() -> None:
    book = book_with("h1")
    assert states(book) == {"h1": "UP"}
    m = book.maint.hosts["h1"]
    assert m.announced and m.present
    assert tick(book, 100) == []  # nothing new to say


def test_the_whole_walk_drain_down_complete() -> None:
    book = book_with("h1", "h2")
    run_on(book, "h1")
    out = request(book, "h1", "start_maintenance", 100, deadline_ms=700_000,
                  requested_by="ops")
    assert [(e.type, e.body["state"], e.body["previous_state"], e.body["deadline_ms"])
            for e in out] == [("HostStateChanged", "DRAINING", "UP", 700_000)]
    assert out[0].body["reason"] == "start_maintenance requested by ops"
    assert out[0].body["request"] == "start_maintenance@100"
    # no new work: offered as unavailable, a placement onto it is rejected
    ticked = tick(book, 200)
    assert offer_of(ticked, "h1")["available"] is False
    assert not of(ticked, "HostStateChanged")  # still a run on it
    book.fold("PlacementMade", placement_made(placement("j1", 1, "h1"), round_=9))
    assert rejections(tick(book, 300)) == [("j1", 1, "host h1 is DRAINING for maintenance")]
    # the last run ends: DRAINED at the next tick, DOWN at the one after
    book.fold("TaskStatusReported", agent_status("h1", "j1", 0, "KILLED", at=350))
    drained = of(tick(book, 400), "HostStateChanged")
    assert [(e.body["state"], e.body["reason"]) for e in drained] == [
        ("DRAINED", "drained: no runs left")]
    assert drained[0].body["deadline_ms"] == 700_000
    down = of(tick(book, 500), "HostStateChanged")
    assert [(e.body["state"], e.body["reason"]) for e in down] == [
        ("DOWN", "down for maintenance")]
    assert tick(book, 600) == []
    # complete: UP, offered as available, placements launch there again
    out = request(book, "h1", "complete_maintenance", 700)
    assert [(e.body["state"], e.body["deadline_ms"]) for e in out] == [("UP", None)]
    assert offer_of(tick(book, 800), "h1")["available"] is True
    book.fold("PlacementMade", placement_made(placement("j1", 1, "h1"), round_=10))
    assert [e.body["host"] for e in of(tick(book, 900), "TaskLaunchRequested")] == ["h1"]


def test_a_host_without_runs_drains_at_the_next_tick() -> None:
    book = book_with("h1")
    request(book, "h1", "start_maintenance", 100)
    assert states(book) == {"h1": "DRAINING"}
    tick(book, 200)
    assert states(book) == {"h1": "DRAINED"}
    tick(book, 300)
    assert states(book) == {"h1": "DOWN"}


def test_cancel_brings_a_draining_or_drained_host_back_up() -> None:
    book = book_with("h1", "h2")
    run_on(book, "h1")
    request(book, "h1", "start_maintenance", 100)
    request(book, "h2", "start_maintenance", 100)
    tick(book, 200)
    assert states(book) == {"h1": "DRAINING", "h2": "DRAINED"}
    for name in ("h1", "h2"):
        out = request(book, name, "cancel_maintenance", 300)
        assert [(e.body["state"], e.body["deadline_ms"]) for e in out] == [("UP", None)]
    assert states(book) == {"h1": "UP", "h2": "UP"}


def test_refusals_say_why() -> None:
    book = book_with("h1")
    cases = [("nope", "start_maintenance", "unknown host nope"),
             ("h1", "complete_maintenance", "the host is UP: it is not in maintenance"),
             ("h1", "cancel_maintenance", "the host is UP: there is no maintenance to cancel"),
             ("h1", "drained", "unknown command 'drained'")]
    for host, command, reason in cases:
        out = request(book, host, command, 100)
        assert [e.type for e in out] == ["HostMaintenanceRejected"]
        assert out[0].body["reason"].startswith(reason), out[0].body
        assert out[0].body["command"] == command
    request(book, "h1", "start_maintenance", 100)
    tick(book, 200)
    tick(book, 300)
    out = request(book, "h1", "start_maintenance", 400)
    assert out[0].type == "HostMaintenanceRejected"
    assert out[0].body["reason"].startswith("the host is already DOWN")
    assert states(book) == {"h1": "DOWN"}


def test_loss_and_return_are_announced_and_maintenance_survives_them() -> None:
    book = book_with("h1")
    run_on(book, "h1")
    request(book, "h1", "start_maintenance", 100)
    book.fold("HostLost", host_lost("h1", incarnation="inc-1", at=150))
    out = of(tick(book, 200), "HostStateChanged")
    # the loss released its runs: drained, and announced as absent
    assert [(e.body["state"], e.body["present"]) for e in out] == [("DRAINED", False)]
    book.fold("HostRegistered", host_registered("h1", incarnation="inc-2", at=250),
              received_ms=250)
    ticked = tick(book, 300)
    out = of(ticked, "HostStateChanged")
    assert [(e.body["state"], e.body["present"], e.body["reason"]) for e in out] == [
        ("DOWN", True, "down for maintenance")]  # says it is back, too
    assert offer_of(ticked, "h1")["available"] is False


def test_a_lost_host_is_announced_absent() -> None:
    book = book_with("h1")
    book.fold("HostLost", host_lost("h1", incarnation="inc-1", at=150))
    out = of(tick(book, 200), "HostStateChanged")
    assert [(e.body["state"], e.body["present"], e.body["reason"]) for e in out] == [
        ("UP", False, "host lost")]


def test_after_a_restart_a_host_back_from_a_loss_is_not_announced_lost_again() -> None:
    book = book_with("h1")
    book.fold("HostLost", host_lost("h1", incarnation="inc-1", at=150))
    lost = of(tick(book, 200), "HostStateChanged")
    book.fold("HostStatusReported", heartbeat("h1", 250), received_ms=250)  # a stall
    back = of(tick(book, 300), "HostStateChanged")
    assert [e.body["reason"] for e in lost + back] == ["host lost", "host is back"]
    # restart: the log has the loss and both announcements, no heartbeat
    twin = HostBook(heartbeat_timeout_ms=5000, restart_grace_ms=1000)
    for name in ("inc-0", "inc-1"):
        twin.fold("HostRegistered", host_registered("h1", incarnation=name))
    twin.fold("HostLost", host_lost("h1", incarnation="inc-1", at=150))
    for ev in lost + back:
        twin.fold(ev.type, ev.body)
    twin.after_restart(1_000)
    assert of(tick(twin, 1_100), "HostStateChanged") == []  # within the grace
    twin.fold("HostStatusReported", heartbeat("h1", 1_200), received_ms=1_200)
    assert of(tick(twin, 1_300), "HostStateChanged") == []  # present all along


def test_a_replayed_request_is_decided_at_the_first_tick_once() -> None:
    live = book_with("h1")
    log = [("HostMaintenanceRequested", host_maintenance_requested("h1", at=100))]
    # replayed, never decided (the decision did not reach the log): the tick decides it
    book = book_with("h1")
    for etype, body in log:
        book.fold(etype, body)
    out = of(tick(book, 200), "HostStateChanged")
    assert [e.body["state"] for e in out] == ["DRAINING"]
    assert [e.body["state"] for e in of(tick(book, 300), "HostStateChanged")] == ["DRAINED"]
    # replayed after its decision (in either order): not decided again
    decision = request(live, "h1", "start_maintenance", 100)
    for facts in ([*log, *[(e.type, e.body) for e in decision]],
                  [*[(e.type, e.body) for e in decision], *log]):
        again = book_with("h1")
        for etype, body in facts:
            again.fold(etype, body)
        assert states(again) == {"h1": "DRAINING"}
        assert again.maint.undecided == []


# ------------------------------------------------------------------- properties

HOSTS = ("h1", "h2", "h3")
COMMANDS = ("start_maintenance", "complete_maintenance", "cancel_maintenance")
LEGAL = {(a.value, b.value) for (a, _), b in TRANSITIONS.items()}

Step = tuple[str, Any]


@st.composite
def histories(draw: st.DrawFn) -> list[Step]:
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(["request", "request", "tick", "tick", "launch", "end",
                                     "lose", "register"]))
        host = draw(st.sampled_from(HOSTS))
        if kind == "request":
            steps.append((kind, (host, draw(st.sampled_from(COMMANDS)))))
        else:
            steps.append((kind, (host, draw(st.integers(0, 2)))))
    return steps


def live_run(steps: list[Step]) -> tuple[HostBook, list[tuple[str, Body]]]:
    """Runs the steps live; returns the book and the whole log (inputs and outputs)."""
    book = HostBook(heartbeat_timeout_ms=10**9)
    log: list[tuple[str, Body]] = []

    def fact(etype: str, body: Body) -> None:
        book.fold(etype, body, received_ms=now)
        log.append((etype, body))

    now = 0
    incs = dict.fromkeys(HOSTS, 1)
    for name in HOSTS:
        fact("HostRegistered", host_registered(name, incarnation="i1"))
    for kind, (host, n) in steps:
        now += 10
        if kind == "request":
            body = host_maintenance_requested(host, n, at=now)
            log.append(("HostMaintenanceRequested", body))
            log += [(e.type, e.body) for e in maintenance.handle_request(book, body, now)]
        elif kind == "tick":
            log += [(e.type, e.body) for e in tick(book, now)]
        elif kind == "launch":
            fact("TaskLaunchRequested", launch_requested(
                host, launch("j1", n, run=now), incarnation=f"i{incs[host]}", at=now))
        elif kind == "end":
            runs = sorted(book.hosts[host].runs)
            if runs:
                job, instance, run = runs[0]
                fact("TaskStatusReported", agent_status(
                    host, job, instance, "SUCCEEDED", run=run, at=now,
                    incarnation=f"i{incs[host]}"))
        elif kind == "lose":
            fact("HostLost", host_lost(host, incarnation=f"i{incs[host]}", at=now))
        else:
            incs[host] += 1
            fact("HostRegistered", host_registered(host, incarnation=f"i{incs[host]}",
                                                   at=now))
    return book, log


@settings(max_examples=150, deadline=None, derandomize=True)
@given(histories())
def test_any_order_of_commands_only_moves_hosts_along_the_machine(steps: list[Step]) -> None:
    _, log = live_run(steps)
    seen: dict[str, str] = {}
    for etype, body in log:
        if etype == "HostStateChanged":
            check_event(Event(etype, body["host"], body))
            pair = (body["previous_state"], body["state"])
            assert pair[0] == pair[1] or pair in LEGAL, pair
            assert seen.get(body["host"], "UP") == body["previous_state"]
            seen[body["host"]] = body["state"]
            if body["state"] == "UP":
                assert body["deadline_ms"] is None


@settings(max_examples=100, deadline=None, derandomize=True)
@given(histories(), st.randoms(use_true_random=False), st.booleans())
def test_replay_equals_live(steps: list[Step], rnd: Any, lose_tail: bool) -> None:
    book, log = live_run(steps)
    # replay in any order that keeps each topic's order per host (host-keyed topics)
    by_host: dict[str, list[tuple[str, Body]]] = {}
    for etype, body in log:
        if "host" not in body:  # offers: nothing about maintenance
            continue
        by_host.setdefault(f"{etype in ('HostStateChanged', 'HostMaintenanceRejected')}"
                           f"{etype == 'HostMaintenanceRequested'}{body['host']}",
                           []).append((etype, body))
    queues = list(by_host.values())
    twin = HostBook(heartbeat_timeout_ms=10**9)
    while any(queues):
        q = rnd.choice([q for q in queues if q])
        etype, body = q.pop(0)
        twin.fold(etype, body)
    assert twin.maint.undecided == []  # every request in the log was decided
    assert {h: (m.state, m.deadline_ms, m.present) for h, m in twin.maint.hosts.items()} == {
        h: (m.state, m.deadline_ms, m.present) for h, m in book.maint.hosts.items()}
    if lose_tail:
        # the decisions of the last requests never reached the log: replayed without
        # them, the first tick decides them as live did
        decided = [i for i, (t, _) in enumerate(log) if t == "HostMaintenanceRequested"]
        if decided:
            cut = decided[-1]
            partial = HostBook(heartbeat_timeout_ms=10**9)
            for etype, body in log[:cut + 1]:
                partial.fold(etype, body)
            out = partial.tick(10**6)
            live = [b for t, b in log[cut + 1:]
                    if t in ("HostStateChanged", "HostMaintenanceRejected")
                    and b.get("request")][:1]
            got = [e.body for e in out if e.body.get("request")]
            assert [(b["host"], b.get("state"), b["reason"]) for b in got] == [
                (b["host"], b.get("state"), b["reason"]) for b in live]


def test_a_snapshot_keeps_maintenance_states_and_waiting_requests() -> None:
    core = HostManagerCore()
    for name in ("h1", "h2"):
        core.handle("HostRegistered", host_registered(name), 0)
    core.tick(10)
    core.handle("HostMaintenanceRequested",
                host_maintenance_requested("h1", deadline_ms=9_000, at=20), 20)
    core.fold("HostMaintenanceRequested", host_maintenance_requested("h2", at=30))
    state = json.loads(json.dumps(core.snapshot()))
    assert snapshot.VERSION == 4
    twin = HostManagerCore()
    twin.restore(state)
    assert twin.snapshot() == core.snapshot()
    assert twin.book.maint.hosts["h1"].deadline_ms == 9_000
    assert twin.tick(100) == core.tick(100)
    assert states(twin.book) == {"h1": "DRAINED", "h2": "DRAINING"}
    assert twin.book.maint.state("h1") is HostState.DRAINED
