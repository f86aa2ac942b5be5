"""The host manager's snapshot (HostManagerCore.snapshot/restore) and its restart rules.

1. restore(snapshot()) behaves exactly like the original: a core lives through a generated
   history read in a random cross-topic order (live and replayed facts, heartbeats,
   ticks, restarts); at a random point its snapshot goes through JSON into a fresh core,
   and from then on both get the same inputs and must give the same events and state.
2. Unreadable data never crashes: restore raises ValueError, KeyError or TypeError and
   leaves the core as it was.
3. Heartbeats are not replayed: after a restart or a restore, liveness starts fresh from
   the restart with a grace, whatever the snapshot or the log says of old heartbeats.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import hypothesis.strategies as st
import pytest
from event_bodies import heartbeat, host_registered, job_created, placement, placement_made
from hostmgr_histories import History, history
from hypothesis import HealthCheck, given, settings
from json_paths import json_paths, parent_of

from peloton.hostmgr.domain import snapshot
from peloton.hostmgr.service import HostManagerCore
from peloton.model.event import Event

Body = dict[str, Any]


def _core() -> HostManagerCore:
    # short timeouts so that losses, rejections after the wait, prunes and the grace all
    # happen within a generated history (time moves 100 ms a tick)
    return HostManagerCore(heartbeat_timeout_s=0.3, retention_s=1.0, hold_s=0.25,
                           restart_grace_s=0.2)


def _json(state: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(state))
    return out


class Driver:
    """Feeds one or two cores the same inputs, drawn from a history's topics."""

    def __init__(self, h: History, data: st.DataObject) -> None:
        self.queues = {name: list(facts) for name, facts in sorted(h.log.items())}
        self.data = data
        self.now = 0

    def step(self, cores: list[HostManagerCore]) -> list[list[Event]]:
        kind = self.data.draw(st.sampled_from(["live", "live", "replay", "tick", "tick",
                                               "heartbeat", "restart"]))
        if kind in ("live", "replay") and any(self.queues.values()):
            name = self.data.draw(st.sampled_from([n for n, q in self.queues.items() if q]))
            etype, body = self.queues[name].pop(0)
            if kind == "live":
                return [c.handle(etype, body, self.now) for c in cores]
            for c in cores:
                c.fold(etype, body)
            return [[] for _ in cores]
        if kind == "heartbeat":
            hosts = sorted(cores[0].book.hosts.items())
            if hosts:
                name, host = self.data.draw(st.sampled_from(hosts))
                body = heartbeat(name, self.now, incarnation=host.incarnation)
                return [c.handle("HostStatusReported", body, self.now) for c in cores]
            return [[] for _ in cores]
        if kind == "restart":
            return [c.after_replay(self.now) for c in cores]
        self.now += 100
        outs = [c.tick(self.now) for c in cores]
        # the service reads its own events back, live
        for c, out in zip(cores, outs, strict=True):
            for ev in out:
                c.handle(ev.type, ev.body, self.now)
        return outs


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_a_restored_snapshot_behaves_exactly_like_the_original(data: st.DataObject) -> None:
    driver = Driver(history(data), data)
    a = _core()
    for _ in range(data.draw(st.integers(0, 40), label="steps before the snapshot")):
        driver.step([a])
    state = a.snapshot()
    assert _json(state) == state  # plain JSON-able data
    b = _core()
    b.restore(_json(state))
    assert b.snapshot() == state
    for _ in range(data.draw(st.integers(1, 40), label="steps after")):
        out_a, out_b = driver.step([a, b])
        assert out_a == out_b
    assert a.snapshot() == b.snapshot()


def _busy_core() -> HostManagerCore:
    """A core with something in every part of its state."""
    core = _core()
    for name in ("h1", "h2"):
        core.handle("HostRegistered", host_registered(name, ports=(31000, 31009)), 0)
    core.handle("JobCreated", job_created("j1", 3, ports=("http",)), 0)
    core.handle("PlacementMade", placement_made(
        placement("j1", 0, "h1", ports={"http": 31000}), placement("j1", 1, "h2"),
        placement("j9", 0, "h1")), 0)  # j9: no JobCreated yet, waits
    for ev in core.tick(100):
        core.handle(ev.type, ev.body, 100)
    core.handle("HostRegistered", host_registered("h2", incarnation="inc-2"), 150)
    assert core.book.pending and core.book.orphaned and core.book.jobs
    return core


