"""`SimulatedRunner`: the `TaskRunner` interface without processes, for load tests and
simulated clusters.

A launched run reports STARTING and RUNNING at once, "runs" for `duration_of(command,
env)` seconds of event-loop time, then reports SUCCEEDED, or FAILED when
`exit_code_of(command, env)` is non-zero. kill() ends it at once as KILLED (a simulated
task always honours SIGTERM; grace_s is accepted and ignored).

Default rules (`sim_duration`, `sim_exit_code`):
- duration: env PELOTON_SIM_DURATION (seconds, float) if set; else the sum of every
  `sleep N` in the command (N a non-negative number with an optional s/m/h/d suffix, as
  GNU sleep takes it), e.g. "echo a && sleep 2 && sleep 0.5" -> 2.5; else 0.1 s.
- exit code: int(env PELOTON_SIM_EXIT_CODE), default 0.
- health: env PELOTON_SIM_HEALTH, "pass" (default) or "fail": what every health check of
  the run returns (`probe()` answers at once; when checks are due is the agent's
  business, on the same clock). fail() ends a running run as FAILED with its message.
If a rule raises ValueError (a malformed variable) the run is reported FAILED
("invalid simulation parameters: ...") and no timer is armed. A `volume` is accepted and
ignored (a simulated run writes nothing).

Scaling: all pending completions live in one heap ordered by (deadline, launch sequence)
and a single loop timer is armed for the earliest one, so ties finish in launch order and
thousands of runs cost one heap entry each, not one asyncio task each. Killed runs are
dropped from the heap lazily.
"""

from __future__ import annotations

import asyncio
import heapq
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from peloton.agent.errors import RunnerClosedError, UnknownRunError
from peloton.agent.probes import ProbeResult
from peloton.agent.sandbox import LOG_STREAMS, validate_run_id
from peloton.agent.status import (
    LogStream,
    RunState,
    StatusCallback,
    StatusFeed,
    TaskStatus,
    advance,
)
from peloton.model.health import HealthCheck
from peloton.model.resources import Resources

__all__ = ["SimulatedRunner", "sim_duration", "sim_exit_code", "sim_health",
           "DEFAULT_SIM_DURATION_S"]

DEFAULT_SIM_DURATION_S = 0.1
_SLEEP = re.compile(r"(?<![\w-])sleep\s+(\d+(?:\.\d*)?|\.\d+)([smhd]?)(?![\w.])")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
# asyncio runs a timer up to one clock resolution early (loop.time() is time.monotonic()).
_CLOCK_RESOLUTION_S = time.get_clock_info("monotonic").resolution


def sim_duration(command: str, env: Mapping[str, str]) -> float:
    """Simulated run time in seconds (rule in the module docstring)."""
    if "PELOTON_SIM_DURATION" in env:
        return float(env["PELOTON_SIM_DURATION"])
    sleeps = _SLEEP.findall(command)
    if sleeps:
        return sum(float(n) * _UNIT_S[unit] for n, unit in sleeps)
    return DEFAULT_SIM_DURATION_S


def sim_exit_code(command: str, env: Mapping[str, str]) -> int:
    """Simulated exit status: int(env PELOTON_SIM_EXIT_CODE), default 0."""
    return int(env.get("PELOTON_SIM_EXIT_CODE", "0"))


def sim_health(env: Mapping[str, str]) -> bool:
    """Whether the run's simulated health checks pass: env PELOTON_SIM_HEALTH, "pass"
    (default) or "fail"; anything else raises ValueError."""
    value = env.get("PELOTON_SIM_HEALTH", "pass")
    if value not in ("pass", "fail"):
        raise ValueError(f"PELOTON_SIM_HEALTH must be pass or fail, not {value!r}")
    return value == "pass"


@dataclass(slots=True, eq=False)
class _SimRun:
    run_id: str
    exit_code: int
    healthy: bool = True
    state: RunState | None = None


