"""Benchmarks of the resource manager's pure core (entitlement cycle, admission).

This is a shell around the core, so it may read the clock and draw (seeded) random
numbers. Targets: an entitlement cycle over 1,000 pools under 50 ms, 10,000 under 500 ms.

    python -m peloton.resmgr.bench            # prints the figures as JSON
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from collections.abc import Callable

from peloton.model.resources import Resources
from peloton.resmgr.domain.admission import Gang, PoolAdmissionView, PoolAllocation, admit
from peloton.resmgr.domain.entitlement import PoolUsage, compute_entitlements
from peloton.resmgr.domain.poolconfig import PoolConfig, ReservationType, ResourceSpec
from peloton.resmgr.domain.pooltree import ROOT, PoolTree, build_tree, child_path

__all__ = ["entitlement_cycle_bench", "admission_bench", "three_level_tree"]

_CAPACITY = Resources(cpu=100_000, memory=400_000_000, disk=4_000_000_000, gpu=1_000)


def three_level_tree(n_pools: int, seed: int) -> tuple[PoolTree, dict[str, PoolUsage]]:
    """A valid 3-level tree of `n_pools` pools (plus root) and demand on every leaf."""
    rng = random.Random(seed)
    b = max(1, math.ceil(n_pools ** (1 / 3)))
    n_top = min(n_pools, b)
    n_mid = min(n_pools - n_top, b * b)
    n_leaf = n_pools - n_top - n_mid
    parents = [ROOT] * n_top + [f"t{i % n_top}" for i in range(n_mid)]
    parents += [f"m{i % n_mid}" if n_mid else f"t{i % n_top}" for i in range(n_leaf)]
    names = [f"t{i}" for i in range(n_top)] + [f"m{i}" for i in range(n_mid)]
    names += [f"l{i}" for i in range(n_leaf)]
    fanout: dict[str, int] = {}
    for p in parents:
        fanout[p] = fanout.get(p, 0) + 1
    reservation: dict[str, Resources] = {ROOT: _CAPACITY}
    limits: dict[str, Resources] = {ROOT: _CAPACITY}
    path_of: dict[str, str] = {"/": ROOT}
    entries: list[tuple[str, PoolConfig]] = []
    for name, parent in zip(names, parents, strict=True):
        parent_path = path_of[parent] if parent != ROOT else ROOT
        res = reservation[parent_path].scale(rng.uniform(0.2, 0.9) / fanout[parent])
        limit = limits[parent_path].scale(rng.uniform(0.5, 1.0)).max(res)
        kind = ReservationType.STATIC if rng.random() < 0.1 else ReservationType.ELASTIC
        specs = {
            k: ResourceSpec(res.get(k), limit.get(k), rng.choice((1, 2, 3)), kind)
            for k in ("cpu", "memory", "disk", "gpu")
        }
        path = child_path(parent_path, name)
        path_of[name] = path
        reservation[path] = res
        limits[path] = limit
        entries.append((parent_path, PoolConfig.create(name, specs)))
    tree, _ = build_tree(entries, _CAPACITY)
    per_leaf = _CAPACITY.scale(1.5 / max(1, len(tree.leaves())))
    usage = {
        leaf: PoolUsage(
            demand=per_leaf.scale(rng.uniform(0.0, 1.0)),
            allocation=per_leaf.scale(rng.uniform(0.0, 0.7)),
            slack_demand=per_leaf.scale(rng.uniform(0.0, 0.2)),
        )
        for leaf in tree.leaves()
    }
    return tree, usage


def entitlement_cycle_bench(n_pools: int, seed: int = 0, runs: int = 5) -> dict[str, float]:
    """Median wall time of `compute_entitlements` on a 3-level tree of `n_pools` pools.

    `cycle_ms` is the steady state (the tree's array layout is cached on the tree);
    `cold_cycle_ms` is the first cycle after the tree changed (layout built).
    """
    tree, usage = three_level_tree(n_pools, seed)
    slack = Resources(cpu=_CAPACITY.cpu * 0.2)
    cold = _median_ms(lambda: compute_entitlements(tree, _CAPACITY, usage, slack), 1)
    ms = _median_ms(lambda: compute_entitlements(tree, _CAPACITY, usage, slack), runs)
    return {"pools": n_pools, "cycle_ms": round(ms, 3), "cold_cycle_ms": round(cold, 3)}


def admission_bench(
    n_gangs: int, seed: int = 0, n_pools: int = 100, runs: int = 5
) -> dict[str, float]:
    """Gangs considered per second by `admit` over `n_pools` leaf pools (about half fit)."""
    rng = random.Random(seed)
    per_pool = Resources(cpu=1000, memory=4_000_000, disk=40_000_000, gpu=10)
    pools = {
        f"/p{i}": PoolAdmissionView(
            entitlement=per_pool,
            slack_entitlement=per_pool.scale(0.2),
            nonslack_entitlement=per_pool,
            reservation=per_pool.scale(0.5),
            allocation=PoolAllocation(nonslack=per_pool.scale(rng.uniform(0.0, 0.5))),
        )
        for i in range(n_pools)
    }
    queues: dict[str, list[Gang]] = {p: [] for p in pools}
    mean_cpu = 2.0 * 1000 * n_pools / max(1, n_gangs)  # total demand ~ 2x the free room
    for seq in range(n_gangs):
        pool = f"/p{rng.randrange(n_pools)}"
        size = rng.choice((1, 1, 1, 2, 4))
        cpu = rng.uniform(0.2, 1.8) * mean_cpu
        queues[pool].append(
            Gang(
                gang_id=f"g{seq}",
                task_ids=tuple(f"g{seq}-{j}" for j in range(size)),
                pool=pool,
                priority=rng.randrange(3),
                seq=seq,
                resources=Resources(cpu=cpu, memory=cpu * 4000, disk=cpu * 10_000),
                preemptible=rng.random() > 0.1,
                revocable=rng.random() < 0.1,
            )
        )
    ms = _median_ms(lambda: admit(pools, queues), runs)
    return {"gangs": n_gangs, "admit_ms": round(ms, 3), "gangs_per_s": round(n_gangs / (ms / 1e3))}


def _median_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(max(1, runs)):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


if __name__ == "__main__":
    figures = [entitlement_cycle_bench(n, seed=1) for n in (100, 1_000, 10_000)]
    figures.append(admission_bench(100_000, seed=1))
    print(json.dumps(figures, indent=2))
