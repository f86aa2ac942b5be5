"""Agents at scale benchmark (`peloton bench agents`): many simulated hosts in few processes.

(a) idle: a broker and `idle_hosts` simulated hosts in `idle_processes` agent processes
    (`peloton serve agent --simulated --hosts N`, heartbeat every `idle_heartbeat_s`); once
    every host's HostRegistered is on the bus, the CPU seconds the broker and the agent
    processes use over `idle_s` seconds, from /proc/<pid>/stat (utime + stime), as cores
    (goal: under 0.3 core in all for 1,000 hosts). Nothing else runs on the broker.
(b) registered and offered: a broker, one host manager (`peloton serve hostmgr`, lost-host
    timeout `timeout_factor` x the heartbeat interval) and `hosts` simulated hosts in
    `processes` agent processes (heartbeat every `heartbeat_s`); the seconds from spawning
    the agent processes until every host's HostRegistered is on the bus, and until the
    host manager's OfferReceived records listed every host available (goal: 10,000 hosts
    within 60 s). Both include the agent processes' Python start-up.
Each part starts its own broker (in memory) and stops everything it started.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from peloton.bus.faustapp import ensure_topics
from peloton.minicluster.load import wait_hosts_seen, wait_offers
from peloton.minicluster.servers import free_port, start_tansu

__all__ = ["agents_bench", "cpu_seconds", "agent_argv"]

Say = Callable[[str, float], None]
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # fields 14 and 15 of the line


def agent_argv(bootstrap: str, hosts: int, start: int, heartbeat_s: float,
               cpu: float = 64.0) -> list[str]:
    return [sys.executable, "-m", "peloton.serve", "agent", "--simulated",
            "--bootstrap", bootstrap, "--hosts", str(hosts), "--host-start", str(start),
            "--cpu", str(cpu), "--memory", "65536", "--disk", "1048576",
            "--heartbeat", str(heartbeat_s)]


def _spawn(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _fleets(bootstrap: str, hosts: int, processes: int, heartbeat_s: float,
            logs: Path) -> list[subprocess.Popen[bytes]]:
    """`processes` agent processes sharing host-1..N in contiguous blocks."""
    per = -(-hosts // processes)
    procs = []
    for p in range(processes):
        start = p * per + 1
        count = min(per, hosts - p * per)
        if count > 0:
            procs.append(_spawn(agent_argv(bootstrap, count, start, heartbeat_s),
                                logs / f"agent-fleet-{p + 1}.log"))
    return procs


async def wait_registered(bootstrap: str, hosts: set[str], timeout: float,
                          procs: list[subprocess.Popen[bytes]] | None = None) -> None:
    """Wait until host-registered holds a HostRegistered of each host."""
    def alive() -> None:
        for p in procs or ():
            if p.poll() is not None:
                raise RuntimeError(f"an agent process exited ({p.returncode})")

    await wait_hosts_seen(bootstrap, "host-registered", "HostRegistered", hosts, timeout,
                          lambda body: {body["host"]}, "registered", alive)


def idle_cpu(hosts: int, processes: int, heartbeat_s: float, idle_s: float, say: Say,
             work: Path) -> dict[str, Any]:
    broker = start_tansu(free_port(), work / "tansu-idle.log")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        asyncio.run(ensure_topics(broker.address))
        say(f"(a) starting {hosts:,} simulated hosts in {processes} process(es)", 0.0)
        procs = _fleets(broker.address, hosts, processes, heartbeat_s, work)
        names = {f"host-{i + 1}" for i in range(hosts)}
        asyncio.run(wait_registered(broker.address, names, 120.0, procs))
        say(f"(a) all registered; settling 5 s, then measuring {idle_s:.0f} s", 0.3)
        time.sleep(5.0)
        pids = [broker.pid, *(p.pid for p in procs)]
        before = [cpu_seconds(pid) for pid in pids]
        started = time.monotonic()
        time.sleep(idle_s)
        after = [cpu_seconds(pid) for pid in pids]
        wall = time.monotonic() - started
        used = [b - a for a, b in zip(before, after, strict=True)]
        return {
            "idle_hosts": hosts, "idle_agent_processes": len(procs),
            "idle_heartbeat_s": heartbeat_s, "idle_window_s": round(wall, 1),
            "idle_cpu_broker_cores": round(used[0] / wall, 3),
            "idle_cpu_agents_cores": round(sum(used[1:]) / wall, 3),
            "idle_cpu_total_cores": round(sum(used) / wall, 3),
            "idle_goal_total_under_0_3": sum(used) / wall < 0.3,
        }
    finally:
        _stop(procs)
        broker.stop()


def registered_and_offered(hosts: int, processes: int, heartbeat_s: float,
                           timeout_factor: float, say: Say, work: Path) -> dict[str, Any]:
    broker = start_tansu(free_port(), work / "tansu-offers.log")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        asyncio.run(ensure_topics(broker.address))
        say("(b) starting the host manager", 0.5)
        hostmgr = _spawn([sys.executable, "-m", "peloton.serve", "hostmgr", "--bootstrap",
                          broker.address, "--heartbeat-timeout",
                          str(heartbeat_s * timeout_factor)], work / "hostmgr.log")
        procs.append(hostmgr)
        time.sleep(3.0)  # its start-up (imports, replay of empty topics, group join)
        say(f"(b) starting {hosts:,} simulated hosts in {processes} process(es)", 0.5)
        started = time.monotonic()
        procs += _fleets(broker.address, hosts, processes, heartbeat_s, work)
        names = {f"host-{i + 1}" for i in range(hosts)}
        asyncio.run(wait_registered(broker.address, names, 120.0, procs))
        registered_s = time.monotonic() - started
        say(f"(b) {hosts:,} registered in {registered_s:.1f} s; waiting for offers", 0.8)
        asyncio.run(wait_offers(broker.address, names, 120.0))
        offered_s = time.monotonic() - started
        return {
            "hosts": hosts, "agent_processes": processes, "heartbeat_s": heartbeat_s,
            "hostmgr_heartbeat_timeout_s": heartbeat_s * timeout_factor,
            "registered_s": round(registered_s, 1), "offered_s": round(offered_s, 1),
            "offered_goal_within_60s": offered_s < 60.0,
        }
    finally:
        _stop(procs)
        broker.stop()


def agents_bench(idle_hosts: int = 1_000, idle_processes: int = 1,
                 idle_heartbeat_s: float = 1.0, idle_s: float = 20.0, hosts: int = 10_000,
                 processes: int = 2, heartbeat_s: float = 10.0, timeout_factor: float = 3.0,
                 progress: Say | None = None, run_dir: Path | None = None) -> dict[str, Any]:
    """Both parts (module doc); logs in `run_dir` (else a temporary directory)."""
    say: Say = progress or (lambda _m, _f: None)
    with tempfile.TemporaryDirectory(prefix="peloton-agents-bench-") as tmp:
        work = run_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        result = idle_cpu(idle_hosts, idle_processes, idle_heartbeat_s, idle_s, say, work)
        if hosts > 0:
            result.update(registered_and_offered(hosts, processes, heartbeat_s,
                                                 timeout_factor, say, work))
    return result
