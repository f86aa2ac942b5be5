"""Placement benchmark: throughput, round latency, safety and packing quality.

A seeded synthetic cluster (zones, racks, large/medium/GPU hosts, port ranges, slack,
some load already on it) receives a seeded stream of jobs (batch PACK, services SPREAD
with per-host caps and ports, constrained, GPU, revocable, gangs, a few impossible ones)
in rounds of ``round_size`` tasks. Each round (timed) refreshes the host table the way
the placement service does and runs `place`: by default one `HostTable` is kept across
rounds (built and warmed up once, untimed) and the rows of the hosts the previous round
placed on are updated from fresh host views (the views are built untimed, the update is
timed); with ``host_table="rebuild"`` a new table is built from every host's view (views
untimed, the build timed). Then the independent checker verifies the result (untimed)
and the placements are applied to the bookkeeping. The pre-generated workload is frozen
out of the garbage collector's passes (gc.freeze): a service never holds it.

Packing quality: small instances (<= 200 tasks) are placed with PACK on identical empty
hosts and compared with CP-SAT's (OR-Tools, imported lazily) optimum or, when not proven
within the time limit, its best lower bound: ratio = hosts used by PACK / that bound.

``placements_per_s`` divides by wall-clock time inside the timed part of the rounds;
``placements_per_cpu_s`` by this process's CPU time there, which is the steadier figure on
a shared machine. ``service_*`` figures (servicebench.py) time the placement service's own
loop (the board folding facts, its rounds and their events) over the same workload.
The bench is a shell around the pure core: it is where the seed and clock live.
"""

from __future__ import annotations

import gc
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from peloton.model.constraint import (
    Condition,
    Constraint,
    HostLabelConstraint,
    LabelConstraint,
    LabelKind,
    LabelOp,
    MaxPerHostConstraint,
    SpreadConstraint,
)
from peloton.model.resources import Resources
from peloton.placement.checker import check_round
from peloton.placement.domain import (
    HostTable,
    HostView,
    RoundResult,
    Strategy,
    TaskRequest,
    place,
)

__all__ = ["BenchConfig", "run_bench", "make_cluster", "make_jobs", "pack_quality"]

_PORT_LO, _PORT_HI = 31000, 32999
_ZONES = ("zone-a", "zone-b", "zone-c")


@dataclass(frozen=True)
class BenchConfig:
    hosts: int = 10_000
    tasks: int = 100_000
    seed: int = 0
    round_size: int = 5_000
    check: bool = True
    pack_quality: bool = True
    quality_instances: int = 8
    quality_time_limit_s: float = 5.0
    service: bool = True
    """Also run the placement service's own loop over the same workload (servicebench.py)
    and report its figures as ``service_*``."""
    host_table: str = "incremental"
    """"incremental": one `HostTable` kept across rounds, the rows of the hosts the last
    round changed refreshed before each round (what the placement service does; the
    refresh is timed with the round); "rebuild": a new table from every host view per
    round (the rebuild is timed)."""


@dataclass
class _Cluster:
    """The bench's own bookkeeping of the cluster between rounds."""

    names: list[str]
    capacity: np.ndarray
    free: np.ndarray
    slack: np.ndarray
    labels: list[dict[str, str]]
    next_port: list[int]
    task_labels: list[dict[str, int]] = field(default_factory=list)

    def views(self, hosts: Sequence[int] | None = None) -> list[HostView]:
        """Host views of every host, or of ``hosts`` (positions in ``names``)."""
        which = range(len(self.names)) if hosts is None else hosts
        out = []
        for i in which:
            port = self.next_port[i]
            out.append(HostView(
                self.names[i], Resources(*self.capacity[i].tolist()),
                Resources(*self.free[i].tolist()), Resources(*self.slack[i].tolist()),
                self.labels[i], dict(self.task_labels[i]),
                ((port, _PORT_HI),) if port <= _PORT_HI else (),
            ))
        return out

    def apply(self, tasks: dict[str, TaskRequest], result: RoundResult) -> list[int]:
        """Record the round's placements; the positions of the hosts that changed."""
        index = {n: i for i, n in enumerate(self.names)}
        changed: dict[int, None] = {}
        for p in result.placements:
            t = tasks[p.task_id]
            i = index[p.host]
            changed[i] = None
            pool = self.slack if t.revocable else self.free
            pool[i] -= (t.resources.cpu, t.resources.memory, t.resources.disk, t.resources.gpu)
            if p.ports:
                self.next_port[i] = max(self.next_port[i], max(p.ports.values()) + 1)
            counts = self.task_labels[i]
            label = f"peloton.job_id={t.job_id}"
            counts[label] = counts.get(label, 0) + 1
        return list(changed)


