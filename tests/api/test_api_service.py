"""The API process (`run_api`) against the real dev broker: publish, materialize, serve."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from aiokafka import AIOKafkaProducer
from api_tokens import ADMIN, headers, tokens_document

from peloton.minicluster.servers import ServerProcess, free_port, start_tansu

pytestmark = pytest.mark.integration

JOB = """\
name: smoke
instanceCount: 1
defaultConfig:
  resource: {cpuLimit: 1}
  command: {value: "true"}
"""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server: ServerProcess = start_tansu(free_port(),
                                        tmp_path_factory.mktemp("tansu") / "tansu.log")
    try:
        yield server.address
    finally:
        server.stop()


def wait_for(fn: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = fn()
        except httpx.TransportError:
            found = None
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError("timed out")


async def produce(bootstrap: str, topic: str, value: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value=value, key=b"junk")
    finally:
        await producer.stop()


def test_submit_is_published_materialized_and_served(broker: str, tmp_path: Path) -> None:
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    dsn = f"chdb://{tmp_path / 'chdb'}"
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(yaml.safe_dump(tokens_document()))
    code = ("from pathlib import Path; from peloton.api.auth import configured; "
            "from peloton.api.service import run_api; "
            f"run_api({broker!r}, {dsn!r}, {port}, "
            f"authenticator=configured(Path({str(tokens)!r})))")
    http = httpx.Client(base_url=api, headers=headers(ADMIN))
    log = (tmp_path / "api.log").open("w")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: httpx.get(f"{api}/healthz").status_code == 200)
        assert httpx.get(f"{api}/v1/jobs").status_code == 401  # no token
        r = http.post("/v1/jobs?job_id=smoke-1", content=JOB,
                      headers={"content-type": "application/yaml"})
        assert r.status_code == 202
        job = wait_for(lambda: http.get("/v1/jobs/smoke-1").status_code == 200
                       and http.get("/v1/jobs/smoke-1").json())
        assert job["state"] == "SUBMITTED" and job["name"] == "smoke"

        asyncio.run(produce(broker, "job-events", b"not avro"))
        stats = wait_for(lambda: httpx.get(f"{api}/healthz").json()["materializer"]
                         if httpx.get(f"{api}/healthz").json()["materializer"]["undecodable"]
                         else None)
        assert stats["records"] >= 2 and stats["rows"] >= 3
    finally:
        http.close()
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=20) is not None
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()
