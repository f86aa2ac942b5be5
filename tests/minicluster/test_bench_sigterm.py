"""A benchmark stopped by SIGTERM (a `timeout`, CI, a supervisor) takes its minicluster
down with it, as Ctrl-C does (peloton.minicluster.terminate): broker, etcd, the services
and the simulated agents all end, and the process exits with 143."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from polling import wait_for

from peloton.minicluster.cluster import pid_alive
from peloton.minicluster.terminate import SIGTERM_STATUS, exit_on_sigterm

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_sigterm_in_a_benchmark_stops_its_whole_cluster(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    err = tmp_path / "bench.err"
    with open(err, "w") as err_file:
        bench = subprocess.Popen(
            [sys.executable, "-c", "from peloton.cli.main import app; app()", "bench",
             "burst", "--jobs", "3000", "--hosts", "4", "--run-dir", str(run_dir)],
            stdout=subprocess.DEVNULL, stderr=err_file)
    try:
        wait_for(lambda: "submitting" in err.read_text(), 90, what="the jobs submitted")
        procs = json.loads((run_dir / "cluster.json").read_text())["procs"]
        pids = {name: p["pid"] for name, p in procs.items()}
        assert {"broker", "etcd", "jobmgr", "agent-fleet-1"} <= set(pids)
        assert all(pid_alive(pid) for pid in pids.values())
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(timeout=60) == SIGTERM_STATUS
        wait_for(lambda: not any(pid_alive(p) for p in pids.values()), 15,
                 what=f"every process of the cluster ({', '.join(sorted(pids))}) to end")
    finally:
        if bench.poll() is None:
            bench.kill()


def test_the_handler_is_only_set_in_the_main_thread() -> None:
    import threading

    seen: list[bool] = []
    thread = threading.Thread(target=lambda: seen.append(exit_on_sigterm()))
    before = signal.getsignal(signal.SIGTERM)
    thread.start()
    thread.join()
    assert seen == [False] and signal.getsignal(signal.SIGTERM) is before
