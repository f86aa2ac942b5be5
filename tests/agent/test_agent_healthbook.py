"""The agent's health book (pure): when checks are due and what their results mean."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.agent.domain.healthbook import HealthBook, failure_message, resolve_port
from peloton.agent.probes import http_status_ok
from peloton.model.health import HealthCheck, HealthState

T0 = 1_000_000


def check(initial: int = 2, interval: int = 1, failures: int = 3, timeout: int = 1,
          kind: str = "COMMAND", port: int | str = 8080) -> HealthCheck:
    body: dict[str, object] = {"type": kind, "initialIntervalSecs": initial,
                               "intervalSecs": interval, "maxConsecutiveFailures": failures,
                               "timeoutSecs": timeout}
    if kind == "COMMAND":
        body["commandCheck"] = {"command": "true"}
    else:
        body["httpCheck"] = {"path": "/health", "port": port}
    return HealthCheck.from_body(body)


def watched(c: HealthCheck, ports: dict[str, int] | None = None) -> HealthBook:
    book = HealthBook()
    book.watch("r", c, ports or {}, 2.5)
    assert book.running("r", "/sb/r") == "PENDING"
    return book


def test_a_run_without_a_check_has_no_health_and_no_probes() -> None:
    book = HealthBook()
    assert book.running("r") == "" and book.health("r") == ""
    assert book.due(T0 + 10**9) == [] and book.ended("r") == ""


def test_the_first_check_waits_the_initial_interval_then_passes_to_healthy() -> None:
    book = HealthBook()
    book.watch("r", check(initial=2), {}, 2.5)
    assert book.health("r") == ""  # not running yet: its STARTING report has no health
    assert book.running("r", "/sb/r") == "PENDING"
    assert book.due(T0) == []  # the tracker starts at this tick
    assert book.due(T0 + 1_999) == []
    (probe,) = book.due(T0 + 2_000)
    assert (probe.rid, probe.at_ms) == ("r", T0 + 2_000)
    assert book.due(T0 + 5_000) == []  # one check at a time
    change = book.record("r", True, 30, "", T0 + 2_030)
    assert change is not None and change.health is HealthState.HEALTHY and not change.fail
    assert change.sandbox == "/sb/r" and book.health("r") == "HEALTHY"
    assert book.due(T0 + 3_029) == []
    assert len(book.due(T0 + 3_030)) == 1  # intervalSecs after the result
    assert book.record("r", True, 0, "", T0 + 3_030) is None  # still healthy: no change
    assert book.ended("r") == "HEALTHY" and "r" not in book


def test_max_consecutive_failures_make_it_unhealthy_and_stop_the_checks() -> None:
    book = watched(check(initial=0, failures=2))
    book.due(T0)
    assert book.record("r", False, 5, "exit code 1", T0 + 5) is None  # PENDING still
    book.due(T0 + 1_005)
    change = book.record("r", False, 5, "exit code 7: down", T0 + 1_010)
    assert change is not None and change.health is HealthState.UNHEALTHY and change.fail
    assert change.message == "health check failed: 2 checks in a row (exit code 7: down)"
    assert change.grace_s == 2.5
    assert book.due(T0 + 10**6) == []  # being stopped: no more checks
    assert book.ended("r") == "UNHEALTHY"


def test_a_pass_slower_than_the_timeout_is_a_failure() -> None:
    book = watched(check(initial=0, failures=1, timeout=1))
    book.due(T0)
    change = book.record("r", True, 1_500, "", T0 + 1_500)
    assert change is not None and change.health is HealthState.UNHEALTHY
    assert change.message == failure_message(1, "took 1500 ms, over timeoutSecs 1")


def test_a_result_for_a_run_that_ended_is_ignored() -> None:
    book = watched(check(initial=0))
    book.due(T0)
    assert book.ended("r") == "PENDING"
    assert book.record("r", True, 0, "", T0) is None and len(book) == 0


def test_http_ports_named_or_numeric() -> None:
    ports = {"http": 31005}
    assert resolve_port(check(kind="HTTP", port="http"), ports) == 31005
    assert resolve_port(check(kind="HTTP", port=8080), ports) == 8080
    assert resolve_port(check(kind="HTTP", port="admin"), ports) == 0  # not the run's
    book = HealthBook()
    book.watch("a", check(initial=0, kind="HTTP", port=8080), ports, 1.0)
    book.watch("b", check(initial=0, kind="HTTP", port="http"), ports, 1.0)
    book.running("a")
    book.running("b")
    assert [(p.rid, p.port) for p in book.due(T0)] == [("a", 8080), ("b", 31005)]


def test_http_status_lines() -> None:
    assert http_status_ok(b"HTTP/1.0 200 OK\r\n") == (True, "")
    assert http_status_ok(b"HTTP/1.1 302 Found\r\n") == (True, "")
    assert http_status_ok(b"HTTP/1.1 503 Service Unavailable\r\n") == (False, "HTTP 503")
    assert http_status_ok(b"")[0] is False and http_status_ok(b"SSH-2.0\r\n")[0] is False


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.integers(0, 3), st.integers(1, 3),
       st.lists(st.tuples(st.booleans(), st.integers(0, 3_000)), min_size=1, max_size=30))
def test_checks_follow_the_intervals_and_changes_follow_the_tracker_table(
        failures: int, initial: int, interval: int, results: list[tuple[bool, int]]) -> None:
    """One run, results in order: each check is due exactly initialIntervalSecs after the
    run started, then intervalSecs after the previous result; a change is reported exactly
    when the reference table's state changes; nothing is checked after UNHEALTHY."""
    c = check(initial, interval, failures, timeout=2)
    book = watched(c)
    first = book.due(T0)  # the tracker starts at this tick
    assert len(first) == (initial == 0)
    due_at, state, streak = T0 + initial * 1000, "PENDING", 0
    for passed, elapsed in results:
        if due_at > T0:
            assert book.due(due_at - 1) == []
        probes = first if due_at == T0 else book.due(due_at)
        if state == "UNHEALTHY":
            assert probes == []
            break
        assert [p.rid for p in probes] == ["r"]
        change = book.record("r", passed, elapsed, "boom", due_at + elapsed)
        ok = passed and elapsed <= 2_000
        streak = 0 if ok else streak + 1
        new = "HEALTHY" if ok else ("UNHEALTHY" if streak >= failures else state)
        assert (change.health.value if change else state) == new
        assert (change is not None) == (new != state)
        if new == "UNHEALTHY":
            assert change is not None and change.message == failure_message(streak, "boom")
        state = new
        assert book.health("r") == state
        due_at += elapsed + interval * 1000
