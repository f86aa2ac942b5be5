"""The host agent: registers its host, heartbeats, launches and kills task runs.

It runs in the common service shell (decode, dead-letter, publish). It consumes launch and
kill requests for every host and keeps those for its own host; launches must also name its
current incarnation, so a restarted agent never runs what was meant for its previous life
(whose processes died with it). Statuses from the runner are batched into one
TaskStatusReported per tick; a heartbeat (HostStatusReported) lists the runs still alive.
Log files are served over HTTP at /logs/{run_id}/{stream} on the agent's web port.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peloton.agent.errors import AgentError
from peloton.agent.runner import ProcessRunner, SimulatedRunner, TaskRunner, TaskStatus
from peloton.model.event import Event
from peloton.model.ids import parse_run_id, run_id
from peloton.model.resources import Resources

__all__ = ["AgentConfig", "AgentCore"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentConfig:
    host: str
    incarnation: str
    capacity: Resources
    labels: dict[str, str] = field(default_factory=dict)
    sandbox_root: Path = Path("/tmp/peloton-sandboxes")
    simulated: bool = False
    log_url: str = ""
    heartbeat_s: float = 1.0
    port_range: tuple[int, int] = (31000, 32000)


class AgentCore:
    inputs: tuple[str, ...] = ("task-launch-requested", "task-kill-requested")
    replay: tuple[str, ...] = ()
    tick_interval: float | None = 0.05

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self._statuses: list[TaskStatus] = []
        self.runner: TaskRunner
        if config.simulated:
            self.runner = SimulatedRunner(on_status=self._statuses.append)
        else:
            self.runner = ProcessRunner(
                config.sandbox_root / config.host, on_status=self._statuses.append
            )
        self._accepted: set[str] = set()
        self._killed: set[str] = set()
        self._extra: list[dict[str, Any]] = []
        self._last_heartbeat = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        """The agent keeps no replayed state."""

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        if body["host"] != self.config.host:
            return []
        if etype == "TaskLaunchRequested" and body["incarnation"] == self.config.incarnation:
            for launch in body["launches"]:
                rid = run_id(launch["job_id"], launch["instance"], launch["run"])
                if rid in self._accepted or rid in self._killed:
                    continue
                self._accepted.add(rid)
                self._spawn(self.runner.launch(rid, launch["command"], launch["env"]))
        elif etype == "TaskKillRequested":
            for kill in body["kills"]:
                rid = run_id(kill["job_id"], kill["instance"], kill["run"])
                self._killed.add(rid)
                if rid in self._accepted:
                    self._spawn(self.runner.kill(rid, kill["grace_period_s"]))
                else:
                    self._extra.append(_status(rid, "KILLED", None, "killed before launch"))
        return []

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("agent %s: runner call failed: %r", self.config.host, task.exception())

    def tick(self, now: int) -> list[Event]:
        events: list[Event] = []
        statuses = self._extra + [
            _status(s.run_id, s.state.value, s.exit_code, s.message, s.sandbox)
            for s in self._statuses
        ]
        self._statuses.clear()
        self._extra = []
        if statuses:
            events.append(
                Event(
                    "TaskStatusReported",
                    self.config.host,
                    {
                        "host": self.config.host,
                        "incarnation": self.config.incarnation,
                        "at": now,
                        "statuses": statuses,
                    },
                )
            )
        if now - self._last_heartbeat >= self.config.heartbeat_s * 1000:
            self._last_heartbeat = now
            events.append(
                Event(
                    "HostStatusReported",
                    self.config.host,
                    {
                        "host": self.config.host,
                        "incarnation": self.config.incarnation,
                        "at": now,
                        "running": self.runner.running(),
                    },
                )
            )
        return events

    def after_replay(self, now: int) -> list[Event]:
        c = self.config
        return [
            Event(
                "HostRegistered",
                c.host,
                {
                    "host": c.host,
                    "incarnation": c.incarnation,
                    "at": now,
                    "capacity": c.capacity.as_dict(),
                    "labels": c.labels,
                    "log_url": c.log_url,
                    "port_range_begin": c.port_range[0],
                    "port_range_end": c.port_range[1],
                    "simulated": c.simulated,
                },
            )
        ]

    def read_log(self, rid: str, stream: str, tail_bytes: int | None) -> bytes:
        if stream not in ("stdout", "stderr"):
            raise AgentError(f"unknown stream {stream!r}")
        return self.runner.read_log(rid, stream, tail_bytes)  # type: ignore[arg-type]


def _status(
    rid: str, state: str, exit_code: int | None, message: str, sandbox: str = ""
) -> dict[str, Any]:
    job_id, instance, run = parse_run_id(rid)
    return {
        "job_id": job_id,
        "instance": instance,
        "run": run,
        "state": state,
        "exit_code": exit_code,
        "message": message,
        "sandbox": sandbox,
    }
