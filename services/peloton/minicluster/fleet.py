"""A fleet of simulated agents in one process: many hosts for load tests on a small machine.

`AgentFleetCore` holds one `AgentCore` per host (each with its own incarnation, capacity
and `SimulatedRunner`) and routes every launch, kill and registration record to the host
it names, so each host behaves exactly as a separate `peloton serve agent --simulated`
process would: it registers, heartbeats every `heartbeat_s` and reports its runs' statuses
in one `TaskStatusReported` per tick, all keyed by its host name. The only difference is
the cost: one consumer reads, for all its hosts, the partitions they hash to
(`peloton.agent.shell`, `peloton.bus.hostrouted`), and skips other hosts' records undecoded.

Heartbeats at scale: `fleet_configs` spreads the hosts' first heartbeats evenly over one
interval (`AgentConfig.heartbeat_phase_s`), so a fleet never sends every host's at once,
and `tick` visits only the agents with something due (`AgentCore.next_due`). The
heartbeats that fell due go out together every `heartbeat_batch_ms` (a tenth of the
interval, at most 1 s), each at most that late, not at every 50 ms tick: the dev broker's
fetches cost more with every batch a partition holds, and a fleet publishing heartbeats
each tick (20 requests a second, a batch per partition of host-registered) tripled an idle
10,000-host cluster's broker CPU within two minutes (0.35 -> 0.95 core; with 1 s batches
it stays at 0.22). The host manager's lost-host timeout must
stay a few intervals long (`peloton serve hostmgr --heartbeat-timeout`, 3 x the interval
or more): 10,000 hosts at the default 1 s send 10,000 records a second; at 10 s, 1,000.

Run: `peloton serve agent --simulated --hosts 1000 [--host-prefix host- --host-start 1]`,
or `python -m peloton.minicluster.fleet --bootstrap HOST:PORT --hosts host-1,host-2 --cpu
64` (the burst benchmark and the soak test spawn it through `Cluster.spawn`).
"""

from __future__ import annotations

import argparse
import heapq
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

__all__ = ["AgentFleetCore", "fleet_configs", "heartbeat_batch_ms", "host_names", "fleet_argv",
           "start_fleets", "main"]


class AgentFleetCore:
    """Many simulated agents behind one service shell; no replayed state (like one agent)."""

    inputs: tuple[str, ...] = AgentCore.inputs
    replay: tuple[str, ...] = ()
    tick_interval: float | None = AgentCore.tick_interval
    snapshot_version: int = 1

    def __init__(self, configs: list[AgentConfig]) -> None:
        if not configs:
            raise ValueError("a fleet needs at least one host")
        hosts = [c.host for c in configs]
        if len(set(hosts)) != len(hosts):
            twice = sorted({h for h in hosts if hosts.count(h) > 1})
            raise ValueError(f"a fleet serves each host once; given twice: {twice[:5]}")
        self.agents = {c.host: AgentCore(c) for c in configs}
        # which agents a tick visits (module doc): those not quiet, and those whose
        # heartbeat is due (one entry per agent in the heap, re-pushed when popped)
        self._active: set[str] = set(self.agents)
        self._heartbeats: list[tuple[int, str]] = []
        self.heartbeat_batch_ms = heartbeat_batch_ms(configs)
        self._next_batch_ms = 0  # heartbeats due are sent at the first tick from then
        self._schedule()

    def _schedule(self) -> None:
        """One heap entry per agent: its next heartbeat."""
        self._heartbeats = sorted((a.next_heartbeat_ms(), h) for h, a in self.agents.items())

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        """Agents keep no replayed state."""

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        host = body.get("host", "")
        agent = self.agents.get(host)
        if agent is None:
            return []
        self._active.add(host)
        return agent.handle(etype, body, now)

    def tick(self, now: int) -> list[Event]:
        popped = []
        if now >= self._next_batch_ms:  # heartbeats go out together (module doc)
            self._next_batch_ms = now + self.heartbeat_batch_ms
            while self._heartbeats and self._heartbeats[0][0] <= now:
                popped.append(heapq.heappop(self._heartbeats)[1])
        due = self._active.union(popped)
        events: list[Event] = []
        for host in sorted(due):
            events += self.agents[host].tick(now)
        for host in popped:  # an entry ticked early (a heartbeat sent meanwhile) moves on
            heapq.heappush(self._heartbeats, (self.agents[host].next_heartbeat_ms(), host))
        self._active = {h for h in due if not self.agents[h].quiet()}
        return events

    def after_replay(self, now: int) -> list[Event]:
        self._active = set(self.agents)
        events = [ev for agent in self.agents.values() for ev in agent.after_replay(now)]
        self._schedule()
        return events

    def discard_unpublished(self) -> None:
        """The last call's events did not reach the log: each agent sends its again (an
        agent whose events did reach it may repeat a report; consumers dedupe those)."""
        for agent in self.agents.values():
            agent.discard_unpublished()
        self._active = set(self.agents)
        self._schedule()  # a discarded heartbeat is due again sooner

    def snapshot(self) -> dict[str, Any]:
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        """Nothing to restore: a restarted fleet registers new incarnations."""


