"""Failover: "a new leader rebuilds its state from the event log; the state after failover
equals the state before it".

A leader runs pools, admission and preemption against the real job manager core
(`Sim`); its whole log is then folded into fresh cores, in two partition interleavings
and, in the integration test, through the real dev broker with the service's own replay.
The folded cores must hold the leader's ledger, tree and (after one cycle) entitlements,
and decide exactly what the leader decides next. Leader-local counters are not part of the
log and restart at a failover: admission aging (only the wording of pending reasons
differs) and the consecutive-cycles count of preemption (it may take N cycles again).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_resmgr_service_cycle import Sim, two_pools

from peloton.bus.catalog import topic, topic_for_event
from peloton.bus.codec import default_codec
from peloton.model.event import Event
from peloton.resmgr.service import ResourceManagerCore


def leader_with_history() -> Sim:
    """Pools A and B, a job in each (A preempted down to its share), a rejected request,
    an updated and a deleted pool, a finished job."""
    sim = two_pools()
    sim.create_pool("/tmp", 0, 2)
    sim.create_pool("/A", 1, 2, rid="duplicate")  # rejected
    sim.submit("a", "/A", 12)
    sim.run(1.0)
    sim.submit("b", "/B", 12)
    sim.run(5.0)
    sim.send(Event("ResourcePoolDeleteRequested", "/tmp",
                   {"request_id": "del-tmp", "at": sim.now, "path": "/tmp"}))
    sim.run(0.5)
    assert len([t for e in sim.of_type("TasksPreempted") for t in e.body["tasks"]]) == 6
    return sim


def partitioned(log: list[Event]) -> dict[tuple[str, int], list[Event]]:
    """The log as the broker stores it: per topic partition, in publish order."""
    parts: dict[tuple[str, int], list[Event]] = {}
    for ev in log:
        t = topic_for_event(ev.type)
        parts.setdefault((t.name, zlib.crc32(ev.key.encode()) % t.partitions), []).append(ev)
    return parts


def interleave(parts: dict[tuple[str, int], list[Event]], reverse: bool) -> Iterator[Event]:
    """Round-robin over partitions (order kept within each), in one of two orders."""
    queues = [list(q) for _, q in sorted(parts.items(), reverse=reverse)]
    while any(queues):
        for q in queues:
            if q:
                yield q.pop(0)


def replica(events: Iterator[Event]) -> ResourceManagerCore:
    core = ResourceManagerCore(1.0, preemption_cycles=2)
    core.manager.min_recompute_ms = 0
    for ev in events:
        if topic_for_event(ev.type).name in core.replay:
            core.fold(ev.type, ev.body)
    return core


def comparable(events: list[Event]) -> list[tuple[str, str, Any]]:
    """Decisions without the leader-local parts: the cycle counter, and pending reasons.
    Admission's aging counters are not in the log and restart at a failover, so a reason
    "held back: gang g has waited too long" may read "pool over entitlement" again and be
    republished once (AdmissionDeferred is published when a reason changes); which tasks
    are admitted or preempted, and the entitlements, must not change."""
    out = []
    for ev in events:
        if ev.type == "AdmissionDeferred":
            continue
        body = {k: v for k, v in ev.body.items() if k != "cycle"}
        out.append((ev.type, ev.key, body))
    return out


def test_a_replica_folded_from_the_log_holds_the_leaders_state() -> None:
    sim = leader_with_history()
    parts = partitioned(sim.log)
    one, two = replica(interleave(parts, False)), replica(interleave(parts, True))
    before = sim.rm.manager.view()
    for core in (one, two):
        state = core.manager.view()
        assert state["pools"] == before["pools"]
        assert state["tasks"] == before["tasks"]
        assert state["hosts"] == before["hosts"]
        assert state["jobs"] == before["jobs"]
    assert sorted(before["pools"]) == ["/A", "/B", "/default"]


def test_after_failover_the_new_leader_computes_and_decides_what_the_old_one_would() -> None:
    sim = leader_with_history()
    parts = partitioned(sim.log)
    new_leader = replica(interleave(parts, True))
    at = sim.now + 5_000  # a full cycle later: due for both
    old_events = sim.rm.tick(at)
    new_events = new_leader.tick(at)
    assert comparable(new_events) == comparable(old_events)
    assert new_leader.manager.view() == sim.rm.manager.view()
    ent = {p["pool"]: p["entitlement"]["cpu"] for e in new_events
           if e.type == "EntitlementUpdated" for p in e.body["pools"]}
    assert ent["/A"] == ent["/B"] == 6.0


def test_a_replica_does_not_preempt_again_what_the_old_leader_already_preempted() -> None:
    sim = two_pools()
    sim.submit("a", "/A", 12)
    sim.run(1.0)
    sim.submit("b", "/B", 12)
    sim.run(3.0)
    # the kills are in flight (the agents have not answered): fail over now
    preempted = [t for e in sim.of_type("TasksPreempted") for t in e.body["tasks"]]
    assert len(preempted) == 6
    new_leader = replica(interleave(partitioned(sim.log), False))
    events: list[Event] = []
    for step in range(1, 6):
        events += new_leader.tick(sim.now + step * 1000)
    assert not [e for e in events if e.type == "TasksPreempted"]


# ---- through the real dev broker ---------------------------------------------------------
@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from peloton.minicluster.servers import free_port, start_tansu

    server = start_tansu(free_port(), Path(tmp_path_factory.mktemp("tansu")) / "tansu.log")
    try:
        yield server.address
    finally:
        server.stop()


async def _publish(bootstrap: str, log: list[Event]) -> None:
    from peloton.api.publisher import KafkaPublisher
    from peloton.bus.faustapp import ensure_topics

    await ensure_topics(bootstrap)
    publisher = KafkaPublisher(bootstrap)
    try:
        for ev in log:
            await publisher.publish(ev)
    finally:
        await publisher.stop()


async def _replay(bootstrap: str) -> ResourceManagerCore:
    from peloton.bus.replay import replay_topics

    core = ResourceManagerCore(1.0, preemption_cycles=2)
    await replay_topics(bootstrap, list(core.replay), default_codec(), core.fold)
    return core


@pytest.mark.integration
def test_two_cores_replaying_the_dev_broker_log_equal_the_leader(broker: str) -> None:
    sim = leader_with_history()
    asyncio.run(_publish(broker, sim.log))
    first = asyncio.run(_replay(broker))
    second = asyncio.run(_replay(broker))
    at = sim.now + 5_000
    expected = comparable(sim.rm.tick(at))
    assert topic("respool-events").partitions == 1  # the tree replays in decision order
    for core in (first, second):
        assert comparable(core.tick(at)) == expected
        assert core.manager.view() == sim.rm.manager.view()
