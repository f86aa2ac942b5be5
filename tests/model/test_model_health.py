"""Health checks: the job-file block (defaults, errors) and the per-run tracker."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from peloton.model.health import (
    HealthCheck,
    HealthCheckError,
    HealthCheckType,
    HealthState,
    HealthTracker,
    initial_state,
)

PROPERTY = settings(max_examples=60, deadline=None, derandomize=True)
CHECK = HealthCheck.from_body({"type": "COMMAND", "commandCheck": {"command": "true"}})


def test_defaults_are_pelotons() -> None:
    assert (CHECK.initial_interval_secs, CHECK.interval_secs,
            CHECK.max_consecutive_failures, CHECK.timeout_secs) == (15, 10, 3, 20)


def test_http_check_and_round_trip() -> None:
    body = {"type": "HTTP", "httpCheck": {"path": "/health", "port": 8080},
            "initialIntervalSecs": 1, "intervalSecs": 2, "maxConsecutiveFailures": 4,
            "timeoutSecs": 5}
    check = HealthCheck.from_body(body)
    assert check.type is HealthCheckType.HTTP and check.http_port == 8080
    assert HealthCheck.from_body(check.to_body()) == check
    assert HealthCheck.from_body(CHECK.to_body()) == CHECK


def test_aliases_command_and_http_get() -> None:
    assert HealthCheck.from_body({"type": "command", "command": "ls"}).command == "ls"
    got = HealthCheck.from_body({"type": "HTTP", "httpGet": {"path": "/", "port": 80}})
    assert (got.http_path, got.http_port) == ("/", 80)


@pytest.mark.parametrize(("body", "message"), [
    ([], "healthCheck: must be a mapping"),
    ({"type": "GRPC"}, "healthCheck.type: must be COMMAND or HTTP"),
    ({"type": "COMMAND"}, "healthCheck.commandCheck.command: a COMMAND check needs"),
    ({"type": "COMMAND", "command": "  "}, "healthCheck.commandCheck.command:"),
    ({"type": "HTTP"}, "healthCheck.httpCheck: an HTTP check needs"),
    ({"type": "HTTP", "httpCheck": {"path": "x", "port": 1}}, "healthCheck.httpCheck.path"),
    ({"type": "HTTP", "httpCheck": {"port": 70000}}, "healthCheck.httpCheck.port"),
    ({"type": "HTTP", "httpGet": {"port": 0}}, "healthCheck.httpGet.port"),
    ({"type": "HTTP", "httpGet": "/health"}, "healthCheck.httpGet: an HTTP check needs"),
    ({"type": "COMMAND", "command": "x", "intervalSecs": 0}, "healthCheck.intervalSecs: must"),
    ({"type": "COMMAND", "command": "x", "timeoutSecs": "5"}, "healthCheck.timeoutSecs: must"),
    ({"type": "COMMAND", "command": "x", "maxConsecutiveFailures": True},
     "healthCheck.maxConsecutiveFailures: must be an integer"),
])
def test_bad_blocks_name_the_field(body: Any, message: str) -> None:
    with pytest.raises(HealthCheckError) as info:
        HealthCheck.from_body(body)
    assert str(info.value).startswith(message)
    assert isinstance(info.value, ValueError)


def _run(results: str) -> HealthTracker:
    tracker, t = HealthTracker.start(CHECK, 0), 15_000
    for r in results:
        tracker = tracker.record(CHECK, r == "p", 100, t)
        t += 10_000
    return tracker


@pytest.mark.parametrize(("results", "state"), [
    ("", HealthState.PENDING), ("f", HealthState.PENDING), ("ff", HealthState.PENDING),
    ("fff", HealthState.UNHEALTHY), ("p", HealthState.HEALTHY),
    ("pff", HealthState.HEALTHY), ("pfff", HealthState.UNHEALTHY),
    ("pffp", HealthState.HEALTHY), ("ffffp", HealthState.HEALTHY),
])
def test_tracker_table(results: str, state: HealthState) -> None:
    assert _run(results).state is state


def test_schedule_and_timeout() -> None:
    t = HealthTracker.start(CHECK, 1_000)
    assert not t.due(15_999) and t.due(16_000)
    slow = t.record(CHECK, True, 20_001, 40_000)     # passed, but too slow: a failure
    assert slow.state is HealthState.PENDING and slow.consecutive_failures == 1
    assert slow.next_check_ms == 50_000
    assert t.record(CHECK, True, 20_000, 40_000).healthy


def test_no_check_means_healthy_once_running() -> None:
    assert initial_state(None) is HealthState.HEALTHY
    assert initial_state(CHECK) is HealthState.PENDING


@PROPERTY
@given(st.lists(st.booleans(), max_size=30))
def test_healthy_only_after_a_pass_and_unhealthy_after_the_streak(results: list[bool]) -> None:
    tracker = _run("".join("p" if r else "f" for r in results))
    streak = 0
    for r in reversed(results):
        if r:
            break
        streak += 1
    assert tracker.consecutive_failures == streak
    if streak >= CHECK.max_consecutive_failures:
        assert tracker.state is HealthState.UNHEALTHY
    elif True in results:
        assert tracker.state is HealthState.HEALTHY
    else:
        assert tracker.state is HealthState.PENDING