def heartbeat_batch_ms(configs: list[AgentConfig]) -> int:
    """How often a fleet sends the heartbeats that fell due (module doc): a tenth of the
    shortest heartbeat interval, at most a second, at least one tick."""
    shortest = min(c.heartbeat_s for c in configs)
    tick_ms = round((AgentCore.tick_interval or 0.05) * 1000)
    return max(tick_ms, min(1000, round(shortest * 100)))


def host_names(count: int, prefix: str = "host-", start: int = 1) -> list[str]:
    """`prefix` + start .. start + count - 1 (host-1, host-2, ...)."""
    return [f"{prefix}{start + i}" for i in range(count)]


def fleet_configs(hosts: list[str], capacity: Resources, labels: dict[str, str] | None = None,
                  heartbeat_s: float = 1.0, zones: str = "") -> list[AgentConfig]:
    """Simulated agents for `hosts`: new incarnations, heartbeats spread over one interval
    (module doc); `zones`: a label zone=<letter> in turn ("abc": a, b, c, a, ...)."""
    n = len(hosts)
    return [AgentConfig(host=h, incarnation=uuid.uuid4().hex[:12], capacity=capacity,
                        labels={**(labels or {}),
                                **({"zone": zones[i % len(zones)]} if zones else {})},
                        sandbox_root=Path("/tmp"), simulated=True, heartbeat_s=heartbeat_s,
                        heartbeat_phase_s=heartbeat_s * i / n)
            for i, h in enumerate(hosts)]


def fleet_argv(bootstrap: str, name: str, hosts: list[str], cpu: float,
               memory: float = 65536.0, disk: float = float(1 << 20),
               heartbeat_s: float = 1.0) -> list[str]:
    return [sys.executable, "-m", "peloton.minicluster.fleet", "--bootstrap", bootstrap,
            "--name", name, "--hosts", ",".join(hosts), "--cpu", str(cpu),
            "--memory", str(memory), "--disk", str(disk), "--heartbeat", str(heartbeat_s)]


def start_fleets(cluster: Cluster, hosts: int, processes: int, cpu: float,
                 timeout: float = 90.0, heartbeat_s: float = 1.0,
                 ) -> tuple[list[str], list[str]]:
    """Spawn `processes` fleet processes sharing hosts host-1..N (round robin) in a running
    minicluster; wait until each consumes. Returns (process names, host names)."""
    names = [f"host-{i + 1}" for i in range(hosts)]
    procs = []
    for p in range(max(1, min(processes, hosts))):
        mine = names[p::max(1, min(processes, hosts))]
        proc = f"agent-fleet-{p + 1}"
        cluster.spawn(proc, fleet_argv(cluster.layout.bootstrap, proc, mine, cpu,
                                       heartbeat_s=heartbeat_s))
        procs.append(proc)
    cluster.wait_consuming(procs, timeout)
    return procs, names


def main(argv: list[str] | None = None) -> None:
    from peloton.agent.shell import AgentShell

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
    configs = fleet_configs(hosts, Resources(args.cpu, args.memory, args.disk, 0.0),
                            heartbeat_s=args.heartbeat, zones="abc")
    AgentShell(name, AgentFleetCore(configs), args.bootstrap, hosts).run()


if __name__ == "__main__":
    main()
