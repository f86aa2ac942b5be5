"""A fleet of simulated agents in one process: many hosts for load tests on a small machine.

`AgentFleetCore` holds one `AgentCore` per host (each with its own incarnation, capacity
and `SimulatedRunner`) and routes every launch and kill request to the host it names, so
each host behaves exactly as a separate `peloton serve agent --simulated` process would:
it registers, heartbeats once a second and reports its runs' statuses in one
`TaskStatusReported` per tick, all keyed by its host name. The only difference is the
cost: one Faust consumer reads the launch and kill topics once for all its hosts, where
N agent processes would read them N times.

Run: `python -m peloton.minicluster.fleet --bootstrap HOST:PORT --hosts host-1,host-2
--cpu 64` (the burst benchmark and the soak test spawn it through `Cluster.spawn`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from peloton.agent.app import AgentConfig, AgentCore
from peloton.minicluster.cluster import Cluster
from peloton.model.event import Event
from peloton.model.resources import Resources

__all__ = ["AgentFleetCore", "fleet_argv", "start_fleets", "main"]


class AgentFleetCore:
    """Many simulated agents behind one service shell; no replayed state (like one agent)."""

    inputs: tuple[str, ...] = AgentCore.inputs
    replay: tuple[str, ...] = ()
    tick_interval: float | None = AgentCore.tick_interval
    snapshot_version: int = 1

    def __init__(self, configs: list[AgentConfig]) -> None:
        if not configs:
            raise ValueError("a fleet needs at least one host")
        self.agents = {c.host: AgentCore(c) for c in configs}

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        """Agents keep no replayed state."""

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        agent = self.agents.get(body.get("host", ""))
        return agent.handle(etype, body, now) if agent is not None else []

    def tick(self, now: int) -> list[Event]:
        return [ev for agent in self.agents.values() for ev in agent.tick(now)]

    def after_replay(self, now: int) -> list[Event]:
        return [ev for agent in self.agents.values() for ev in agent.after_replay(now)]

    def discard_unpublished(self) -> None:
        """The last call's events did not reach the log: each agent sends its again (an
        agent whose events did reach it may repeat a report; consumers dedupe those)."""
        for agent in self.agents.values():
            agent.discard_unpublished()

    def snapshot(self) -> dict[str, Any]:
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        """Nothing to restore: a restarted fleet registers new incarnations."""


def fleet_argv(bootstrap: str, name: str, hosts: list[str], cpu: float,
               memory: float = 65536.0, disk: float = float(1 << 20),
               heartbeat_s: float = 1.0) -> list[str]:
    return [sys.executable, "-m", "peloton.minicluster.fleet", "--bootstrap", bootstrap,
            "--name", name, "--hosts", ",".join(hosts), "--cpu", str(cpu),
            "--memory", str(memory), "--disk", str(disk), "--heartbeat", str(heartbeat_s)]


def start_fleets(cluster: Cluster, hosts: int, processes: int, cpu: float,
                 timeout: float = 90.0) -> tuple[list[str], list[str]]:
    """Spawn `processes` fleet processes sharing hosts host-1..N (round robin) in a running
    minicluster; wait until each consumes. Returns (process names, host names)."""
    names = [f"host-{i + 1}" for i in range(hosts)]
    procs = []
    for p in range(max(1, min(processes, hosts))):
        mine = names[p::max(1, min(processes, hosts))]
        proc = f"agent-fleet-{p + 1}"
        cluster.spawn(proc, fleet_argv(cluster.layout.bootstrap, proc, mine, cpu))
        procs.append(proc)
    cluster.wait_consuming(procs, timeout)
    return procs, names


def main(argv: list[str] | None = None) -> None:
    from peloton.bus.service import ServiceShell

    parser = argparse.ArgumentParser(prog="python -m peloton.minicluster.fleet")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--hosts", required=True, help="comma-separated host names")
    parser.add_argument("--cpu", type=float, default=64.0)
    parser.add_argument("--memory", type=float, default=65536.0)
    parser.add_argument("--disk", type=float, default=float(1 << 20))
    parser.add_argument("--heartbeat", type=float, default=1.0)
    parser.add_argument("--name", default="")
    args = parser.parse_args(argv)
    hosts = [h for h in args.hosts.split(",") if h]
    name = args.name or f"agent-fleet-{hosts[0]}"
    logging.basicConfig(level=os.environ.get("PELOTON_LOG_LEVEL", "INFO"),
                        format=f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s")
    configs = [AgentConfig(host=h, incarnation=uuid.uuid4().hex[:12],
                           capacity=Resources(args.cpu, args.memory, args.disk, 0.0),
                           labels={"zone": "abc"[i % 3]}, sandbox_root=Path("/tmp"),
                           simulated=True, heartbeat_s=args.heartbeat)
               for i, h in enumerate(hosts)]
    ServiceShell(name, "1", AgentFleetCore(configs), args.bootstrap).run()


if __name__ == "__main__":
    main()
