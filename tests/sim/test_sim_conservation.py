"""Conservation: no host over capacity at any event, books agree with the tasks after
every event, and at the end every task is terminal, waiting or running."""

from __future__ import annotations

import numpy as np
import pytest
from _sim_builders import example, job, two_pools
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from peloton.jobmgr.domain.states import IllegalTransition, TaskState
from peloton.sim import Scenario, Simulation
from peloton.sim.audit import RESTING, audit
from peloton.sim.tasktable import TaskTable


def run_audited(scenario: Scenario, seed: int) -> Simulation:
    sim = Simulation(scenario, np.random.default_rng(seed))
    events = 0
    while (event := sim.step()) is not None:
        events += 1
        problems = audit(sim.state)
        assert problems == [], f"after {event}: {problems}"
    assert events > 0
    return sim


def assert_final_states(sim: Simulation) -> None:
    counts = sim.state.tasks.counts()
    assert sum(counts.values()) == sim.state.tasks.size
    assert {TaskState(s) for s in counts} <= RESTING
    summary = sim.result().summary
    finished = sum(counts.get(s, 0) for s in ("SUCCEEDED", "FAILED", "LOST", "KILLED"))
    assert finished + summary["queued_at_end"] + summary["running_at_end"] == \
        sim.state.tasks.size


def test_small_scenario_conserves_at_every_event() -> None:
    sim = run_audited(example("small", duration_s=1800), seed=7)
    assert_final_states(sim)
    summary = sim.result().summary
    assert summary["preemptions"] > 0  # the preemption paths were exercised


def test_hosts_failing_often_lose_and_requeue_tasks_consistently() -> None:
    scenario = example("small", duration_s=1200,
                       failures={"host_mtbf_s": 900, "repair_s": 300})
    sim = run_audited(scenario, seed=3)
    assert_final_states(sim)
    assert sim.result().summary["lost"] > 0


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31 - 1))
def test_any_seed_conserves(seed: int) -> None:
    sim = run_audited(example("small", duration_s=600), seed=seed)
    assert_final_states(sim)


def test_services_stopped_kill_their_tasks() -> None:
    scenario = two_pools(jobs=[job("svc", "/A", 4, service=True, duration=50),
                               job("big", "/B", 20, at=10)], duration_s=120)
    sim = run_audited(scenario, seed=1)
    counts = sim.state.tasks.counts()
    assert counts["KILLED"] == 4
    assert_final_states(sim)


def test_gang_jobs_start_whole() -> None:
    scenario = two_pools(cpu_per_host=4, jobs=[job("filler", "/A", 10, duration=60),
                                               job("gang", "/B", 6, at=5, gang=True)],
                         duration_s=200)
    sim = run_audited(scenario, seed=1)
    t = sim.state.tasks
    gang = sim.state.jobs[1]
    rows = np.arange(gang.first, gang.first + 6)
    starts = t.started_at[rows]
    assert (starts == starts[0]).all()


def test_the_task_table_refuses_undefined_transitions() -> None:
    table = TaskTable()
    rows = table.add(0, np.full(2, 10.0), np.full(2, 0.3), False)
    table.move(rows, TaskState.PENDING)
    table.move(rows, TaskState.SUCCEEDED)
    with pytest.raises(IllegalTransition):
        table.move(rows, TaskState.RUNNING)