def make_cluster(n: int, rng: random.Random) -> _Cluster:
    """n hosts: 80% medium, 15% large, 5% GPU; 3 zones, racks of 40; some load."""
    names, caps, labels = [], [], []
    for i in range(n):
        zone = _ZONES[i % 3]
        roll = rng.random()
        if roll < 0.05:
            cap, kind = (64.0, 512 * 1024.0, 4_000_000.0, 8.0), "gpu"
        elif roll < 0.20:
            cap, kind = (96.0, 512 * 1024.0, 4_000_000.0, 0.0), "large"
        else:
            cap, kind = (48.0, 256 * 1024.0, 2_000_000.0, 0.0), "medium"
        lab = {"zone": zone, "rack": f"{zone}-r{(i // 3) // 40:03d}", "instance-type": kind}
        if kind == "gpu":
            lab["gpu-model"] = rng.choice(("a100", "v100"))
        names.append(f"host-{i:05d}")
        caps.append(cap)
        labels.append(lab)
    capacity = np.array(caps, dtype=np.float64).reshape(n, 4)
    load = np.array([rng.uniform(0.0, 0.3) for _ in range(n)])[:, None]
    free = np.floor(capacity * (1.0 - load))
    slack = np.floor(capacity * 0.1)
    slack[:, 3] = 0.0
    return _Cluster(names, capacity, free, slack, labels, [_PORT_LO] * n,
                    [{} for _ in range(n)])


def make_jobs(n_tasks: int, rng: random.Random) -> list[list[TaskRequest]]:
    """Jobs (lists of identical tasks) totalling n_tasks; sizes log-normal, capped."""
    jobs: list[list[TaskRequest]] = []
    total = 0
    j = 0
    while total < n_tasks:
        size = min(n_tasks - total, max(1, min(1000, int(math.exp(rng.gauss(3.0, 1.2))))))
        jobs.append(_job(f"job-{j:05d}", size, rng))
        total += len(jobs[-1])
        j += 1
    return jobs


def _job(job_id: str, size: int, rng: random.Random) -> list[TaskRequest]:
    roll = rng.random()
    cpu = rng.choice((0.5, 1.0, 1.0, 2.0, 2.0, 4.0, 8.0))
    res = Resources(cpu, float(cpu * rng.choice((1024, 2048, 4096))), float(rng.choice(
        (1024, 4096, 10240))), 0.0)
    ports: tuple[str, ...] = ()
    constraint: Constraint | None = None
    strategy, revocable, gang = Strategy.PACK, False, False
    if roll < 0.20:  # service: spread, ports, a per-host cap
        strategy = Strategy.SPREAD
        ports = ("http", "admin")[: rng.choice((1, 2))]
        constraint = rng.choice((
            MaxPerHostConstraint(1), MaxPerHostConstraint(2),
            LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, "peloton.job_id", job_id, 1),
            None,
        ))
    elif roll < 0.28:  # constrained batch
        constraint = rng.choice((
            HostLabelConstraint("zone", LabelOp.IN, ("zone-a", "zone-b")),
            HostLabelConstraint("instance-type", LabelOp.EQUALS, ("large",)),
            LabelConstraint(LabelKind.HOST, Condition.EQUAL, "zone", "zone-c", 1),
            SpreadConstraint("rack"),
        ))
    elif roll < 0.30:  # GPU (scarce: 2% of jobs, at most 50 tasks each)
        res = Resources(float(rng.choice((4, 8))), 32768.0, 10240.0, float(rng.choice((1, 2, 4))))
        size = min(size, 50)
        constraint = rng.choice((
            None, HostLabelConstraint("gpu-model", LabelOp.EQUALS, (rng.choice(("a100", "v100")),)),
        ))
    elif roll < 0.35:
        revocable = True
    elif roll < 0.38:
        gang = True
        size = min(size, 64)
    elif roll < 0.381:  # impossible: reported, never placed
        res = Resources(1.0, 1024.0, 0.0, 16.0)
    prio = rng.choice((0, 0, 1, 2))
    return [
        TaskRequest(
            f"{job_id}-{i}", job_id, res, ports, constraint, {},
            job_id if gang else None, size if gang else 1, strategy, revocable, prio,
        )
        for i in range(size)
    ]


