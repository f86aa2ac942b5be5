"""Health checks: the job file's `healthCheck` block and a pure per-run tracker.

Job file (Peloton v0 field names; defaults are Peloton's)::

    healthCheck:
      type: COMMAND | HTTP
      commandCheck: {command: "curl -f localhost:8080/health"}   # COMMAND (or `command:`)
      httpCheck: {path: /health, port: 8080}                       # HTTP (or `httpGet:`)
      #   port may name a declared port instead (`ports: [{name: http}]` -> port: http)
      initialIntervalSecs: 15     # delay before the first check
      intervalSecs: 10            # between checks
      maxConsecutiveFailures: 3   # unhealthy after this many failed checks in a row
      timeoutSecs: 20             # a check slower than this failed

`HealthCheck.from_body` validates and raises `HealthCheckError` (a ValueError) whose text
is ``field: reason``, the field spelled as a path (``healthCheck.intervalSecs``).

Tracker contract (`HealthTracker`, a frozen value; the agent runs the checks, the job
manager folds the reports; both may use it):
- A run starts `PENDING`: it is RUNNING but not yet healthy. It becomes `HEALTHY` only on
  its first passing check, and is healthy again after any later passing check.
- A failing check (a non-zero result, or one slower than ``timeoutSecs``) adds one to the
  streak of consecutive failures; the run is `UNHEALTHY` when the streak reaches
  ``maxConsecutiveFailures``, and the caller then kills and restarts it (with backoff).
  Failures before the first pass count too (Peloton maps initialIntervalSecs to a delay,
  not a grace period), so a run that never comes up is restarted.
- The first check is due ``initialIntervalSecs`` after the run started, each next one
  ``intervalSecs`` after the previous result. A run with no health check is healthy as
  soon as it runs (`initial_state(None)`).
- Pure: time comes in as ms; same inputs, same outputs.

Examples (maxConsecutiveFailures 3):

    ==========================  ==========
    results so far              state
    ==========================  ==========
    (none)                      PENDING
    fail                        PENDING
    fail fail fail              UNHEALTHY
    pass                        HEALTHY
    pass fail fail              HEALTHY
    pass fail fail fail         UNHEALTHY
    pass fail fail pass         HEALTHY
    ==========================  ==========
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

__all__ = [
    "HealthCheckType", "HealthCheck", "HealthCheckError", "HealthState", "HealthTracker",
    "initial_state",
]


class HealthCheckError(ValueError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class HealthCheckType(StrEnum):
    COMMAND = "COMMAND"
    HTTP = "HTTP"


class HealthState(StrEnum):
    PENDING = "PENDING"        # running, no check passed yet
    HEALTHY = "HEALTHY"
    UNHEALTHY = "UNHEALTHY"    # maxConsecutiveFailures failed checks in a row


_INTS = {  # field -> (default, minimum)
    "initialIntervalSecs": (15, 0),
    "intervalSecs": (10, 1),
    "maxConsecutiveFailures": (3, 1),
    "timeoutSecs": (20, 1),
}


@dataclass(frozen=True, slots=True)
class HealthCheck:
    type: HealthCheckType
    command: str = ""
    http_path: str = ""
    http_port: int = 0
    http_port_name: str = ""
    """A declared port's name (`ports: [{name: http}]`): the agent checks the port the
    run was given; `http_port` is 0 then."""
    initial_interval_secs: int = 15
    interval_secs: int = 10
    max_consecutive_failures: int = 3
    timeout_secs: int = 20

    @classmethod
    def from_body(cls, body: Any, path: str = "healthCheck") -> HealthCheck:
        if not isinstance(body, Mapping):
            raise HealthCheckError(path, "must be a mapping")
        raw_type = body.get("type", "")
        try:
            kind = HealthCheckType(str(raw_type).upper())
        except ValueError:
            raise HealthCheckError(f"{path}.type", "must be COMMAND or HTTP") from None
        ints = {name: _int(body, name, default, low, path)
                for name, (default, low) in _INTS.items()}
        command, http_path, port, port_name = "", "", 0, ""
        if kind is HealthCheckType.COMMAND:
            command = _command(body, path)
        else:
            http_path, port, port_name = _http(body, path)
        return cls(kind, command, http_path, port, port_name, ints["initialIntervalSecs"],
                   ints["intervalSecs"], ints["maxConsecutiveFailures"], ints["timeoutSecs"])

    def to_body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type.value}
        if self.type is HealthCheckType.COMMAND:
            out["commandCheck"] = {"command": self.command}
        else:
            out["httpCheck"] = {"path": self.http_path,
                                "port": self.http_port_name or self.http_port}
        out.update({"initialIntervalSecs": self.initial_interval_secs,
                    "intervalSecs": self.interval_secs,
                    "maxConsecutiveFailures": self.max_consecutive_failures,
                    "timeoutSecs": self.timeout_secs})
        return out


def _int(body: Mapping[str, Any], name: str, default: int, low: int, path: str) -> int:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise HealthCheckError(f"{path}.{name}", "must be an integer")
    if value < low:
        raise HealthCheckError(f"{path}.{name}", f"must be >= {low}")
    return value


def _command(body: Mapping[str, Any], path: str) -> str:
    block = body.get("commandCheck")
    command = block.get("command") if isinstance(block, Mapping) else body.get("command")
    if not isinstance(command, str) or not command.strip():
        raise HealthCheckError(f"{path}.commandCheck.command",
                               "a COMMAND check needs a non-empty command")
    return command


def _http(body: Mapping[str, Any], path: str) -> tuple[str, int, str]:
    key = "httpGet" if "httpGet" in body and "httpCheck" not in body else "httpCheck"
    block = body.get(key)
    if not isinstance(block, Mapping):
        raise HealthCheckError(f"{path}.{key}", "an HTTP check needs {path, port}")
    http_path = block.get("path", "/")
    port = block.get("port")
    if not isinstance(http_path, str) or not http_path.startswith("/"):
        raise HealthCheckError(f"{path}.{key}.path", "must start with /")
    if isinstance(port, str) and port.strip():
        return http_path, 0, port.strip()  # a declared port's name
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise HealthCheckError(f"{path}.{key}.port",
                               "must be a port number 1-65535 or a declared port's name")
    return http_path, port, ""


def initial_state(check: HealthCheck | None) -> HealthState:
    """A run without a health check is healthy once it runs; with one, it waits."""
    return HealthState.HEALTHY if check is None else HealthState.PENDING


@dataclass(frozen=True, slots=True)
class HealthTracker:
    """Health of one run: its state, failure streak and when the next check is due."""

    state: HealthState
    consecutive_failures: int
    next_check_ms: int

    @classmethod
    def start(cls, check: HealthCheck, started_ms: int) -> HealthTracker:
        return cls(HealthState.PENDING, 0, started_ms + check.initial_interval_secs * 1000)

    def due(self, now_ms: int) -> bool:
        return now_ms >= self.next_check_ms

    def record(self, check: HealthCheck, passed: bool, elapsed_ms: int,
               now_ms: int) -> HealthTracker:
        """Fold one check result that arrived at ``now_ms`` after running ``elapsed_ms``."""
        next_ms = now_ms + check.interval_secs * 1000
        if passed and elapsed_ms <= check.timeout_secs * 1000:
            return HealthTracker(HealthState.HEALTHY, 0, next_ms)
        streak = self.consecutive_failures + 1
        if streak >= check.max_consecutive_failures:
            state = HealthState.UNHEALTHY
        else:
            state = self.state
        return replace(self, state=state, consecutive_failures=streak, next_check_ms=next_ms)

    @property
    def healthy(self) -> bool:
        return self.state is HealthState.HEALTHY
