"""A service process stops within its deadline (`peloton.bus.stopdeadline`): the deadline
itself, then a real `peloton serve placement` against a real dev broker, stopped with the
broker up (a clean stop, well before the deadline) and with it gone (the deadline ends it,
with a log line and exit code 3; without one it waited more than a minute)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from peloton.bus import stopdeadline
from peloton.bus.stopdeadline import EXIT_CODE, Deadline
from peloton.minicluster.servers import free_port, start_tansu


def test_the_deadline_ends_the_process_once_with_its_code() -> None:
    codes: list[int] = []
    fired = threading.Event()
    deadline = Deadline(0.05, "svc", exit_=lambda code: (codes.append(code), fired.set()))
    assert not deadline.armed
    deadline.arm("signal SIGTERM")
    deadline.arm("signal SIGTERM")  # a second signal does not start another timer
    assert deadline.armed and fired.wait(5)
    time.sleep(0.1)
    assert codes == [EXIT_CODE]


def test_a_zero_deadline_never_fires() -> None:
    deadline = Deadline(0, "svc", exit_=lambda code: pytest.fail("it fired"))
    deadline.arm("signal SIGTERM")
    assert not deadline.armed


def test_a_negative_stop_timeout_is_refused() -> None:
    before = stopdeadline.stop_timeout()
    with pytest.raises(ValueError, match="cannot be negative"):
        stopdeadline.configure(-1)
    assert stopdeadline.stop_timeout() == before


def _serve_placement(bootstrap: str, tmp_path: Path, stop_timeout: float
                     ) -> tuple[subprocess.Popen[bytes], Path]:
    """`peloton serve placement` on `bootstrap`, once it consumes (its ready file)."""
    ready, log = tmp_path / "ready" / "placement", tmp_path / "placement.log"
    ready.parent.mkdir()
    env = dict(os.environ, PELOTON_READY_FILE=str(ready), PYTHONUNBUFFERED="1",
               PELOTON_STOP_TIMEOUT_S=str(stop_timeout))
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "peloton.serve", "placement", "--bootstrap", bootstrap,
             "--no-snapshots"], stdout=out, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 90
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"placement did not start consuming:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
    return proc, log


def _armed_at(text: str) -> float:
    """When the deadline was armed: the wall time of the log line that says so (logged
    just before its timer starts; its milliseconds are cut, so never later than that)."""
    line = next(ln for ln in text.splitlines() if "at the latest" in ln)
    stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp()


def _stop(proc: subprocess.Popen[bytes], wait_s: float) -> tuple[int | None, float]:
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code: int | None = proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        code = None
        proc.kill()
        proc.wait()
    return code, time.monotonic() - started


@pytest.mark.integration
def test_with_its_broker_up_a_service_stops_cleanly_before_the_deadline(
        fresh_broker: str, tmp_path: Path) -> None:
    proc, log = _serve_placement(fresh_broker, tmp_path, stop_timeout=20)
    code, took = _stop(proc, wait_s=30)
    text = log.read_text()
    assert code == 0 and took < 20, (code, took, text[-3000:])
    assert "ends within 20 s at the latest" in text  # the deadline was armed ...
    assert "did not stop within" not in text  # ... and never needed


@pytest.mark.integration
def test_with_its_broker_gone_a_service_ends_at_its_deadline(tmp_path: Path) -> None:
    broker = start_tansu(free_port(), tmp_path / "tansu.log")
    try:
        proc, log = _serve_placement(broker.address, tmp_path, stop_timeout=3)
    finally:
        broker.stop()
    time.sleep(1)  # the service notices: its fetches and heartbeats fail
    sent = time.time()
    code, took = _stop(proc, wait_s=30)
    text = log.read_text()
    assert code == EXIT_CODE, (code, took, text[-3000:])
    # the deadline runs from the stop's start: SIGTERM, or before it the worker's own end
    # (with its broker gone Faust may end the run by itself: "Unable to bootstrap")
    since_armed = sent + took - _armed_at(text)
    assert 3 <= since_armed < 10, (since_armed, took)
    assert "did not stop within 3 s (is the broker reachable?)" in text