def _rounds(jobs: list[list[TaskRequest]], round_size: int) -> list[list[TaskRequest]]:
    """Cut the stream into rounds of about ``round_size`` tasks; gangs are never cut."""
    rounds: list[list[TaskRequest]] = [[]]
    for job in jobs:
        pieces = [job] if job[0].gang_id else [
            job[i:i + round_size] for i in range(0, len(job), round_size)
        ]
        for piece in pieces:
            if rounds[-1] and len(rounds[-1]) + len(piece) > round_size:
                rounds.append([])
            rounds[-1].extend(piece)
    return rounds


def run_bench(cfg: BenchConfig) -> dict[str, Any]:
    rng = random.Random(cfg.seed)
    cluster = make_cluster(cfg.hosts, rng)
    rounds = _rounds(make_jobs(cfg.tasks, rng), cfg.round_size)
    incremental = cfg.host_table == "incremental"
    table = None
    if incremental:  # the service builds its table once, when it first hears of the hosts
        table = HostTable(cluster.views())
        table.warm_up(("zone",))
    # The pre-generated workload (every round's tasks) is bench scaffolding a service
    # never holds; keep the garbage collector from re-scanning it in every full pass.
    gc.collect()
    gc.freeze()
    changed: list[int] = []
    times: list[float] = []
    cpu = 0.0
    placed = violations = 0
    codes: dict[str, int] = {}
    samples: list[str] = []
    for tasks in rounds:
        if table is not None:  # refresh the rows the last round changed, then place
            fresh = cluster.views(changed)
            start, start_cpu = time.perf_counter(), time.process_time()
            table.update(fresh)
            result = place(table, tasks)
            views: Sequence[HostView] = list(table.views)
        else:  # rebuild every row from host views, then place
            views = cluster.views()
            start, start_cpu = time.perf_counter(), time.process_time()
            result = place(views, tasks)
        times.append(time.perf_counter() - start)
        cpu += time.process_time() - start_cpu
        if cfg.check:
            found = check_round(views, tasks, result)
            violations += len(found)
            samples += [str(v) for v in found[: 5 - len(samples)]] if len(samples) < 5 else []
        placed += len(result.placements)
        for code in result.codes.values():
            codes[code.value] = codes.get(code.value, 0) + 1
        changed = cluster.apply({t.task_id: t for t in tasks}, result)
    gc.unfreeze()
    total = sum(times)
    ms = sorted(t * 1000 for t in times)
    out: dict[str, Any] = {
        "hosts": cfg.hosts,
        "tasks": cfg.tasks,
        "seed": cfg.seed,
        "rounds": len(rounds),
        "round_size": cfg.round_size,
        "host_table": cfg.host_table,
        "placed": placed,
        "unplaced_by_code": dict(sorted(codes.items())),
        "engine_s": round(total, 3),
        "engine_cpu_s": round(cpu, 3),
        "placements_per_s": round(placed / total) if total else 0,
        "placements_per_cpu_s": round(placed / cpu) if cpu else 0,
        "p50_round_ms": round(_percentile(ms, 50), 2),
        "p99_round_ms": round(_percentile(ms, 99), 2),
        "max_round_ms": round(ms[-1], 2) if ms else 0.0,
        "violations": violations if cfg.check else None,
        "violation_samples": samples,
    }
    if cfg.service:
        from peloton.placement.servicebench import run_service_bench  # it imports this module

        out.update({f"service_{k}": v for k, v in run_service_bench(cfg).items()})
    if cfg.pack_quality:
        out.update(pack_quality(cfg.seed, cfg.quality_instances, cfg.quality_time_limit_s))
    return out


