"""A fleet of simulated hosts at scale (peloton.minicluster.fleet): host names, spread
heartbeats sent together a batch at a time, and ticks that visit only agents with something
due."""

from __future__ import annotations

import asyncio
from collections import Counter
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.minicluster.fleet import AgentFleetCore, fleet_configs, host_names
from peloton.model.resources import Resources

CAP = Resources(8.0, 8192.0, 1024.0, 0.0)


def test_host_names_prefix_and_start() -> None:
    assert host_names(3) == ["host-1", "host-2", "host-3"]
    assert host_names(2, "rack7-", 40) == ["rack7-40", "rack7-41"]


def test_a_fleet_refuses_a_host_twice() -> None:
    with pytest.raises(ValueError, match="given twice: \\['a'\\]"):
        AgentFleetCore(fleet_configs(["a", "b", "a"], CAP))


def test_configs_carry_capacity_labels_and_spread_phases() -> None:
    configs = fleet_configs(host_names(4), CAP, {"rack": "r1"}, heartbeat_s=2.0, zones="ab")
    assert [c.heartbeat_phase_s for c in configs] == [0.0, 0.5, 1.0, 1.5]
    assert [c.labels for c in configs][:2] == [{"rack": "r1", "zone": "a"},
                                               {"rack": "r1", "zone": "b"}]
    assert all(c.capacity == CAP and c.simulated for c in configs)
    assert len({c.incarnation for c in configs}) == 4


def heartbeats(core: AgentFleetCore, start: int, ticks: int, every: int) -> list[tuple[int, str]]:
    out = []
    for i in range(1, ticks + 1):
        now = start + i * every
        out += [(now, e.body["host"]) for e in core.tick(now) if e.type == "HostStatusReported"]
    return out


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.sampled_from([0.5, 1.0, 3.0, 10.0]), st.sampled_from([50, 100]))
def test_heartbeats_leave_together_at_most_a_batch_late(
        hosts: int, interval: float, every: int) -> None:
    """Every agent heartbeats once an interval, never sooner, at most one batch (and one
    tick) later; the ticks that carry heartbeats are a batch apart, each with its share."""
    async def go() -> None:
        configs = fleet_configs(host_names(hosts), CAP, heartbeat_s=interval)
        fleet = AgentFleetCore(configs)
        batch, interval_ms = fleet.heartbeat_batch_ms, round(interval * 1000)
        assert batch == max(50, min(1000, interval_ms // 10))
        start = 1_000_000
        assert len(fleet.after_replay(start)) == hosts
        got = heartbeats(fleet, start, int(interval_ms * 4 / every), every)
        sent: dict[str, list[int]] = {}
        for at, host in got:
            sent.setdefault(host, []).append(at)
        assert set(sent) == set(fleet.agents)
        for config in configs:
            times = sent[config.host]
            due = start + round(config.heartbeat_phase_s * 1000)
            assert due <= times[0] <= due + batch + every
            assert all(interval_ms <= b - a <= interval_ms + batch + every
                       for a, b in pairwise(times))
        carrying = Counter(at for at, _ in got)
        ticks = sorted(carrying)
        assert all(b - a >= batch for a, b in pairwise(ticks))
        assert max(carrying.values()) <= hosts * (batch + every) / interval_ms + 2

    asyncio.run(go())


def test_an_idle_fleet_ticks_only_the_agents_due() -> None:
    async def go() -> None:
        fleet = AgentFleetCore(fleet_configs(host_names(100), CAP, heartbeat_s=10.0))
        fleet.after_replay(0)
        assert fleet.heartbeat_batch_ms == 1000  # a tenth of the interval
        fleet.tick(50)  # confirms the registrations; host-1 (phase 0) heartbeats
        fleet.tick(100)  # confirms that heartbeat; host-2's (phase 0.1 s) waits for 1,050
        assert fleet._active == set()
        visited: list[str] = []
        for host, agent in fleet.agents.items():
            original = agent.tick

            def spy(now: int, _h: str = host, _t=original) -> list:  # type: ignore[no-untyped-def, type-arg]
                visited.append(_h)
                return _t(now)
            agent.tick = spy  # type: ignore[method-assign]
        fleet.tick(1050)  # the next batch: hosts with phase <= ~1 s, about 10 of 100
        assert 5 <= len(visited) <= 15

    asyncio.run(go())
