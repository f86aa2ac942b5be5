"""A fleet of simulated hosts at scale (peloton.minicluster.fleet): host names, spread
heartbeats, and ticks that visit only agents with something due, with the same heartbeats
as ticking every agent."""

from __future__ import annotations

import asyncio
from collections import Counter

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
@given(st.integers(1, 40), st.sampled_from([0.5, 1.0, 3.0]), st.sampled_from([50, 100]))
def test_scheduled_ticks_send_the_heartbeats_of_ticking_every_agent(
        hosts: int, interval: float, every: int) -> None:
    async def go() -> None:
        configs = fleet_configs(host_names(hosts), CAP, heartbeat_s=interval)
        fleet = AgentFleetCore(configs)
        reference = AgentFleetCore(configs)
        start = 1_000_000
        assert len(fleet.after_replay(start)) == len(reference.after_replay(start)) == hosts
        ticks = int(interval * 1000 * 3 / every)
        got = heartbeats(fleet, start, ticks, every)
        want = []
        for i in range(1, ticks + 1):  # the plain rule: every agent ticks every time
            now = start + i * every
            want += [(now, e.body["host"]) for a in reference.agents.values()
                     for e in a.tick(now) if e.type == "HostStatusReported"]
        assert sorted(got) == sorted(want)
        per_host = Counter(h for _, h in got)
        assert set(per_host) == set(fleet.agents)
        # spread: no tick carries more than its share of the hosts (plus rounding)
        per_tick = Counter(t for t, _ in got)
        assert max(per_tick.values()) <= hosts * every / (interval * 1000) + 2

    asyncio.run(go())


def test_an_idle_fleet_ticks_only_the_agents_due() -> None:
    async def go() -> None:
        fleet = AgentFleetCore(fleet_configs(host_names(100), CAP, heartbeat_s=10.0))
        fleet.after_replay(0)
        fleet.tick(50)  # confirms the registrations; host-1 (phase 0) heartbeats
        fleet.tick(100)  # confirms that heartbeat; host-2 (phase 0.1 s) heartbeats
        assert fleet._active == {"host-2"}
        visited: list[str] = []
        for host, agent in fleet.agents.items():
            original = agent.tick

            def spy(now: int, _h: str = host, _t=original) -> list:  # type: ignore[no-untyped-def, type-arg]
                visited.append(_h)
                return _t(now)
            agent.tick = spy  # type: ignore[method-assign]
        fleet.tick(1000)  # hosts with phase <= ~1 s: about 10 of 100
        assert 5 <= len(visited) <= 15

    asyncio.run(go())