def _percentile(sorted_values: Sequence[float], pct: float) -> float:
    if not sorted_values:
        return 0.0
    rank = max(0, math.ceil(pct / 100 * len(sorted_values)) - 1)
    return sorted_values[rank]


# --------------------------------------------------------------------------- packing quality

_HOST = (32.0, 128 * 1024.0)


def _quality_instance(rng: random.Random) -> list[TaskRequest]:
    """<= 200 tasks from a few batch jobs of varied shapes, for 32-cpu/128GB hosts."""
    tasks: list[TaskRequest] = []
    j = 0
    target = rng.randint(120, 200)
    while len(tasks) < target:
        cpu = float(rng.choice((1, 2, 3, 4, 6, 8, 12)))
        mem = float(rng.choice((2, 4, 8, 16, 24, 32, 48)) * 1024)
        size = min(target - len(tasks), rng.randint(5, 40))
        tasks += [TaskRequest(f"q{j}-{i}", f"q{j}", Resources(cpu, mem)) for i in range(size)]
        j += 1
    return tasks


def pack_quality(seed: int, instances: int, time_limit_s: float) -> dict[str, Any]:
    """PACK's hosts used vs CP-SAT's optimum (or lower bound) on small instances."""
    rng = random.Random(seed + 1)
    rows: list[dict[str, Any]] = []
    for k in range(instances):
        tasks = _quality_instance(rng)
        demand = [sum(t.resources.cpu for t in tasks), sum(t.resources.memory for t in tasks)]
        n_hosts = int(max(d / c for d, c in zip(demand, _HOST, strict=True)) * 2) + 2
        hosts = [HostView(f"q{i:03d}", Resources(*_HOST), Resources(*_HOST))
                 for i in range(n_hosts)]
        result = place(hosts, tasks)
        if result.unplaced:
            raise RuntimeError(f"quality instance {k}: {len(result.unplaced)} tasks unplaced")
        used = len({p.host for p in result.placements})
        bound, proven = _cpsat_min_hosts(tasks, used, time_limit_s)
        rows.append({"tasks": len(tasks), "pack_hosts": used, "bound": bound, "optimal": proven})
    used_total = sum(r["pack_hosts"] for r in rows)
    bound_total = sum(r["bound"] for r in rows)
    return {
        "pack_quality_ratio": round(used_total / bound_total, 4) if bound_total else None,
        "pack_quality_instances": rows,
    }


def _cpsat_min_hosts(
    tasks: list[TaskRequest], upper: int, time_limit_s: float
) -> tuple[int, bool]:
    """(optimum or best lower bound on hosts needed, whether it is proven optimal)."""
    from ortools.sat.python import cp_model  # lazy: only the bench needs OR-Tools

    shapes: dict[tuple[int, int], int] = {}
    for t in tasks:
        key = (int(round(t.resources.cpu * 10)), int(round(t.resources.memory)))
        shapes[key] = shapes.get(key, 0) + 1
    caps = (int(_HOST[0] * 10), int(_HOST[1]))
    trivial = max(
        math.ceil(sum(s[d] * c for s, c in shapes.items()) / caps[d]) for d in range(2)
    )
    if trivial >= upper:
        return upper, True
    model = cp_model.CpModel()
    used = [model.new_bool_var(f"y{b}") for b in range(upper)]
    take = {(s, b): model.new_int_var(0, c, f"n{s}_{b}")
            for s, c in shapes.items() for b in range(upper)}
    for s, c in shapes.items():
        model.add(sum(take[s, b] for b in range(upper)) == c)
    for b in range(upper):
        for d in range(2):
            model.add(sum(take[s, b] * s[d] for s in shapes) <= caps[d] * used[b])
        if b + 1 < upper:
            model.add(used[b] >= used[b + 1])
    model.add(sum(used) >= trivial)
    model.minimize(sum(used))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = 8
    solver.parameters.random_seed = 0
    status = solver.solve(model)
    if status == cp_model.OPTIMAL:
        return int(solver.objective_value), True
    return max(trivial, int(math.ceil(solver.best_objective_bound - 1e-9))), False
