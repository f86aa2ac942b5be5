"""The health checks of one agent's runs: when each is due, what its results mean (pure).

The agent shell runs the checks (`peloton.agent.probes`, or the simulated runner's rule)
and owns the clock; this book decides everything else, on `model.health.HealthTracker`:

- `watch(rid, check, ports, grace_s)` at launch, for a run whose task has a health check.
  Runs never watched have no health: every report of theirs says "" (as before checks
  existed).
- `running(rid)` when the runner reports RUNNING: the run's health is PENDING from then on
  (that report carries it). Its tracker starts at the next `due(now)`, so the first check
  is due `initialIntervalSecs` after that `now`.
- `due(now)` returns the `Probe`s to run now, each run at most one at a time (a slow check
  delays the next one, never overlaps it). The check after a result is due `intervalSecs`
  after that result's time.
- `record(rid, passed, elapsed_ms, error, at_ms)` folds one result (ignored for a run
  that ended or has no probe in flight). It returns a `HealthChange` when the run's health
  changed: to HEALTHY on a passing check after PENDING (the first pass), to UNHEALTHY when
  `maxConsecutiveFailures` checks failed in a row. An UNHEALTHY run is to be stopped by the
  caller (`HealthChange.fail`, with the run's kill grace period) and ends FAILED with
  `HealthChange.message`, "health check failed: <n> checks in a row (<last error>)"; the
  book runs no more checks for it.
- `ended(rid)` when a terminal status is seen: returns the health that status carries
  (the run's last health; "" if it never ran) and forgets the run.

Bounded: one entry per live watched run plus at most one heap item per probe scheduled.
Deterministic: same calls, same answers (ties in due time go in watch order).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass

from peloton.model.health import HealthCheck, HealthCheckType, HealthState, HealthTracker

__all__ = ["HealthBook", "Probe", "HealthChange", "failure_message", "resolve_port"]


@dataclass(frozen=True, slots=True)
class Probe:
    """One check to run now, for run `rid`, against `port` (HTTP checks) at `at_ms`."""

    rid: str
    check: HealthCheck
    port: int
    at_ms: int


@dataclass(frozen=True, slots=True)
class HealthChange:
    rid: str
    health: HealthState
    message: str
    fail: bool  # stop the run: it ends FAILED with `message`
    grace_s: float
    sandbox: str  # the run's sandbox, as its RUNNING report said


@dataclass(slots=True)
class _Entry:
    check: HealthCheck
    port: int
    grace_s: float
    seq: int
    running: bool = False
    tracker: HealthTracker | None = None
    in_flight: bool = False
    failing: bool = False
    sandbox: str = ""

    @property
    def health(self) -> str:
        if self.tracker is not None:
            return self.tracker.state.value
        return HealthState.PENDING.value if self.running else ""


def failure_message(failures: int, error: str) -> str:
    return f"health check failed: {failures} checks in a row ({error})"


def resolve_port(check: HealthCheck, ports: Mapping[str, int]) -> int:
    """The port an HTTP check connects to: a check naming a declared port
    (`http_port_name`) gets the port the launch's `ports` map gave the run under that
    name (a numeric name is taken as a number); a numeric port is used as it is; 0 when
    the name is not one of the run's ports (every check then fails, saying so)."""
    name = check.http_port_name
    if not name:
        return check.http_port
    if name in ports:
        return int(ports[name])
    return int(name) if name.isdigit() else 0


class HealthBook:
    """Health of the watched runs of one agent (see the module doc)."""

    def __init__(self) -> None:
        self._runs: dict[str, _Entry] = {}
        self._starting: list[str] = []  # RUNNING seen, tracker not started yet
        self._heap: list[tuple[int, int, str]] = []  # (due ms, watch seq, rid)
        self._seq = 0

    def watch(self, rid: str, check: HealthCheck, ports: Mapping[str, int],
              grace_s: float) -> None:
        if rid in self._runs:
            return
        self._seq += 1
        port = resolve_port(check, ports) if check.type is HealthCheckType.HTTP else 0
        self._runs[rid] = _Entry(check, port, grace_s, self._seq)

    def health(self, rid: str) -> str:
        entry = self._runs.get(rid)
        return "" if entry is None else entry.health

    def running(self, rid: str, sandbox: str = "") -> str:
        """The run was reported RUNNING: its health (PENDING, or "" if not watched)."""
        entry = self._runs.get(rid)
        if entry is None:
            return ""
        if not entry.running:
            entry.running = True
            entry.sandbox = sandbox
            self._starting.append(rid)
        return entry.health

    def ended(self, rid: str) -> str:
        entry = self._runs.pop(rid, None)
        return "" if entry is None else entry.health

    def due(self, now_ms: int) -> list[Probe]:
        for rid in self._starting:
            entry = self._runs.get(rid)
            if entry is not None and entry.tracker is None:
                entry.tracker = HealthTracker.start(entry.check, now_ms)
                heapq.heappush(self._heap, (entry.tracker.next_check_ms, entry.seq, rid))
        self._starting.clear()
        probes: list[Probe] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            due_ms, _, rid = heapq.heappop(heap)
            entry = self._runs.get(rid)
            if (entry is None or entry.tracker is None or entry.in_flight or entry.failing
                    or entry.tracker.next_check_ms != due_ms):
                continue  # ended, or a stale item
            entry.in_flight = True
            probes.append(Probe(rid, entry.check, entry.port, now_ms))
        return probes

    def record(self, rid: str, passed: bool, elapsed_ms: int, error: str,
               at_ms: int) -> HealthChange | None:
        entry = self._runs.get(rid)
        if entry is None or not entry.in_flight or entry.tracker is None:
            return None
        entry.in_flight = False
        before = entry.tracker.state
        tracker = entry.tracker.record(entry.check, passed, elapsed_ms, at_ms)
        entry.tracker = tracker
        if tracker.state is HealthState.UNHEALTHY:
            entry.failing = True
            if not error:  # it passed, too slowly
                error = f"took {elapsed_ms} ms, over timeoutSecs {entry.check.timeout_secs}"
            message = failure_message(tracker.consecutive_failures, error)
            return HealthChange(rid, tracker.state, message, True, entry.grace_s,
                                entry.sandbox)
        heapq.heappush(self._heap, (tracker.next_check_ms, entry.seq, rid))
        if tracker.state is not before:
            return HealthChange(rid, tracker.state, "health check passed", False,
                                entry.grace_s, entry.sandbox)
        return None

    def __len__(self) -> int:
        return len(self._runs)

    def __contains__(self, rid: object) -> bool:
        return rid in self._runs
