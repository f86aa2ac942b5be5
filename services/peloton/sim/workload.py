"""The workload: jobs drawn from the scenario's model with a Generator passed in.

`Workload(scenario, rng)` owns three independent streams spawned from `rng` (batch
arrivals, batch job shapes, services), so adding a service does not shift the batch
stream. Batch jobs arrive one at a time (`next_batch`), their gaps Weibull in operational
time warped by the diurnal curve; a job is drawn when it arrives, so memory holds only
the jobs that exist. Services and explicit jobs are drawn up front (`initial_jobs`).

A job's tasks are identical in their request (as in the trace, where a job's tasks share
one request); durations and actual usage differ per task. Same scenario and seed, same
jobs.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from peloton.model.resources import Resources

from .distributions import DiurnalClock, lognormal, negative_binomial_r, tasks_per_job
from .scenario import BatchParams, ExplicitJob, Scenario, ServiceParams, Tier

__all__ = ["JobSpec", "Workload"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class JobSpec:
    """One job as submitted. `durations` per task (inf: runs until the job ends);
    `end_s` is when a service job is stopped (inf: never); `usage` per task is the
    fraction of its request it actually uses."""

    name: str
    pool: str
    submit_s: float
    instances: int
    resources: Resources
    durations: FloatArray
    usage: FloatArray
    tier: Tier
    service: bool = False
    gang: bool = False
    end_s: float = float("inf")


def _choice(rng: np.random.Generator, weights: Sequence[float]) -> int:
    """An index drawn with probability proportional to `weights` (one uniform draw)."""
    total = 0.0
    cumulative = []
    for w in weights:
        total += w
        cumulative.append(total)
    u = float(rng.random()) * total
    return min(bisect_right(cumulative, u), len(cumulative) - 1)


class Workload:
    """Draws the scenario's jobs; see the module docstring."""

    def __init__(self, scenario: Scenario, rng: np.random.Generator) -> None:
        arrivals, shapes, services = rng.spawn(3)
        self._scenario = scenario
        self._arrivals = arrivals
        self._shapes = shapes
        self._services = services
        self._batch = scenario.batch
        self.batch_jobs = 0
        self.batch_tasks = 0
        self._r = 1.0
        self._clock: DiurnalClock | None = None
        if self._batch is not None:
            self._r = negative_binomial_r(self._batch.tasks_mean, self._batch.tasks_median)
            self._clock = DiurnalClock(self._batch.diurnal)

    # ------------------------------------------------------------------ batch stream
    def first_batch_arrival(self) -> float | None:
        b = self._batch
        if b is None:
            return None
        return self._next_time(b.start_s, b)

    def _next_time(self, t: float, b: BatchParams) -> float | None:
        if self.batch_jobs >= b.max_jobs or self.batch_tasks >= b.max_tasks:
            return None
        assert self._clock is not None
        gap = float(self._arrivals.weibull(b.arrival_shape)) * b.arrival_scale_s
        nxt = self._clock.advance(t, gap)
        if nxt > b.stop_s or nxt > self._scenario.duration_s:
            return None
        return nxt

    def next_batch(self, t: float) -> tuple[JobSpec, float | None]:
        """The batch job arriving at `t`, and when the next one arrives (None: no more)."""
        b = self._batch
        assert b is not None
        job = self._draw_batch(t, b)
        self.batch_jobs += 1
        self.batch_tasks += job.instances
        return job, self._next_time(t, b)

    def _draw_batch(self, t: float, b: BatchParams) -> JobSpec:
        rng = self._shapes
        pool = b.pools[_choice(rng, [w for _, w in b.pools])][0]
        tier = b.tiers[_choice(rng, [x.weight for x in b.tiers])]
        n = tasks_per_job(rng, self._r, b.tasks_mean, b.tasks_max)
        gpu = 0.0
        if b.gpu_fraction > 0 and rng.random() < b.gpu_fraction:
            gpu = float(b.gpu_per_task[int(rng.integers(len(b.gpu_per_task)))])
            n = min(n, b.gpu_max_tasks)
        gang = b.gang_fraction > 0 and rng.random() < b.gang_fraction
        if gang:
            n = max(2, min(n, b.gang_max_tasks))
        n = max(1, min(n, b.max_tasks - self.batch_tasks))
        cpu = round(float(lognormal(rng, b.cpu, 1)[0]), 3)
        memory = round(float(lognormal(rng, b.memory_mb, 1)[0]))
        durations = lognormal(rng, b.duration_s, n)
        usage = rng.uniform(b.usage_min, b.usage_max, n)
        return JobSpec(
            name=f"batch-{self.batch_jobs}",
            pool=pool,
            submit_s=t,
            instances=n,
            resources=Resources(max(cpu, 0.001), float(memory), 0.0, gpu),
            durations=durations,
            usage=usage,
            tier=tier,
            gang=gang and n > 1,
        )

    # ------------------------------------------------------- services, explicit jobs
    def initial_jobs(self) -> list[JobSpec]:
        """Services and explicit jobs, in submit order (ties: services first, then file
        order)."""
        out: list[JobSpec] = []
        if self._scenario.services is not None:
            out += self._draw_services(self._scenario.services)
        out += [self._explicit(j) for j in self._scenario.jobs]
        return sorted(out, key=lambda j: j.submit_s)

    def _draw_services(self, s: ServiceParams) -> list[JobSpec]:
        rng = self._services
        jobs: list[JobSpec] = []
        for i in range(s.jobs):
            pool = s.pools[_choice(rng, [w for _, w in s.pools])][0]
            submit = float(rng.uniform(0.0, s.submit_over_s)) if s.submit_over_s > 0 else 0.0
            n = max(1, int(round(float(lognormal(rng, s.instances, 1)[0]))))
            cpu = round(float(lognormal(rng, s.cpu, 1)[0]), 3)
            memory = round(float(lognormal(rng, s.memory_mb, 1)[0]))
            life = float(rng.exponential(s.lifetime_mean_s))
            jobs.append(JobSpec(
                name=f"service-{i}",
                pool=pool,
                submit_s=submit,
                instances=n,
                resources=Resources(max(cpu, 0.001), float(memory), 0.0, 0.0),
                durations=np.full(n, np.inf),
                usage=rng.uniform(s.usage_min, s.usage_max, n),
                tier=s.tier,
                service=True,
                end_s=submit + life,
            ))
        return jobs

    @staticmethod
    def _explicit(j: ExplicitJob) -> JobSpec:
        service = j.service
        return JobSpec(
            name=j.name,
            pool=j.pool,
            submit_s=j.submit_s,
            instances=j.instances,
            resources=j.resources,
            durations=np.full(j.instances, np.inf if service else j.duration_s),
            usage=np.full(j.instances, j.usage),
            tier=j.tier,
            service=service,
            gang=j.gang and j.instances > 1,
            end_s=j.submit_s + j.duration_s if service else float("inf"),
        )
