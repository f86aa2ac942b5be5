"""Scheduling-quality metrics, recorded as the simulation runs (pure, vectorised).

Definitions (simulated time; cpu is the kind used where one kind is needed):
- utilization: allocated (RUNNING tasks' requests) and used (their actual usage) over
  the capacity of the hosts that are up, sampled every `sample_s`.
- per pool: allocation (RUNNING), entitlement and demand (PENDING + READY + RUNNING).
- Jain's index at a sample: over the pools with demand, x = allocation /
  min(entitlement, demand); J = (sum x)^2 / (n sum x^2). `jain_index` is its mean over
  the samples where some pool has demand.
- time to entitlement: a pool's episode opens when demand appears in it (a job or a
  requeued task arrives) or, at a cycle's end, when it is short of its target; it closes
  at the first cycle end where allocation >= min(entitlement, demand) - tolerance, the
  tolerance being the smallest task the pool still waits for (a smaller gap cannot be
  closed by any whole task). Episodes still open at the end are counted, not timed.
- queueing delay: per run, from the moment it was queued (job submitted, or task
  requeued after preemption or loss) until RUNNING; p50/p90/p99 overall, by priority tier
  and by job size.
- preemptions: victims chosen by the preemption core (READY and RUNNING), per 1,000
  placements; wasted resource-seconds: what RUNNING victims and tasks lost with their
  host had run so far.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .state import SIZE_BUCKETS

__all__ = ["Recorder", "jain", "percentiles"]

FloatArray = npt.NDArray[np.float64]


def jain(x: FloatArray) -> float | None:
    """Jain's fairness index of x (None for no values; 1 when all are zero)."""
    if x.size == 0:
        return None
    sq = float((x * x).sum())
    return 1.0 if sq == 0 else float(x.sum()) ** 2 / (x.size * sq)


def percentiles(values: FloatArray, qs: Sequence[int] = (50, 90, 99)) -> dict[str, Any]:
    """{"n": count, "p50": ..., ...}; percentiles are None when there are no values."""
    out: dict[str, Any] = {"n": int(values.size)}
    if values.size:
        got = np.percentile(values, qs)
        out.update({f"p{q}": round(float(v), 3) for q, v in zip(qs, got, strict=True)})
    else:
        out.update({f"p{q}": None for q in qs})
    return out


