"""peloton.bus.health over real HTTP on a free port: liveness follows the watched event
loop, readiness the declared checks, /metrics parses as Prometheus text."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from peloton.bus.health import Health, HealthServer, health_server
from peloton.bus.metrics import count_published


@pytest.fixture
def served() -> Iterator[tuple[Health, str]]:
    health = Health("t-health-1", stall_after_s=0.5)
    health.require("rebuilt", "consuming")
    server = HealthServer(health, "127.0.0.1", 0)
    port = server.start()
    try:
        yield health, f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A service loop running in its own thread."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_ready_only_once_every_check_passed(served: tuple[Health, str]) -> None:
    health, url = served
    assert httpx.get(f"{url}/healthz").json() == {"service": "t-health-1", "alive": True}
    r = httpx.get(f"{url}/readyz")
    assert r.status_code == 503
    assert r.json() == {"service": "t-health-1", "ready": False, "role": "single",
                        "checks": {"rebuilt": False, "consuming": False}, "alive": True}
    health.passed("rebuilt")
    assert httpx.get(f"{url}/readyz").status_code == 503
    health.passed("consuming")
    r = httpx.get(f"{url}/readyz")
    assert r.status_code == 200 and r.json()["ready"] is True
    health.passed("consuming", False)  # stopping
    assert httpx.get(f"{url}/readyz").status_code == 503


def test_leader_and_standby_are_both_ready() -> None:
    role = ["leader"]
    health = Health("t-role", role=lambda: role[0])
    server = HealthServer(health, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.start()}"
    try:
        assert httpx.get(f"{url}/readyz").json()["role"] == "leader"
        role[0] = "standby"
        r = httpx.get(f"{url}/readyz")
        assert (r.status_code, r.json()["role"]) == (200, "standby")
    finally:
        server.stop()


def test_liveness_follows_the_watched_loop(served: tuple[Health, str],
                                           loop: asyncio.AbstractEventLoop) -> None:
    health, url = served
    health.passed("rebuilt")
    health.passed("consuming")
    health.watch(loop)
    assert httpx.get(f"{url}/healthz").status_code == 200
    # a blocking call stalls the loop; long enough that both probes (each waits the
    # loop's 0.5 s) land inside it on a loaded machine (with 1.5 s, /readyz once came
    # after the stall under the suite's second worker)
    loop.call_soon_threadsafe(time.sleep, 4.0)
    time.sleep(0.1)
    r = httpx.get(f"{url}/healthz")
    assert r.status_code == 503
    assert r.json()["reason"] == "event loop did not answer within 0.5s"
    assert httpx.get(f"{url}/readyz").status_code == 503
    time.sleep(4.0)
    assert httpx.get(f"{url}/healthz").status_code == 200


def test_a_closed_loop_is_dead(served: tuple[Health, str]) -> None:
    health, url = served
    closed = asyncio.new_event_loop()
    closed.close()
    health.watch(closed)
    r = httpx.get(f"{url}/healthz")
    assert (r.status_code, r.json()["reason"]) == (503, "event loop closed")
    health.watch(None)  # no loop watched (start-up): alive
    assert httpx.get(f"{url}/healthz").json() == {"service": "t-health-1", "alive": True}


def test_metrics_are_prometheus_text(served: tuple[Health, str]) -> None:
    _, url = served
    count_published("t-health", ["some-topic"])
    r = httpx.get(f"{url}/metrics", params={"name[]": "x'\"<>"},
                  headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    families = {f.name: f for f in text_string_to_metric_families(r.text)}
    published = families["peloton_events_published"]
    assert any(s.labels == {"service": "t-health", "topic": "some-topic"} and s.value >= 1
               for s in published.samples)
    assert "process_cpu_seconds" in families or "python_info" in families


def test_other_paths_and_methods_are_json_errors(served: tuple[Health, str]) -> None:
    _, url = served
    r = httpx.get(f"{url}/nope")
    assert (r.status_code, r.json()) == (404, {"error": "Not Found", "details": []})
    r = httpx.post(f"{url}/metrics", content=b"x" * 1000)
    assert r.status_code == 405 and r.json()["error"] == "Method Not Allowed"
    assert "GET" in r.headers["allow"]
    assert httpx.head(f"{url}/healthz").status_code == 200


def test_a_taken_port_fails_at_start_and_no_port_means_no_server() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(OSError):
            HealthServer(Health("t"), "127.0.0.1", busy.getsockname()[1]).start()
    assert health_server(Health("t"), None) is None
