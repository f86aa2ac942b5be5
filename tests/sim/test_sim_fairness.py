"""Fairness on two pools: Peloton's preemption system test, and convergence to the
entitlement within a few entitlement cycles after every demand change."""

from __future__ import annotations

import numpy as np
from _sim_builders import example, job, two_pools
from _sim_run import Trace, run_traced
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from peloton.model.resources import Resources
from peloton.resmgr.domain import PoolUsage, compute_entitlements
from peloton.sim import Scenario


def test_peloton_preemption_scenario_preempts_exactly_six_and_both_pools_run_six() -> None:
    sim, trace = run_traced(example("peloton-preemption"))
    a, b = sim.state.pools.index["/A"], sim.state.pools.index["/B"]
    before = trace.at(119)
    assert (trace.running[before][a], trace.running[before][b]) == (12, 0)
    after = trace.at(300)
    assert (trace.running[after][a], trace.running[after][b]) == (6, 6)
    summary = sim.result().summary
    assert summary["preempted_running"] == 6
    assert summary["preempted_ready"] == 0
    assert summary["pools"]["/A"]["preempted"] == 6
    assert summary["pools"]["/B"]["preempted"] == 0
    # the six victims are A's tasks, each now in its second run
    t = sim.state.tasks
    job_a = sim.state.jobs[0]
    rows = np.arange(job_a.first, job_a.first + 12)
    assert int((t.run[rows] == 2).sum()) == 6
    # once B's work is done, A gets all 12 cpus back
    assert trace.running[-1][a] == 12 and trace.running[-1][b] == 0


def test_the_victims_are_the_most_recently_started() -> None:
    scenario = two_pools(jobs=[job("a", "/A", 12, at=0), job("b", "/B", 12, at=60)],
                         duration_s=200)
    sim, _ = run_traced(scenario)
    t = sim.state.tasks
    rows = np.arange(12)  # job a's tasks; the victims wait (PENDING) in their 2nd run
    victims = rows[t.run[rows] == 2]
    latest = rows[np.argsort(-t.started_seq[rows])[:6]]
    assert sorted(victims.tolist()) == sorted(latest.tolist())


def test_non_preemptible_work_stays_within_the_reservation() -> None:
    scenario = two_pools(jobs=[job("a", "/A", 12, preemptible=False)], duration_s=120)
    sim, trace = run_traced(scenario)
    a = sim.state.pools.index["/A"]
    assert max(r[a] for r in trace.running) == 6
    assert sim.result().summary["queued_at_end"] == 6


def converged(trace: Trace, changes: list[float], window: float,
              task_cpu: float = 1.0) -> list[str]:
    """Problems: cycles at least `window` after the last demand change where some pool's
    running cpu is a whole task or more away from min(entitlement, demand)."""
    problems = []
    for i, now in enumerate(trace.t):
        last = max((c for c in changes if c <= now), default=None)
        if last is None or now - last < window:
            continue
        for p, (run, ent, dem) in enumerate(zip(trace.running[i], trace.entitled[i],
                                                trace.demand[i], strict=True)):
            target = min(ent, dem)
            if abs(run - target) >= task_cpu - 1e-9:
                problems.append(f"t={now}: pool {p} runs {run}, target {target:.2f}")
    return problems


def test_both_pools_converge_after_every_demand_change_in_the_preemption_scenario() -> None:
    scenario = example("peloton-preemption")
    _, trace = run_traced(scenario)
    ent = scenario.scheduler.entitlement_cycle_s
    window = (scenario.scheduler.sustained_cycles + 2) * ent
    # demand changes: the two submissions, and B's two waves of 600 s tasks ending
    b_ends = [t for t, d, prev in zip(trace.t[1:], trace.demand[1:], trace.demand,
                                      strict=False) if d[1] < prev[1]]
    assert b_ends, "B's demand should drop when its tasks end"
    assert converged(trace, [0.0, 120.0, *b_ends], window) == []


def _expected(scenario: Scenario, demand: dict[str, float]) -> dict[str, float]:
    usage = {p: PoolUsage(demand=Resources(cpu=d)) for p, d in demand.items()}
    ents = compute_entitlements(scenario.tree, scenario.capacity, usage)
    return {p: ents[p].entitlement.cpu for p in demand}


def test_shares_split_the_cluster_two_to_one() -> None:
    scenario = two_pools(a=(0, 12), b=(0, 12), shares=(1, 2),
                         jobs=[job("a", "/A", 12), job("b", "/B", 12, at=60)],
                         duration_s=200)
    assert _expected(scenario, {"/A": 12, "/B": 12}) == {"/A": 4.0, "/B": 8.0}
    sim, trace = run_traced(scenario)
    i = trace.at(150)
    assert trace.running[i] == [4.0, 8.0]


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(
    res_a=st.integers(0, 6), res_b=st.integers(0, 6),
    share_a=st.sampled_from([1, 2, 3]), share_b=st.sampled_from([1, 2, 3]),
    n_a=st.integers(1, 16), n_b=st.integers(1, 16),
    b_at=st.sampled_from([0, 30, 100]), b_for=st.sampled_from([150, 400]),
    cpu=st.sampled_from([1.0, 2.0]),
)
def test_each_pool_converges_to_its_entitlement_after_demand_changes(
    res_a: int, res_b: int, share_a: int, share_b: int, n_a: int, n_b: int,
    b_at: int, b_for: int, cpu: float,
) -> None:
    """Two pools on 12 cpus; B's job (a service) arrives at b_at and is stopped b_for
    seconds later. After each change, within sustained + 2 entitlement cycles, every
    pool runs min(entitlement, demand) to within one task."""
    scenario = two_pools(
        a=(res_a, 12), b=(res_b, 12), shares=(share_a, share_b), cycle_s=2,
        jobs=[job("a", "/A", n_a, cpu=cpu),
              job("b", "/B", n_b, at=b_at, cpu=cpu, service=True, duration=b_for)],
        duration_s=b_at + b_for + 120,
    )
    _, trace = run_traced(scenario)
    window = (scenario.scheduler.sustained_cycles + 2) * scenario.scheduler.entitlement_cycle_s
    changes = [0.0, float(b_at), float(b_at + b_for)]
    assert converged(trace, changes, window, task_cpu=cpu) == []
