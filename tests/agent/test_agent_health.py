"""The agent runs health checks and keeps volumes: real processes on the wall clock, and
the simulated runner on simulated time.

Every TaskStatusReported the agent returns is encoded with the real codec here, so the
reports also match the newest schema.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import TASK_PYTHON

from peloton.agent.app import AgentConfig, AgentCore
from peloton.bus.codec import default_codec
from peloton.minicluster.servers import free_port
from peloton.model.event import Event
from peloton.model.ids import run_id
from peloton.model.resources import Resources
from peloton.runner.vclock import VirtualClockLoop, settle

HOST = "host-1"
INCARNATION = "host-1-a"
T0 = 1_700_000_000_000
TICK_MS = 50


def health_check(kind: str = "COMMAND", *, command: str = "true", port: int | str = 0,
                 path: str = "/", initial: int = 0, interval: int = 1, failures: int = 2,
                 timeout: int = 1) -> str:
    body: dict[str, Any] = {"type": kind, "initialIntervalSecs": initial,
                            "intervalSecs": interval, "maxConsecutiveFailures": failures,
                            "timeoutSecs": timeout}
    if kind == "COMMAND":
        body["commandCheck"] = {"command": command}
    else:
        body["httpCheck"] = {"path": path, "port": port}
    return json.dumps(body)


def launch_body(at: int, job: str, instance: int, run: int, command: str, *,
                check: str | None = None, volume: str | None = None,
                env: dict[str, str] | None = None, grace_s: float = 0.5,
                ports: dict[str, int] | None = None) -> dict[str, Any]:
    return {"host": HOST, "incarnation": INCARNATION, "at": at, "launches": [{
        "job_id": job, "instance": instance, "run": run, "command": command,
        "env": dict(env or {}), "resources": {"cpu": 1.0, "memory": 64.0, "disk": 0.0,
                                              "gpu": 0.0},
        "ports": dict(ports or {}), "kill_grace_period_s": grace_s, "round": 1,
        "health_check_json": check, "volume": volume}]}


class Reports:
    """The statuses an agent published, each with the report's time."""

    def __init__(self) -> None:
        self.items: list[tuple[int, dict[str, Any]]] = []

    def take(self, events: list[Event]) -> None:
        for ev in events:
            if ev.type == "TaskStatusReported":
                default_codec().encode(ev.type, ev.body)  # matches the newest schema
                self.items.extend((ev.body["at"], s) for s in ev.body["statuses"])

    def of(self, rid: str) -> list[tuple[str, str]]:
        return [(s["state"], s["health"]) for _, s in self.items
                if run_id(s["job_id"], s["instance"], s["run"]) == rid]

    def last(self, rid: str) -> dict[str, Any]:
        return [s for _, s in self.items
                if run_id(s["job_id"], s["instance"], s["run"]) == rid][-1]

    def at(self, rid: str, state: str, health: str) -> int:
        return next(at for at, s in self.items
                    if run_id(s["job_id"], s["instance"], s["run"]) == rid
                    and (s["state"], s["health"]) == (state, health))


# ---------------------------------------------------------------- real processes

