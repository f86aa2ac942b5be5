"""The workload model: the trace fits come out of the sampler, deterministically."""

from __future__ import annotations

import math

import numpy as np
from _sim_builders import example
from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.sim.distributions import (
    DiurnalClock,
    lognormal,
    negative_binomial_r,
    tasks_per_job,
)
from peloton.sim.events import EventQueue, Kind
from peloton.sim.scenario import Diurnal, LogNormal
from peloton.sim.scheduler import chunk_sizes
from peloton.sim.workload import Workload


def test_tasks_per_job_has_the_trace_mean_and_median() -> None:
    r = negative_binomial_r(52.5, 1)
    rng = np.random.default_rng(3)
    draws = np.array([tasks_per_job(rng, r, 52.5, 10**9) for _ in range(100_000)])
    assert np.median(draws) == 1
    assert abs(draws.mean() - 52.5) < 3.0
    assert draws.min() >= 1


def test_tasks_per_job_respects_the_cap() -> None:
    rng = np.random.default_rng(4)
    r = negative_binomial_r(52.5, 1)
    assert max(tasks_per_job(rng, r, 52.5, 40) for _ in range(5000)) == 40


def test_lognormal_has_the_given_median_and_sigma() -> None:
    x = lognormal(np.random.default_rng(5), LogNormal(105.0, 1.74), 200_000)
    assert abs(np.median(x) / 105.0 - 1) < 0.03
    assert abs(np.log(x).std() - 1.74) < 0.02


def test_lognormal_is_clipped() -> None:
    x = lognormal(np.random.default_rng(6), LogNormal(1.0, 2.0, 0.5, 3.0), 10_000)
    assert x.min() >= 0.5 and x.max() <= 3.0


def test_weibull_gaps_have_the_trace_mean_without_a_diurnal_curve() -> None:
    clock = DiurnalClock(Diurnal(0.0))
    rng = np.random.default_rng(8)
    t = 0.0
    for gap in (rng.weibull(0.54, 100_000) * 33.0).tolist():
        t = clock.advance(t, gap)
    assert abs(t / 100_000 / (33.0 * math.gamma(1 + 1 / 0.54)) - 1) < 0.03


def test_the_diurnal_curve_shapes_arrivals() -> None:
    clock = DiurnalClock(Diurnal(0.5, 86_400.0, 43_200.0))
    t, times = 0.0, []
    while t < 86_400.0:
        t = clock.advance(t, 10.0)
        times.append(t)
    hours = np.histogram(np.array(times) % 86_400, bins=24, range=(0, 86_400))[0]
    assert hours[12] > 2.5 * hours[0]  # 1.5x the mean rate at the peak, 0.5x at the trough


@given(st.floats(0, 0.95), st.floats(0, 1e5), st.floats(0, 5e4))
def test_the_diurnal_clock_moves_forward_by_the_integrated_rate(a: float, t: float,
                                                                 gap: float) -> None:
    clock = DiurnalClock(Diurnal(a, 86_400.0, 50_400.0))
    nxt = clock.advance(t, gap)
    assert nxt >= t
    assert abs(clock._integral(nxt) - clock._integral(t) - gap) < 1e-6 * max(1.0, gap)


@given(st.integers(0, 3000), st.integers(0, 3100))
def test_chunks_admit_exactly_what_fits(n: int, budget: int) -> None:
    sizes = chunk_sizes(n)
    assert sum(sizes) == n
    taken = 0
    for size in sizes:  # admission's backfilling scan, in chunk order
        if taken + size <= budget:
            taken += size
    assert taken == min(n, budget)


def test_events_run_in_time_then_kind_then_push_order() -> None:
    q = EventQueue()
    q.push(5.0, Kind.CYCLE, 1)
    q.push(5.0, Kind.JOB_SUBMITTED, 2)
    q.push(5.0, Kind.JOB_SUBMITTED, 3)
    q.push(1.0, Kind.CYCLE, 4)
    q.push(5.0, Kind.HOST_FAILED, 5)
    assert [q.pop().payload for _ in range(5)] == [4, 5, 2, 3, 1]


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_workload_is_a_function_of_the_seed(seed: int) -> None:
    scenario = example("small")

    def draw() -> list[tuple[str, str, int, float]]:
        w = Workload(scenario, np.random.default_rng(seed))
        out = [(j.name, j.pool, j.instances, j.resources.cpu) for j in w.initial_jobs()]
        t = w.first_batch_arrival()
        while t is not None and len(out) < 60:
            j, t = w.next_batch(t)
            out.append((j.name, j.pool, j.instances, round(j.submit_s, 9)))
        return out

    assert draw() == draw()