def test_a_snapshot_covers_every_part_of_the_state() -> None:
    core = _busy_core()
    state = _json(core.snapshot())
    assert core.snapshot_version == snapshot.VERSION == 4
    twin = _core()
    twin.restore(state)
    assert twin.snapshot() == core.snapshot()
    assert twin.book.hosts["h1"].used_ports == core.book.hosts["h1"].used_ports  # derived
    assert twin.tick(200) == core.tick(200)


JUNK = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=3),
                 st.lists(st.integers(0, 3), max_size=3),
                 st.dictionaries(st.text(max_size=2), st.integers(0, 2), max_size=2))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.data())
def test_unreadable_snapshots_raise_a_readable_error_and_change_nothing(
        data: st.DataObject) -> None:
    core = _busy_core()
    before = core.snapshot()
    state = _json(before)
    path = data.draw(st.sampled_from(json_paths(state)[1:]))
    junk = data.draw(JUNK)
    target = parent_of(state, path)
    if data.draw(st.booleans()) and isinstance(target, dict):
        del target[path[-1]]
    else:
        target[path[-1]] = junk
    twin = _busy_core()
    try:
        twin.restore(state)
    except (ValueError, KeyError, TypeError):
        assert twin.snapshot() == before  # left as it was
        return
    assert isinstance(twin.snapshot(), dict)  # junk that happens to read is fine


@pytest.mark.parametrize("state", [None, [], "garbage", 7, {}, {"hosts": []},
                                   {"hosts": {"h1": []}}, {"hosts": {}, "jobs": []}],
                         ids=repr)
def test_restore_of_garbage_raises_value_key_or_type_error(state: Any) -> None:
    core = _busy_core()
    before = copy.deepcopy(core.snapshot())
    with pytest.raises((ValueError, KeyError, TypeError)):
        core.restore(state)
    assert core.snapshot() == before


# ------------------------------------------------------- heartbeats are not replayed

TIMEOUT, GRACE = 5_000, 10_000


def _lost(events: list[Event]) -> list[str]:
    return [ev.body["host"] for ev in events if ev.type == "HostLost"]


def _registered_long_ago() -> HostManagerCore:
    core = HostManagerCore(heartbeat_timeout_s=TIMEOUT / 1000, restart_grace_s=GRACE / 1000)
    for name in ("h1", "h2"):
        core.handle("HostRegistered", host_registered(name), 0)
    return core


def test_replayed_heartbeats_change_nothing_and_are_skipped_by_the_shell() -> None:
    core = _registered_long_ago()
    before = core.snapshot()
    core.fold("HostStatusReported", heartbeat("h1", 900_000))
    assert core.snapshot() == before
    assert "HostStatusReported" in core.replay_skips


@pytest.mark.parametrize("restored", [False, True], ids=["replayed", "restored"])
def test_after_a_restart_liveness_starts_fresh_with_a_grace(restored: bool) -> None:
    core = _registered_long_ago()  # last heartbeats read at t=0
    if restored:
        twin = _core()
        twin.book.restart_grace_ms, twin.book.heartbeat_timeout_ms = GRACE, TIMEOUT
        twin.book.stall_after_ms = TIMEOUT
        twin.restore(_json(core.snapshot()))
        core = twin
    start = 1_000_000  # the restart: long after the last heartbeat the log had
    assert core.after_replay(start) == []
    assert _lost(core.tick(start)) == []  # not lost at once for old silence
    # h1's agent heartbeats live once our consumers run; h2's agent died meanwhile
    for t in range(start + 1_000, start + GRACE + TIMEOUT + 1, 1_000):
        core.handle("HostStatusReported", heartbeat("h1", t), t)
        lost = _lost(core.tick(t))
        if t < start + GRACE:
            assert lost == [], t  # the grace: consumers may still be joining their group
        elif t == start + GRACE:
            assert lost == ["h2"]  # silent since the restart for longer than the timeout
            for ev in core.tick(t):
                core.handle(ev.type, ev.body, t)
    assert core.book.hosts["h1"].available and not core.book.hosts["h2"].available