class RealAgent:
    def __init__(self, root: Path) -> None:
        self.core = AgentCore(AgentConfig(
            host=HOST, incarnation=INCARNATION, capacity=Resources(8.0, 8192.0, 1e5, 0.0),
            sandbox_root=root, heartbeat_s=3600.0))
        self.reports = Reports()

    def launch(self, job: str, instance: int, run: int, command: str, **kw: Any) -> str:
        now = int(time.time() * 1000)
        self.core.handle("TaskLaunchRequested",
                         launch_body(now, job, instance, run, command, **kw), now)
        return run_id(job, instance, run)

    async def until(self, done: Callable[[], bool], timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.reports.take(self.core.tick(int(time.time() * 1000)))
            if done():
                return
            await asyncio.sleep(TICK_MS / 1000)
        raise AssertionError(f"timed out; reports: {self.reports.items}")

    def ended(self, rid: str) -> bool:
        return any(state in ("SUCCEEDED", "FAILED", "KILLED")
                   for state, _ in self.reports.of(rid))


@pytest.fixture
async def agent(open_tmp: Path) -> Any:
    a = RealAgent(open_tmp)
    try:
        yield a
    finally:
        await a.core.runner.close(0.5)  # type: ignore[call-arg]


async def test_a_passing_command_check_reports_pending_then_healthy(agent: RealAgent) -> None:
    """The check runs in the task's sandbox with its environment."""
    check = health_check(command='test -f ready && test "$ROLE" = web')
    rid = agent.launch("svc", 0, 1, "touch ready && sleep 30", check=check,
                       env={"ROLE": "web"})
    await agent.until(lambda: ("RUNNING", "HEALTHY") in agent.reports.of(rid))
    assert agent.reports.of(rid) == [("STARTING", ""), ("RUNNING", "PENDING"),
                                     ("RUNNING", "HEALTHY")]
    assert agent.reports.last(rid)["message"] == "health check passed"
    assert agent.reports.last(rid)["sandbox"].endswith(rid)
    kill = {"host": HOST, "at": int(time.time() * 1000),
            "kills": [{"job_id": "svc", "instance": 0, "run": 1, "grace_period_s": 0.5}]}
    agent.core.handle("TaskKillRequested", kill, int(time.time() * 1000))
    await agent.until(lambda: agent.ended(rid))
    assert agent.reports.of(rid)[-1] == ("KILLED", "HEALTHY")


async def test_a_failing_check_makes_it_unhealthy_kills_it_and_fails_the_run(
        agent: RealAgent) -> None:
    check = health_check(command="echo not ready >&2; exit 3", failures=2)
    rid = agent.launch("svc", 1, 1, "echo $$ > pid; exec sleep 30", check=check)
    await agent.until(lambda: agent.ended(rid))
    assert agent.reports.of(rid) == [("STARTING", ""), ("RUNNING", "PENDING"),
                                     ("RUNNING", "UNHEALTHY"), ("FAILED", "UNHEALTHY")]
    final = agent.reports.last(rid)
    assert final["message"] == "health check failed: 2 checks in a row (exit code 3: not ready)"
    unhealthy_at = agent.reports.at(rid, "RUNNING", "UNHEALTHY")
    assert unhealthy_at - agent.reports.at(rid, "RUNNING", "PENDING") >= 1_000  # intervalSecs
    runner: Any = agent.core.runner
    pid = int((runner.sandboxes.path_for(rid) / "pid").read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


async def test_an_unhealthy_task_that_ignores_sigterm_is_killed_after_its_grace_period(
        agent: RealAgent) -> None:
    check = health_check(command="exit 1", failures=1)
    rid = agent.launch("svc", 2, 1, "trap '' TERM; exec sleep 30", check=check, grace_s=0.4)
    await agent.until(lambda: agent.ended(rid))
    waited = (agent.reports.at(rid, "FAILED", "UNHEALTHY")
              - agent.reports.at(rid, "RUNNING", "UNHEALTHY"))
    assert waited >= 400 - TICK_MS
    assert agent.reports.last(rid)["message"] == (
        "health check failed: 1 checks in a row (exit code 1)")


async def test_a_check_slower_than_its_timeout_fails(agent: RealAgent) -> None:
    check = health_check(command="sleep 5", failures=1, timeout=1)
    rid = agent.launch("svc", 3, 1, "sleep 30", check=check)
    started = time.monotonic()
    await agent.until(lambda: agent.ended(rid))
    assert time.monotonic() - started < 3  # the check was cut at timeoutSecs
    assert agent.reports.last(rid)["message"] == (
        "health check failed: 1 checks in a row (timed out after 1s)")


async def test_an_http_check_against_a_real_server_becomes_healthy(agent: RealAgent) -> None:
    """The check names the run's declared port; the launch's ports map resolves it."""
    port = free_port()
    command = f'exec {TASK_PYTHON} -m http.server "$PORT_HTTP" --bind 127.0.0.1'
    check = health_check("HTTP", port="http", path="/", failures=5)
    rid = agent.launch("web", 0, 1, command, check=check, env={"PORT_HTTP": str(port)},
                       ports={"http": port})
    await agent.until(lambda: ("RUNNING", "HEALTHY") in agent.reports.of(rid))
    assert ("RUNNING", "UNHEALTHY") not in agent.reports.of(rid)


async def test_an_http_check_of_a_port_nobody_serves_fails(agent: RealAgent) -> None:
    port = free_port()
    check = health_check("HTTP", port=port, path="/health", failures=1)
    rid = agent.launch("web", 1, 1, "sleep 30", check=check)
    await agent.until(lambda: agent.ended(rid))
    message = agent.reports.last(rid)["message"]
    assert message.startswith(f"health check failed: 1 checks in a row (GET /health on port {port}")


async def test_a_volume_outlives_its_runs_on_the_host(agent: RealAgent, open_tmp: Path) -> None:
    write = 'test "$PELOTON_VOLUME_PATH" = /data && echo one >> "$PELOTON_VOLUME/log"'
    first = agent.launch("db", 2, 1, write, volume="/data")
    await agent.until(lambda: agent.ended(first))
    assert agent.reports.of(first)[-1] == ("SUCCEEDED", "")
    read = 'echo two >> "$PELOTON_VOLUME/log"; cat "$PELOTON_VOLUME/log"'
    second = agent.launch("db", 2, 2, read, volume="/data")
    await agent.until(lambda: agent.ended(second))
    assert agent.core.runner.read_log(second, "stdout") == b"one\ntwo\n"
    volume = open_tmp / HOST / "volumes" / "db" / "2"
    assert (volume / "log").read_text() == "one\ntwo\n"
    other = agent.launch("db", 3, 1, 'ls "$PELOTON_VOLUME"', volume="/data")  # its own
    await agent.until(lambda: agent.ended(other))
    assert agent.core.runner.read_log(other, "stdout") == b""
    no_volume = agent.launch("db", 4, 1, 'echo "[$PELOTON_VOLUME]"')
    await agent.until(lambda: agent.ended(no_volume))
    assert agent.core.runner.read_log(no_volume, "stdout") == b"[]\n"


# ---------------------------------------------------------------- simulated runner

class SimAgent:
    def __init__(self) -> None:
        self.now = T0
        self.loop = VirtualClockLoop(T0)
        self.core = AgentCore(AgentConfig(
            host=HOST, incarnation=INCARNATION, capacity=Resources(8.0, 8192.0, 1e5, 0.0),
            simulated=True, heartbeat_s=3600.0))
        self.reports = Reports()

    def call(self, fn: Callable[[AgentCore], list[Event]], publish: bool = True) -> None:
        async def go() -> list[Event]:
            out = fn(self.core)
            await settle()
            return out

        out = self.loop.run_until_complete(go())
        if publish:
            self.reports.take(out)
        else:
            self.core.discard_unpublished()

    def launch(self, instance: int, health: str, duration_s: float = 30.0) -> str:
        body = launch_body(self.now, "sim", instance, 1, "serve", check=health_check(
            initial=1, interval=1, failures=2), env={"PELOTON_SIM_HEALTH": health,
                                                     "PELOTON_SIM_DURATION": str(duration_s)})
        self.call(lambda c: c.handle("TaskLaunchRequested", body, self.now))
        return run_id("sim", instance, 1)

    def advance(self, ms: int, publish: bool = True) -> None:
        end = self.now + ms
        while self.now < end:
            self.now += TICK_MS
            self.loop.set_time_ms(self.now)
            self.call(lambda c: c.tick(self.now), publish)


@pytest.fixture
def sim() -> Iterator[SimAgent]:
    s = SimAgent()
    yield s
    s.loop.run_until_complete(s.core.runner.close())
    s.loop.close()


def test_simulated_checks_that_pass_make_the_run_healthy_on_time(sim: SimAgent) -> None:
    rid = sim.launch(0, "pass")
    sim.advance(3_000)
    assert sim.reports.of(rid) == [("STARTING", ""), ("RUNNING", "PENDING"),
                                   ("RUNNING", "HEALTHY")]
    # the first check is due initialIntervalSecs after the first tick that saw it running
    assert sim.reports.at(rid, "RUNNING", "HEALTHY") - T0 == 1_000 + 2 * TICK_MS


def test_simulated_checks_that_fail_end_the_run_failed(sim: SimAgent) -> None:
    rid = sim.launch(1, "fail")
    sim.advance(1_900)
    assert sim.reports.of(rid)[-1] == ("RUNNING", "PENDING")  # one failure of two so far
    sim.advance(500)
    assert sim.reports.of(rid) == [("STARTING", ""), ("RUNNING", "PENDING"),
                                   ("RUNNING", "UNHEALTHY"), ("FAILED", "UNHEALTHY")]
    assert sim.reports.last(rid)["message"] == (
        "health check failed: 2 checks in a row (simulated failure)")
    assert sim.core.runner.running() == [] and len(sim.core.health) == 0


def test_a_health_report_that_did_not_reach_the_log_is_sent_again(sim: SimAgent) -> None:
    rid = sim.launch(2, "pass")
    sim.advance(1_000)
    sim.advance(500, publish=False)  # the HEALTHY report fails to publish, more than once
    assert ("RUNNING", "HEALTHY") not in sim.reports.of(rid)
    sim.advance(TICK_MS)
    assert sim.reports.of(rid).count(("RUNNING", "HEALTHY")) == 1


def test_a_bad_sim_health_value_or_check_is_a_failed_launch(sim: SimAgent) -> None:
    rid = sim.launch(3, "maybe")
    body = launch_body(sim.now, "sim", 4, 1, "serve", check='{"type": "PING"}')
    sim.call(lambda c: c.handle("TaskLaunchRequested", body, sim.now))
    sim.advance(TICK_MS)
    assert sim.reports.of(rid) == [("FAILED", "")]
    assert sim.reports.last(rid)["message"].startswith("invalid simulation parameters")
    assert sim.reports.of("sim-4-1") == [("FAILED", "")]
    assert sim.reports.last("sim-4-1")["message"] == (
        "launch refused: invalid health check: healthCheck.type: must be COMMAND or HTTP")