class Recorder:
    def __init__(self, pools: Sequence[str], tiers: Sequence[str]) -> None:
        self.pools = tuple(pools)
        self.tiers = tuple(tiers)
        n = len(self.pools)
        self._delays: list[FloatArray] = []
        self._delay_tier: list[npt.NDArray[np.int64]] = []
        self._delay_size: list[npt.NDArray[np.int64]] = []
        self.placements = 0
        self.completed = 0
        self.preempted_ready = 0
        self.preempted_running = 0
        self.lost = 0
        self.killed = 0
        self.wasted = np.zeros(4)
        self.host_failures = 0
        self._open = np.full(n, np.nan)
        self._appeared = np.full(n, np.nan)
        self._episodes: list[float] = []
        self._rows: list[list[float]] = []
        self._pool_rows: list[FloatArray] = []
        self._jain: list[float] = []

    # ----------------------------------------------------------------------- events
    def started(self, delays: FloatArray, tiers: npt.NDArray[np.int64],
                sizes: npt.NDArray[np.int64]) -> None:
        self.placements += int(delays.size)
        self._delays.append(delays)
        self._delay_tier.append(tiers)
        self._delay_size.append(sizes)

    def demand_appeared(self, pool: int, t: float) -> None:
        if math.isnan(self._open[pool]) and math.isnan(self._appeared[pool]):
            self._appeared[pool] = t

    def cycle_end(self, now: float, entitled: FloatArray, running: FloatArray,
                  demand: FloatArray, tolerance: FloatArray) -> None:
        """Close or open time-to-entitlement episodes (all arrays per pool, cpu)."""
        target = np.minimum(entitled, demand)
        short = (demand > 1e-9) & (running < target - np.maximum(tolerance, 1e-6))
        started = np.where(np.isnan(self._open), self._appeared, self._open)
        done = ~short & ~np.isnan(started)
        self._episodes += (now - started[done]).tolist()
        self._open = np.where(short, np.where(np.isnan(started), now, started), np.nan)
        self._appeared[:] = np.nan

    def sample(self, now: float, capacity: FloatArray, allocated: FloatArray,
               used: FloatArray, entitled: FloatArray, running: FloatArray,
               demand: FloatArray) -> None:
        """One utilization/fairness sample (capacity, allocated, used: per kind;
        the rest per pool, cpu)."""
        cap = np.where(capacity > 0, capacity, np.nan)
        self._rows.append([now, *(allocated[:2] / cap[:2]).tolist(),
                           *(used[:2] / cap[:2]).tolist(), float(capacity[0])])
        self._pool_rows.append(np.stack((running, entitled, demand)))
        target = np.minimum(entitled, demand)
        has = target > 1e-9
        j = jain(running[has] / target[has])
        if j is not None:
            self._jain.append(j)

    # ---------------------------------------------------------------------- results
    def delays(self) -> tuple[FloatArray, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        if not self._delays:
            empty = np.zeros(0, dtype=np.int64)
            return np.zeros(0), empty, empty
        return (np.concatenate(self._delays), np.concatenate(self._delay_tier),
                np.concatenate(self._delay_size))

    def series(self) -> dict[str, Any]:
        """Time series for plots and metrics.json."""
        rows = np.array(self._rows).reshape(-1, 6)
        pools = np.array(self._pool_rows).reshape(-1, 3, len(self.pools))
        return {
            "t_s": rows[:, 0].tolist(),
            "cpu_allocated": _rounded(rows[:, 1]),
            "memory_allocated": _rounded(rows[:, 2]),
            "cpu_used": _rounded(rows[:, 3]),
            "memory_used": _rounded(rows[:, 4]),
            "capacity_cpu": rows[:, 5].tolist(),
            "pools": {
                path: {
                    "allocation_cpu": _rounded(pools[:, 0, i]),
                    "entitlement_cpu": _rounded(pools[:, 1, i]),
                    "demand_cpu": _rounded(pools[:, 2, i]),
                }
                for i, path in enumerate(self.pools)
            },
        }

    def summary(self) -> dict[str, Any]:
        rows = np.array(self._rows).reshape(-1, 6)
        delays, tiers, sizes = self.delays()
        by_tier = {name: percentiles(delays[tiers == i]) for i, name in enumerate(self.tiers)}
        by_size = {label: percentiles(delays[sizes == i])
                   for i, (label, _) in enumerate(SIZE_BUCKETS)}
        overall = percentiles(delays)
        episodes = np.array(self._episodes)
        ttc = percentiles(episodes, (50, 99))
        ttc["open_at_end"] = int((~np.isnan(self._open)).sum())
        preemptions = self.preempted_ready + self.preempted_running
        return {
            "utilization_mean": _mean(rows[:, 1]),
            "utilization": {
                "cpu_allocated_mean": _mean(rows[:, 1]),
                "cpu_allocated_peak": _max(rows[:, 1]),
                "cpu_used_mean": _mean(rows[:, 3]),
                "memory_allocated_mean": _mean(rows[:, 2]),
                "memory_used_mean": _mean(rows[:, 4]),
            },
            "jain_index": _mean(np.array(self._jain)),
            "time_to_entitlement_s": ttc,
            "queue_delay_p50_s": overall["p50"],
            "queue_delay_p90_s": overall["p90"],
            "queue_delay_p99_s": overall["p99"],
            "queue_delay_by_tier_s": by_tier,
            "queue_delay_by_job_size_s": by_size,
            "placements": self.placements,
            "completed": self.completed,
            "preemptions": preemptions,
            "preempted_running": self.preempted_running,
            "preempted_ready": self.preempted_ready,
            "preemptions_per_1000_placements": round(
                1000.0 * preemptions / self.placements, 3) if self.placements else 0.0,
            "lost": self.lost,
            "killed": self.killed,
            "host_failures": self.host_failures,
            "wasted_cpu_s": round(float(self.wasted[0]), 3),
            "wasted_memory_mb_s": round(float(self.wasted[1]), 3),
            "wasted_gpu_s": round(float(self.wasted[3]), 3),
        }

    def pool_summary(self) -> dict[str, dict[str, float | None]]:
        pools = np.array(self._pool_rows).reshape(-1, 3, len(self.pools))
        return {
            path: {
                "allocation_cpu_mean": _mean(pools[:, 0, i]),
                "entitlement_cpu_mean": _mean(pools[:, 1, i]),
                "demand_cpu_mean": _mean(pools[:, 2, i]),
            }
            for i, path in enumerate(self.pools)
        }


def _mean(x: FloatArray) -> float | None:
    x = x[~np.isnan(x)] if x.size else x
    return round(float(x.mean()), 6) if x.size else None


def _max(x: FloatArray) -> float | None:
    x = x[~np.isnan(x)] if x.size else x
    return round(float(x.max()), 6) if x.size else None


def _rounded(x: FloatArray) -> list[float]:
    return [round(v, 6) for v in np.nan_to_num(x).tolist()]
