"""`peloton sim mixed SCENARIO`: every job type on the PRODUCTION cores under simulated time
(the in-memory runner: the four scheduling services as they run in production, simulated
agents, the same topics), with figures: utilization, each pool's allocation against its
entitlement and Jain's index over pools, submit -> RUNNING delays, preemptions, and the
workload operations' outcomes (rolling updates, maintenances).

Scenario (YAML)::

    name: mixed
    seed: 3
    duration_s: 900          # simulated
    sample_s: 15             # figures every this many simulated seconds
    step_ms: 50              # the runner's step (coarser is faster)
    hosts: {count: 12, cpu: 16, memory: 65536}
    pools:                   # Peloton ResourcePoolConfig documents, by path
      /services: {resources: [{kind: cpu, reservation: 96, limit: 192}, ...]}
    jobs:                    # Peloton v0 job documents, submitted at at_s (repeated
      - {id: web, at_s: 0, job: {...}}          # `count` times every `every_s`)
      - {id: etl, at_s: 30, every_s: 60, count: 8, job: {...}}
    events:
      - {at_s: 300, update: web, job: {...}, settings: {batch_size: 4}}
      - {at_s: 500, maintenance: [host-3], command: start_maintenance, deadline_s: 120}

`run_mixed` returns the figures and the samples; the CLI prints them and writes
`metrics.json` (and, with matplotlib, `utilization.png`) to --out. `peloton sim run`
runs the batch-and-services scenarios of the fast engine's format on the same runner
(`runner_engine.py`); this one takes Peloton job documents, updates and maintenances.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml

from peloton.model.event import Event
from peloton.model.jobfile import job_document_to_submitted
from peloton.resmgr.domain.poolbook import parse_pool_document
from peloton.runner.cluster import cluster
from peloton.sim.metrics import jain, percentiles

__all__ = ["MixedScenario", "load_mixed", "run_mixed", "write_mixed"]


@dataclass
class MixedScenario:
    name: str
    seed: int
    duration_s: float
    sample_s: float
    step_ms: int
    hosts: int
    cpu: float
    memory: float
    pools: dict[str, Any] = field(default_factory=dict)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


def load_mixed(text: str) -> MixedScenario:
    doc = yaml.safe_load(text)
    hosts = doc["hosts"]
    return MixedScenario(
        name=str(doc.get("name", "mixed")), seed=int(doc.get("seed", 0)),
        duration_s=float(doc["duration_s"]), sample_s=float(doc.get("sample_s", 15)),
        step_ms=int(doc.get("step_ms", 50)), hosts=int(hosts["count"]),
        cpu=float(hosts.get("cpu", 16)), memory=float(hosts.get("memory", 65536)),
        pools=dict(doc.get("pools") or {}), jobs=list(doc.get("jobs") or []),
        events=list(doc.get("events") or []))


def _schedule(sc: MixedScenario) -> list[tuple[float, str, dict[str, Any]]]:
    """(at_s, kind, item) for every submission and event, in time order."""
    out: list[tuple[float, str, dict[str, Any]]] = []
    for item in sc.jobs:
        for k in range(int(item.get("count", 1))):
            at = float(item.get("at_s", 0)) + k * float(item.get("every_s", 0))
            job_id = item["id"] if int(item.get("count", 1)) == 1 else f"{item['id']}-{k}"
            out.append((at, "submit", {"id": job_id, "job": item["job"]}))
    out += [(float(e["at_s"]), "event", e) for e in sc.events]
    return sorted(out, key=lambda x: (x[0], x[1]))


def run_mixed(sc: MixedScenario, progress: Callable[[str, float], None],
              clock: Callable[[], float] | None = None) -> dict[str, Any]:
    """Run the scenario; `clock` (the caller's wall clock, e.g. time.perf_counter) only
    measures how long it took: the simulation reads no clock of its own."""
    runner = cluster(seed=sc.seed, hosts=sc.hosts, cpu=sc.cpu, memory=sc.memory,
                     step_ms=sc.step_ms)
    wall0 = clock() if clock is not None else 0.0
    for i, (path, doc) in enumerate(sorted(sc.pools.items())):
        config = parse_pool_document(doc, path)[0]
        runner.publish([Event("ResourcePoolCreateRequested", path, {
            "request_id": f"sim-{i}", "at": runner.now, "path": path, "config": config})])
    runner.run_for(2_000)  # an entitlement cycle knows the pools before jobs come
    start = runner.now
    submitted: dict[str, int] = {}
    samples: list[dict[str, Any]] = []
    outcomes: list[str] = []
    schedule = _schedule(sc)
    next_sample = 0.0
    while (runner.now - start) / 1000 < sc.duration_s:
        t = (runner.now - start) / 1000
        while schedule and schedule[0][0] <= t:
            _, kind, item = schedule.pop(0)
            _apply(runner, kind, item, submitted, outcomes)
        if t >= next_sample:
            samples.append(_sample(runner, t))
            next_sample += sc.sample_s
            progress(f"{t:.0f}/{sc.duration_s:.0f} s simulated", t / sc.duration_s)
        runner.run_for(int(sc.sample_s * 1000 / 5))
    book = runner.core("jobmgr").book
    outcomes += [f"update of {job}: {rec.update.status.state.value} ({rec.reason})"
                 for job, rec in sorted(book.updates.items())]
    outcomes += [f"host {h}: {v.state.value} ({book.drain_reasons.get(h, '')})"
                 for h, v in sorted(book.hosts.views.items()) if v.state.value != "UP"]
    delays = _delays(runner, submitted)
    util = np.array([s["utilization"] for s in samples])
    fairness = np.array([s["jain"] for s in samples if s["jain"] is not None])
    return {
        "scenario": sc.name, "hosts": sc.hosts, "simulated_s": sc.duration_s,
        "wall_s": round(clock() - wall0, 1) if clock is not None else None,
        "jobs": len(submitted),
        "utilization_mean": round(float(util.mean()), 3) if util.size else None,
        "jain_over_pools_mean": round(float(fairness.mean()), 3) if fairness.size else None,
        "submit_to_running_s": percentiles(np.array(delays)),
        "preempted_runs": sum(len(b["tasks"]) for _, e, b in runner.records("respool-events")
                              if e == "TasksPreempted"),
        "job_states": _job_states(runner, submitted),
        "outcomes": outcomes,
        "tasks_run_twice_at_once": len(runner.watch.violations),
        "dead_letters": runner.dead_letters(),
        "samples": samples,
    }


def _apply(runner: Any, kind: str, item: dict[str, Any], submitted: dict[str, int],
           outcomes: list[str]) -> None:
    if kind == "submit":
        body = job_document_to_submitted(item["job"], item["id"], runner.now)
        submitted[item["id"]] = runner.now
        runner.submit([body])
    elif "update" in item:
        job_id = item["update"]
        body = job_document_to_submitted(item["job"], job_id, runner.now)
        runner.publish([Event("JobUpdateRequested", job_id, {
            "job_id": job_id, "update_id": f"sim-{job_id}-{runner.now}", "at": runner.now,
            "requested_by": "sim", "config": body, "settings": dict(item.get("settings")
                                                                    or {}),
            "instances": []})])
    elif "maintenance" in item:
        outcomes.append(f"{item.get('command', 'start_maintenance')} of "
                        f"{', '.join(item['maintenance'])} at {item['at_s']:g} s")
        deadline = item.get("deadline_s")
        for host in item["maintenance"]:
            runner.publish([Event("HostMaintenanceRequested", host, {
                "host": host, "command": item.get("command", "start_maintenance"),
                "deadline_ms": None if deadline is None else runner.now + int(
                    float(deadline) * 1000), "requested_by": "sim", "at": runner.now})])
    else:
        outcomes.append(f"unknown event ignored: {sorted(item)}")


def _sample(runner: Any, t: float) -> dict[str, Any]:
    """Figures of the newest entitlement cycle (the resource manager's published facts):
    per leaf pool its cpu allocation, entitlement and demand; utilization = allocated cpus
    over the cluster's; Jain's index over allocation / entitlement of the leaf pools that
    have work."""
    cycle = _newest_cycle(runner)
    rows = cycle.get("pools", [])
    parents = {r["parent"] for r in rows if r["parent"]}
    pools = {r["pool"]: {"allocation_cpu": round(float(r["allocation"]["cpu"]), 2),
                         "entitlement_cpu": round(float(r["entitlement"]["cpu"]), 2),
                         "demand_cpu": round(float(r["demand"]["cpu"]), 2)}
             for r in rows if r["pool"] not in parents}
    capacity = float(cycle.get("capacity", {}).get("cpu", 0.0))
    used = sum(p["allocation_cpu"] for p in pools.values())
    ratios = [p["allocation_cpu"] / p["entitlement_cpu"] for p in pools.values()
              if p["entitlement_cpu"] > 0 and (p["demand_cpu"] or p["allocation_cpu"])]
    views = runner.core("jobmgr").book.hosts.views
    states = {v.state.value for v in views.values()}
    return {"t": round(t, 1), "utilization": round(used / capacity, 3) if capacity else 0.0,
            "hosts_up": sum(1 for v in views.values() if v.state.value == "UP"),
            "host_states": sorted(states),
            "jain": jain(np.array(ratios)) if ratios else None, "pools": pools}


def _newest_cycle(runner: Any) -> dict[str, Any]:
    newest: dict[str, Any] = {}
    for _, etype, body in runner.records("entitlement-updated"):
        if etype == "EntitlementUpdated":
            newest = body
    return newest


def _delays(runner: Any, submitted: dict[str, int]) -> list[float]:
    first: dict[tuple[str, int], int] = {}
    for _, etype, body in runner.records("job-events"):
        if etype != "TaskStateChanged" or body["job_id"] not in submitted:
            continue
        for ch in body["changes"]:
            key = (body["job_id"], ch["instance"])
            if ch["state"] == "RUNNING" and key not in first:
                first[key] = body["at"]
    return [(at - submitted[job]) / 1000 for (job, _), at in first.items()]


def _job_states(runner: Any, submitted: dict[str, int]) -> dict[str, int]:
    """Every job's last state, from the job manager's JobStateChanged facts (PENDING for
    a job that has none yet)."""
    last: dict[str, str] = dict.fromkeys(submitted, "PENDING")
    for _, etype, body in runner.records("job-events"):
        if etype == "JobStateChanged":
            last[body["job_id"]] = body["state"]
    counts: dict[str, int] = {}
    for state in last.values():
        counts[state] = counts.get(state, 0) + 1
    return dict(sorted(counts.items()))


def write_mixed(result: dict[str, Any], out_dir: Any) -> list[Any]:
    """metrics.json, and utilization.png (utilization and each pool's allocation against
    its entitlement over time) when matplotlib is installed."""
    import json
    from pathlib import Path

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "metrics.json"]
    written[0].write_text(json.dumps(result, indent=2))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return written
    samples = result["samples"]
    t = [s["t"] for s in samples]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    top.plot(t, [s["utilization"] for s in samples], label="cluster cpu utilization")
    top.set_ylabel("fraction")
    top.set_ylim(0, 1.05)
    top.legend(loc="lower right")
    for pool in sorted({p for s in samples for p in s["pools"]}):
        alloc = [s["pools"].get(pool, {}).get("allocation_cpu", 0.0) for s in samples]
        ent = [s["pools"].get(pool, {}).get("entitlement_cpu", 0.0) for s in samples]
        line = bottom.plot(t, alloc, label=f"{pool} allocation")[0]
        bottom.plot(t, ent, linestyle="--", color=line.get_color(),
                    label=f"{pool} entitlement")
    bottom.set_xlabel("simulated s")
    bottom.set_ylabel("cpus")
    bottom.legend(loc="upper right", fontsize="small")
    fig.suptitle(f"{result['scenario']}: every job type on the production cores")
    fig.tight_layout()
    written.append(out / "utilization.png")
    fig.savefig(written[-1], dpi=100)
    plt.close(fig)
    return written
