"""Host-routed agents on the real broker (peloton.agent.shell): a launch for host A is not
decoded by the agent of host B even when both hosts share a partition (B fetches it and
skips it by its key), a multi-host agent (a fleet) runs the launches of each of its hosts,
and of two agents announcing one host the later one serves it (the earlier stands down,
with a warning)."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from peloton.agent.app import AgentConfig, AgentCore
from peloton.agent.shell import AgentShell
from peloton.bus.catalog import topic
from peloton.bus.codec import Codec, default_codec, schema_dir
from peloton.bus.publisher import Publisher
from peloton.bus.routing import partition_for
from peloton.minicluster.fleet import AgentFleetCore
from peloton.model.event import Event
from peloton.model.resources import Resources

pytestmark = pytest.mark.integration

CAP = Resources(8.0, 8192.0, 1024.0, 0.0)


class CountingCodec(Codec):
    """The default codec, counting what it decodes per event type."""

    def __init__(self) -> None:
        super().__init__(schema_dir())
        self.decoded: Counter[str] = Counter()

    def decode(self, data: bytes | None) -> tuple[str, dict[str, Any]]:
        etype, body = super().decode(data)
        self.decoded[etype] += 1
        return etype, body


def same_partition_hosts(partitions: int) -> tuple[str, str, str]:
    """Two hosts whose launches share a partition, and a third in another one."""
    names = [f"node-{i}" for i in range(200)]
    first = names[0]
    p = partition_for(first.encode(), partitions)
    twin = next(n for n in names[1:] if partition_for(n.encode(), partitions) == p)
    other = next(n for n in names[1:] if partition_for(n.encode(), partitions) != p)
    return first, twin, other


def config(host: str, incarnation: str) -> AgentConfig:
    return AgentConfig(host=host, incarnation=incarnation, capacity=CAP,
                       sandbox_root=Path("/tmp"), simulated=True)


def launch(host: str, incarnation: str, job: str) -> Event:
    return Event("TaskLaunchRequested", host, {
        "host": host, "incarnation": incarnation, "at": 1, "launches": [{
            "job_id": job, "instance": 0, "run": 1, "command": "sleep 30", "env": {},
            "resources": {"cpu": 1.0, "memory": 1.0, "disk": 0.0, "gpu": 0.0},
            "ports": {}, "kill_grace_period_s": 1.0, "round": 1,
            "health_check_json": None, "volume": None, "config_version": 1}]})


async def until(check: Any, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def running(shell: AgentShell) -> tuple[asyncio.Event, asyncio.Task[None]]:
    stop = asyncio.Event()
    task = asyncio.ensure_future(shell.serve(stop))
    await asyncio.wait_for(shell.started.wait(), 30)
    return stop, task


def test_launches_reach_only_the_agent_of_their_host(fresh_broker: str) -> None:
    parts = topic("task-launch-requested").partitions
    a, b, c = same_partition_hosts(parts)

    async def go() -> None:
        fleet = AgentFleetCore([config(a, "inc-a"), config(c, "inc-c")])
        single = AgentCore(config(b, "inc-b"))
        b_codec = CountingCodec()
        fleet_shell = AgentShell("fleet", fleet, fresh_broker, [a, c])
        b_shell = AgentShell(f"agent-{b}", single, fresh_broker, [b], codec=b_codec)
        stops = [await running(fleet_shell), await running(b_shell)]
        publisher = Publisher(fresh_broker, default_codec())
        try:
            await publisher.publish([launch(a, "inc-a", "job-a"), launch(c, "inc-c", "job-c"),
                                     launch(b, "inc-b", "job-b")])
            await until(lambda: "job-a-0-1" in fleet.agents[a].runner.running()
                        and "job-c-0-1" in fleet.agents[c].runner.running()
                        and "job-b-0-1" in single.runner.running())
            assert fleet.agents[a].runner.running() == ["job-a-0-1"]
            assert fleet.agents[c].runner.running() == ["job-c-0-1"]
            # b fetched a's launch (same partition) and skipped it by key, undecoded
            assert b_codec.decoded["TaskLaunchRequested"] == 1
            assert b_shell.route.skipped >= 1
            assert [tp.partition for tp in b_shell.consumer.assigned
                    if tp.topic == "task-launch-requested"] == [partition_for(b.encode(), parts)]
        finally:
            await publisher.stop()
            for stop, task in stops:
                stop.set()
                await task

    asyncio.run(go())


def test_the_later_of_two_agents_of_one_host_serves_it(
        fresh_broker: str, caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        first = AgentCore(config("dup", "inc-old"))
        second = AgentCore(config("dup", "inc-new"))
        s1 = AgentShell("agent-dup-1", first, fresh_broker, ["dup"])
        s2 = AgentShell("agent-dup-2", second, fresh_broker, ["dup"])
        old = await running(s1)
        publisher = Publisher(fresh_broker, default_codec())
        try:
            await publisher.publish([launch("dup", "inc-old", "job-1")])
            await until(lambda: first.runner.running() == ["job-1-0-1"])
            new = await running(s2)
            await until(lambda: first.superseded_by == "inc-new")
            await until(lambda: first.runner.running() == [])  # its run killed
            assert second.superseded_by is None  # the older registration came before its own
            await publisher.publish([launch("dup", "inc-new", "job-2")])
            await until(lambda: second.runner.running() == ["job-2-0-1"])
            assert first.tick(10**13) == []  # stood down: no heartbeat, no report
        finally:
            await publisher.stop()
            for stop, task in (old, new):
                stop.set()
                await task

    with caplog.at_level(logging.WARNING, logger="peloton.agent.app"):
        asyncio.run(go())
    assert any("another agent registered this host after this one (incarnation inc-new "
               "after inc-old)" in r.getMessage() for r in caplog.records)


def test_a_core_without_ticks_keeps_being_served(fresh_broker: str) -> None:
    """The shell ends when the first of its tasks ends; a core with no tick interval has no
    tick task, rather than one that ends at once and takes the consumer down with it."""
    async def go() -> None:
        core = AgentCore(config("quiet", "inc-q"))
        core.tick_interval = None
        shell = AgentShell("agent-quiet", core, fresh_broker, ["quiet"])
        stop, task = await running(shell)
        try:
            await asyncio.sleep(0.5)  # the old shell had returned by now
            assert not task.done()
        finally:
            stop.set()
            await task

    asyncio.run(go())
