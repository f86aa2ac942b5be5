"""The placement service's own loop at bench scale: the bench's workload as facts.

`run_service_bench` drives a `PlacementBoard` (the core the placement service runs) with
what its topics would carry: JobCreated for every job and OfferReceived for every host,
then per round TasksAdmitted for the round's tasks, one round (`next_round`), and
hostmgr's answers: TaskLaunchRequested for every placement and OfferReceived for the
hosts placed on (free resources, used ports and per-job task counts after the launches).

Timed: what the service does with those facts (folding them, and the round with its
PlacementMade / PlacementFailed events). Building the fact bodies plays jobmgr, resmgr
and hostmgr and is untimed. Runs the board never placed stay queued and are retried
every round, as in the service. Safety: the bench's own bookkeeping of every host must
never go below zero free (``overcommitted_hosts``); the per-round checker runs in the
engine bench (bench.py).

hostmgr's offers carry the hosts' slack (OfferReceived v2), so revocable tasks place on
slack as in the engine bench. Offers and launches carry what hostmgr's do: a rising
`generation` per host and the tick's `at`, so the board sees each launch counted by the
offer that follows it.
"""

from __future__ import annotations

import gc
import json
import random
import time
from typing import Any

from peloton.model.constraint import to_dict
from peloton.placement.bench import (
    _PORT_HI,
    _PORT_LO,
    BenchConfig,
    _Cluster,
    _percentile,
    _rounds,
    make_cluster,
    make_jobs,
)
from peloton.placement.domain.board import PlacementBoard
from peloton.placement.domain.types import TaskRequest

__all__ = ["run_service_bench"]

Body = dict[str, Any]


def run_service_bench(cfg: BenchConfig) -> dict[str, Any]:
    """Figures of the board's loop over the same seeded cluster and workload as
    `run_bench` (its keys are prefixed ``service_`` by the caller)."""
    rng = random.Random(cfg.seed)
    cluster = make_cluster(cfg.hosts, rng)
    jobs = make_jobs(cfg.tasks, rng)
    rounds = _rounds(jobs, cfg.round_size)
    tasks = {t.task_id: t for job in jobs for t in job}
    board = PlacementBoard()
    for job in jobs:
        board.fold("JobCreated", _job_created(job))
    generations = [1] * len(cluster.names)
    board.fold("OfferReceived", {"at": 0, "offers": [
        _offer(cluster, i, 1) for i in range(len(cluster.names))]})
    gc.collect()
    gc.freeze()  # the pre-generated workload: see bench.py
    times: list[float] = []
    cpu = 0.0
    placed = 0
    index = {name: i for i, name in enumerate(cluster.names)}
    for r, round_tasks in enumerate(rounds):
        admitted = {"at": r, "pool": "/default", "tasks": [
            {"job_id": t.job_id, "instance": _instance(t), "run": 1} for t in round_tasks]}
        start, start_cpu = time.perf_counter(), time.process_time()
        board.fold("TasksAdmitted", admitted)
        events = board.next_round(r)
        elapsed, elapsed_cpu = time.perf_counter() - start, time.process_time() - start_cpu
        made = [p for e in events if e.type == "PlacementMade" for p in e.body["placements"]]
        placed += len(made)
        launches, offers = _answers(cluster, index, tasks, made, generations, r, board.round)
        start, start_cpu = time.perf_counter(), time.process_time()
        for body in launches:
            board.fold("TaskLaunchRequested", body)
        board.fold("OfferReceived", {"at": r, "offers": offers})
        times.append(elapsed + time.perf_counter() - start)
        cpu += elapsed_cpu + time.process_time() - start_cpu
    gc.unfreeze()
    total = sum(times)
    ms = sorted(t * 1000 for t in times)
    over = int(((cluster.free < -1e-6).any(axis=1) | (cluster.slack < -1e-6).any(axis=1)).sum())
    return {
        "placed": placed,
        "waiting": len(board.queue),
        "placements_per_s": round(placed / total) if total else 0,
        "placements_per_cpu_s": round(placed / cpu) if cpu else 0,
        "p50_round_ms": round(_percentile(ms, 50), 2),
        "p99_round_ms": round(_percentile(ms, 99), 2),
        "overcommitted_hosts": over,
    }


def _instance(t: TaskRequest) -> int:
    return int(t.task_id.rsplit("-", 1)[1])


def _job_created(job: list[TaskRequest]) -> Body:
    """The JobCreated body of one bench job (identical tasks)."""
    t = job[0]
    return {
        "job_id": t.job_id, "at": 0, "name": t.job_id, "owner": "bench", "type": "BATCH",
        "respool": "/default", "labels": {}, "instance_count": len(job),
        "priority": t.priority, "preemptible": True, "revocable": t.revocable,
        "gang_size": t.gang_size if t.gang_id is not None else 1,
        "placement_strategy": t.strategy.value, "instance_tasks": {},
        "default_task": {
            "resources": t.resources.as_dict(), "command": "bench", "env": {},
            "constraint_json": json.dumps(to_dict(t.constraint)) if t.constraint else None,
            "max_failures": 0, "labels": dict(t.labels),
            "ports": [f"{p}:PORT_{p.upper()}" for p in t.ports], "kill_grace_period_s": 0.0,
        },
    }


def _offer(cluster: _Cluster, i: int, generation: int) -> Body:
    """hostmgr's offer for host ``i``: what is free after the launches on it."""
    cap = cluster.capacity[i].tolist()
    free = cluster.free[i].tolist()
    slack = cluster.slack[i].tolist()
    return {
        "host": cluster.names[i], "incarnation": "inc-1",
        "capacity": dict(zip(("cpu", "memory", "disk", "gpu"), cap, strict=True)),
        "free": dict(zip(("cpu", "memory", "disk", "gpu"), free, strict=True)),
        "slack": dict(zip(("cpu", "memory", "disk", "gpu"), slack, strict=True)),
        "labels": cluster.labels[i], "generation": generation, "available": True,
        "port_range_begin": _PORT_LO, "port_range_end": _PORT_HI,
        "used_ports": list(range(_PORT_LO, min(cluster.next_port[i], _PORT_HI + 1))),
        "task_label_counts": dict(cluster.task_labels[i]),
    }


def _answers(
    cluster: _Cluster, index: dict[str, int], tasks: dict[str, TaskRequest], made: list[Body],
    generations: list[int], at: int, round_: int,
) -> tuple[list[Body], list[Body]]:
    """hostmgr's TaskLaunchRequested bodies (one per host) and the changed hosts' offers."""
    by_host: dict[str, list[Body]] = {}
    for p in made:
        t = tasks[f"{p['job_id']}-{p['instance']}"]
        i = index[p["host"]]
        pool = cluster.slack if t.revocable else cluster.free
        pool[i] -= (t.resources.cpu, t.resources.memory, t.resources.disk, t.resources.gpu)
        if p["ports"]:
            cluster.next_port[i] = max(cluster.next_port[i], max(p["ports"].values()) + 1)
        counts = cluster.task_labels[i]
        label = f"peloton.job_id={t.job_id}"
        counts[label] = counts.get(label, 0) + 1
        generations[i] += 1
        by_host.setdefault(p["host"], []).append(
            {"job_id": p["job_id"], "instance": p["instance"], "run": p["run"],
             "resources": p["resources"], "ports": p["ports"], "round": round_})
    launches = [{"host": h, "incarnation": "inc-1", "at": at, "launches": runs}
                for h, runs in by_host.items()]
    offers = [_offer(cluster, index[h], generations[index[h]]) for h in sorted(by_host)]
    return launches, offers
