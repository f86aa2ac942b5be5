"""Two agents announce one host (bad input): the later registration in the log wins. An
agent that reads, after its own, a HostRegistered of its host with another incarnation
logs it, kills its runs unreported and stops serving the host; one read before its own
(an older agent it replaced) changes nothing. (On the real broker:
tests/bus/test_bus_hostrouted_broker.py.)"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from peloton.agent.app import AgentConfig, AgentCore
from peloton.model.resources import Resources

HOST = "h1"


def core(incarnation: str = "mine") -> AgentCore:
    return AgentCore(AgentConfig(host=HOST, incarnation=incarnation,
                                 capacity=Resources(4.0, 4096.0, 1024.0, 0.0),
                                 sandbox_root=Path("/tmp"), simulated=True))


def registered(incarnation: str) -> dict[str, Any]:
    return {"host": HOST, "incarnation": incarnation, "at": 1,
            "capacity": {"cpu": 4.0, "memory": 4096.0, "disk": 1024.0, "gpu": 0.0},
            "labels": {}, "log_url": "", "port_range_begin": 1, "port_range_end": 2,
            "simulated": True}


def launch(incarnation: str, job: str) -> dict[str, Any]:
    return {"host": HOST, "incarnation": incarnation, "at": 2, "launches": [{
        "job_id": job, "instance": 0, "run": 1, "command": "sleep 60", "env": {}}]}


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_later_registration_of_its_host_makes_the_agent_stand_down(
        caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        agent = core()
        assert [e.type for e in agent.after_replay(1000)] == ["HostRegistered"]
        agent.handle("HostRegistered", registered("older"), 1000)  # before ours: an old one
        agent.handle("HostRegistered", registered("mine"), 1000)
        agent.handle("TaskLaunchRequested", launch("mine", "j"), 1000)
        await settle()
        assert agent.runner.running() == ["j-0-1"]
        assert agent.superseded_by is None
        assert {e.type for e in agent.tick(1100)} >= {"TaskStatusReported"}
        agent.handle("HostRegistered", registered("mine"), 1200)  # our own, re-sent: nothing
        assert agent.superseded_by is None
        with caplog.at_level(logging.WARNING, logger="peloton.agent.app"):
            agent.handle("HostRegistered", registered("newer"), 1200)
        await settle()
        assert agent.superseded_by == "newer"
        assert agent.runner.running() == []  # its run killed
        assert agent.tick(10_000) == []  # no heartbeat, no report of the kill
        agent.handle("TaskLaunchRequested", launch("mine", "k"), 10_000)
        await settle()
        assert agent.runner.running() == []
        agent.discard_unpublished()
        assert agent.tick(20_000) == []  # never registers again

    asyncio.run(go())
    (line,) = [r.getMessage() for r in caplog.records if "another agent" in r.getMessage()]
    assert "incarnation newer after mine" in line and "kills its 1 run(s)" in line


def test_an_older_registration_read_before_its_own_changes_nothing() -> None:
    async def go() -> None:
        agent = core()
        agent.after_replay(1000)
        for inc in ("a", "b", "c"):
            agent.handle("HostRegistered", registered(inc), 1000)
        assert agent.superseded_by is None
        assert [e.type for e in agent.tick(3000)] == ["HostStatusReported"]

    asyncio.run(go())
