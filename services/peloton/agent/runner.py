"""The host agent's task runners behind one interface, `TaskRunner`.

Two interchangeable implementations:
- `ProcessRunner(sandbox_root)`: real `/bin/sh -c` processes in per-run sandboxes
  (`peloton.agent.processrunner`).
- `SimulatedRunner(duration_of)`: no processes; a run lasts a computed time on the event
  loop (`peloton.agent.simrunner`), cheap enough for tens of thousands of runs.

Both report `TaskStatus` values (STARTING -> RUNNING -> SUCCEEDED | FAILED | KILLED; a
lone FAILED when a run cannot start; a lone terminal status for a run recovered after an
agent restart; see `status.TRANSITIONS`) to an `on_status` callback, or to
`runner.statuses` (an asyncio.Queue) when no callback is given. Reports carry no
timestamps; the shell adds them. launch() is idempotent per run_id, kill() is a no-op for
unknown/finished runs. forget() drops a finished run from memory (bounded state: the agent
decides when, see `peloton.agent.domain.runbook`).

Health checks and volumes: probe() runs one health check of a running run (the agent
decides when, see `peloton.agent.domain.healthbook`); fail() stops a run as kill() does
and reports it FAILED with the agent's reason. launch(volume=...) gives a stateful
instance its persistent directory (`peloton.agent.volumes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from peloton.agent.errors import (
    AgentError,
    InvalidRunIdError,
    RunnerClosedError,
    UnknownRunError,
)
from peloton.agent.probes import ProbeResult
from peloton.agent.processrunner import ProcessRunner
from peloton.agent.simrunner import SimulatedRunner, sim_duration, sim_exit_code
from peloton.agent.status import LogStream, RunState, StatusCallback, TaskStatus
from peloton.model.health import HealthCheck
from peloton.model.resources import Resources

__all__ = [
    "TaskRunner",
    "ProcessRunner",
    "SimulatedRunner",
    "sim_duration",
    "sim_exit_code",
    "TaskStatus",
    "ProbeResult",
    "RunState",
    "LogStream",
    "StatusCallback",
    "AgentError",
    "InvalidRunIdError",
    "UnknownRunError",
    "RunnerClosedError",
]


class TaskRunner(Protocol):
    """What the agent shell needs from a runner. Use from a single event loop."""

    async def launch(self, run_id: str, command: str, env: Mapping[str, str], *,
                     volume: str | None = None, resources: Resources | None = None) -> None:
        """Start the run; no-op if run_id was already launched (running or finished).
        `volume`: the container path of the instance's persistent volume, if any;
        `resources`: the run's cpu and memory limits (enforced by ProcessRunner)."""
        ...

    async def kill(self, run_id: str, grace_s: float) -> None:
        """Stop the run (TERM, KILL after grace_s), report KILLED; no-op if not running."""
        ...

    async def fail(self, run_id: str, grace_s: float, message: str) -> None:
        """Stop the run as kill() does but report FAILED with `message`; no-op if not
        running."""
        ...

    async def probe(self, run_id: str, check: HealthCheck, port: int) -> ProbeResult:
        """One health check of a running run (never raises for a failing check)."""
        ...

    def running(self) -> list[str]:
        """run_ids not yet in a terminal state, in launch order."""
        ...

    def forget(self, run_id: str) -> None:
        """Drop a finished run from memory (a later launch() of it would start it again,
        so the caller keeps its own tombstone); no-op for running or unknown runs."""
        ...

    def read_log(self, run_id: str, stream: LogStream, tail_bytes: int | None = None) -> bytes:
        """Captured output; raises UnknownRunError for unknown runs."""
        ...

    async def close(self) -> None:
        """Kill everything and refuse further launches (agent shutdown)."""
        ...
