"""A real service process (`python -m peloton.serve hostmgr`) against the dev broker with
PELOTON_HEALTH_PORT set: /healthz answers from the start, /readyz turns 200 once it has
rebuilt and consumes, /metrics counts a published event as consumed, and with
PELOTON_LOG_FORMAT=json every log line is a JSON object."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from event_bodies import host_registered
from prometheus_client.parser import text_string_to_metric_families

from peloton.bus.codec import default_codec
from peloton.bus.publisher import Publisher
from peloton.interpreter import interpreter
from peloton.minicluster.servers import free_port
from peloton.model.event import Event

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], timeout: float = 45.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = probe()
        except httpx.HTTPError:
            got = None
        if got:
            return got
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.fixture
def hostmgr(broker: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port = free_port()
    log_path = tmp_path / "hostmgr.log"
    env = {**os.environ, "PELOTON_HEALTH_PORT": str(port),
           "PELOTON_HEALTH_BIND": "127.0.0.1", "PELOTON_LOG_FORMAT": "json",
           "PELOTON_STATE_DIR": str(tmp_path / "state")}
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "peloton.serve", "hostmgr", "--bootstrap", broker,
             "--no-snapshots"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"http://127.0.0.1:{port}", log_path
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def consumed(url: str, topic: str) -> float:
    return consumed_by(url, "hostmgr", topic)


def lag_series(url: str) -> list[dict[str, Any]]:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return [s.labels for f in text_string_to_metric_families(text)
            if f.name == "peloton_consumer_lag_records" for s in f.samples
            if s.labels.get("service") == "hostmgr"]


async def publish_one(broker: str) -> None:
    publisher = Publisher(broker, default_codec())
    try:
        await publisher.publish([Event("HostRegistered", "h-health",
                                       host_registered("h-health"))])
    finally:
        await publisher.stop()


def test_a_service_turns_ready_and_counts_what_it_consumes(
        broker: str, hostmgr: tuple[str, Path]) -> None:
    url, log_path = hostmgr
    alive = wait_for(lambda: httpx.get(f"{url}/healthz", timeout=5))
    assert alive.status_code == 200 and alive.json()["alive"] is True
    ready = wait_for(lambda: (r := httpx.get(f"{url}/readyz", timeout=5)).status_code == 200
                     and r)
    assert ready.json() == {"service": "hostmgr-1", "ready": True, "role": "single",
                            "checks": {"rebuilt": True, "consuming": True}, "alive": True}
    assert consumed(url, "host-registered") == 0.0  # the series exists before any record

    asyncio.run(publish_one(broker))
    assert wait_for(lambda: consumed(url, "host-registered") >= 1.0)
    labels = wait_for(lambda: lag_series(url), timeout=15)
    assert {lab["topic"] for lab in labels} >= {"host-registered", "job-events"}

    lines = [line for line in log_path.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"ts", "level", "logger", "message", "service"} <= set(r) for r in records)
    assert any(r["logger"].startswith("faust") for r in records)  # the worker kept it
    assert {r["service"] for r in records} == {"hostmgr-1"}
    # the service runs on uvloop (peloton.bus.eventloop), a dependency of the package
    # and names its interpreter (peloton.interpreter): this test's own, which started it
    assert any(r["message"] == f"hostmgr-1: running on the uvloop event loop, {interpreter()}"
               for r in records)


def test_the_api_process_turns_ready_and_counts_what_it_materializes(
        broker: str, tmp_path: Path) -> None:
    """/readyz of a real API process: its chdb store, its Kafka publisher, its partitions;
    /metrics: the materializer's records consumed (service "readmodel")."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    code = ("from peloton.api.service import run_api; "
            f"run_api({broker!r}, {'chdb://' + str(tmp_path / 'chdb')!r}, {port})")
    with (tmp_path / "api.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=log,
                                stderr=subprocess.STDOUT,
                                env={**os.environ, "PELOTON_STATE_DIR": str(tmp_path)})
    try:
        ready = wait_for(lambda: (r := httpx.get(f"{url}/readyz", timeout=5)).status_code
                         == 200 and r)
        assert ready.json() == {"ready": True, "checks": {"store": True, "publisher": True,
                                                          "consuming": True}}
        before = consumed_by(url, "readmodel", "host-registered")
        asyncio.run(publish_one(broker))
        assert wait_for(lambda: consumed_by(url, "readmodel", "host-registered") > before)
        assert (f"api 1: running on the uvloop event loop, {interpreter()}"
                in (tmp_path / "api.log").read_text())
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def consumed_by(url: str, service: str, topic: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return sum(s.value for f in text_string_to_metric_families(text)
               if f.name == "peloton_events_consumed" for s in f.samples
               if s.labels == {"service": service, "topic": topic})