class SimulatedRunner:
    """Same surface as ProcessRunner (launch, kill, running, read_log, close, statuses)."""

    def __init__(
        self,
        duration_of: Callable[[str, Mapping[str, str]], float] = sim_duration,
        *,
        exit_code_of: Callable[[str, Mapping[str, str]], int] = sim_exit_code,
        on_status: StatusCallback | None = None,
    ) -> None:
        self._duration_of = duration_of
        self._exit_code_of = exit_code_of
        self._feed = StatusFeed(on_status)
        self._runs: dict[str, _SimRun] = {}
        self._running: dict[str, _SimRun] = {}
        self._heap: list[tuple[float, int, _SimRun]] = []
        self._seq = 0
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    @property
    def statuses(self) -> asyncio.Queue[TaskStatus]:
        if self._feed.queue is None:
            raise AttributeError("statuses is only available without an on_status callback")
        return self._feed.queue

    async def launch(self, run_id: str, command: str, env: Mapping[str, str], *,
                     volume: str | None = None, resources: Resources | None = None) -> None:
        """Start a simulated run; no-op if run_id is already known (`volume` and
        `resources` are ignored: nothing runs). Raises InvalidRunIdError,
        RunnerClosedError."""
        self.launch_now(run_id, command, env)

    def launch_now(self, run_id: str, command: str, env: Mapping[str, str]) -> None:
        """`launch` without awaiting: a simulated start waits for nothing, so the agent
        calls this directly rather than making a task per launch (a simulated fleet of
        thousands of hosts launches hundreds a second). Call it from the runner's loop."""
        validate_run_id(run_id)
        if run_id in self._runs:
            return
        if self._closed:
            raise RunnerClosedError("runner is closed")
        try:
            duration = max(0.0, float(self._duration_of(command, env)))
            exit_code = int(self._exit_code_of(command, env))
            healthy = sim_health(env)
        except ValueError as exc:
            run = self._runs[run_id] = _SimRun(run_id, -1)
            self._report(run, RunState.FAILED, None, f"invalid simulation parameters: {exc}")
            return
        run = self._runs[run_id] = _SimRun(run_id, exit_code, healthy)
        self._report(run, RunState.STARTING, None, "simulated")
        self._report(run, RunState.RUNNING, None, f"simulated for {duration:g}s")
        self._running[run_id] = run
        loop = asyncio.get_running_loop()
        deadline = loop.time() + duration
        self._seq += 1
        heapq.heappush(self._heap, (deadline, self._seq, run))
        if self._heap[0][2] is run:
            self._arm(loop)

    async def kill(self, run_id: str, grace_s: float) -> None:
        """End a running simulated run as KILLED at once; no-op otherwise."""
        run = self._running.pop(run_id, None)
        if run is not None:
            self._report(run, RunState.KILLED, None, "killed on request (simulated)")

    async def fail(self, run_id: str, grace_s: float, message: str) -> None:
        """End a running simulated run as FAILED with `message` at once; no-op otherwise."""
        run = self._running.pop(run_id, None)
        if run is not None:
            self._report(run, RunState.FAILED, None, message)

    async def probe(self, run_id: str, check: HealthCheck, port: int) -> ProbeResult:
        """One simulated health check: PELOTON_SIM_HEALTH of the run decides (at once)."""
        run = self._running.get(run_id)
        if run is None:
            return ProbeResult(False, "the run is not running")
        return ProbeResult(True) if run.healthy else ProbeResult(False, "simulated failure")

    def running(self) -> list[str]:
        return list(self._running)

    def forget(self, run_id: str) -> None:
        """Drop a finished run (launch() of it would then start it again); no-op for
        running or unknown runs."""
        if run_id not in self._running:
            self._runs.pop(run_id, None)

    def read_log(self, run_id: str, stream: LogStream, tail_bytes: int | None = None) -> bytes:
        """Simulated runs print nothing: b"" for known runs, UnknownRunError otherwise."""
        if stream not in LOG_STREAMS:
            raise ValueError(f"stream must be one of {LOG_STREAMS}, not {stream!r}")
        if run_id not in self._runs:
            raise UnknownRunError(f"unknown run {run_id!r}")
        return b""

    async def close(self, grace_s: float = 0.0) -> None:
        """Refuse new launches and kill every running run."""
        self._closed = True
        for run_id in list(self._running):
            await self.kill(run_id, grace_s)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._heap.clear()

    # ---------------------------------------------------------------- internals

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._heap:
            self._timer = loop.call_at(self._heap[0][0], self._fire, loop)

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        """End the runs whose time came; the timer is armed again for the next one even
        when a report raised (the loop logs the exception): without it every later run of
        this runner would stay RUNNING for good, since a launch arms the timer only when it
        is the first to end."""
        self._timer = None
        horizon = loop.time() + _CLOCK_RESOLUTION_S
        heap = self._heap
        try:
            while heap and heap[0][0] <= horizon:
                _, _, run = heapq.heappop(heap)
                if self._running.pop(run.run_id, None) is None:
                    continue  # killed meanwhile
                if run.exit_code == 0:
                    self._report(run, RunState.SUCCEEDED, 0, "exit code 0")
                else:
                    self._report(run, RunState.FAILED, run.exit_code,
                                 f"exit code {run.exit_code}")
        finally:
            self._arm(loop)

    def _report(self, run: _SimRun, state: RunState, exit_code: int | None, message: str) -> None:
        run.state = advance(run.state, state)
        self._feed.publish(TaskStatus(run.run_id, state, exit_code, message, ""))
