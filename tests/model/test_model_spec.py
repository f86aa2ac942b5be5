"""JobSpec/TaskSpec: decoded once from JobCreated, the one task lookup and gang rule."""

from __future__ import annotations

import copy
import pickle

from event_bodies import job_created

from peloton.model.resources import Resources
from peloton.model.spec import JobSpec
from peloton.model.taskstate import STAGE, TERMINAL, TaskState


def test_a_spec_round_trips_to_the_exact_body() -> None:
    body = job_created("j1", 4, instance_cpu={2: 3.0}, ports=("http",), max_failures=2)
    spec = JobSpec.from_body(body)
    assert spec.to_body() == body
    assert copy.deepcopy(spec) == spec and pickle.loads(pickle.dumps(spec)) == spec


def test_task_is_the_override_else_the_default() -> None:
    spec = JobSpec.from_body(job_created("j1", 4, cpu=1.0, instance_cpu={2: 3.0}))
    assert spec.task(2).resources == Resources(cpu=3.0, memory=64.0)
    assert spec.task(1) is spec.default_task and spec.task(1).resources.cpu == 1.0
    assert spec.has_override(2) and not spec.has_override(0)


def test_the_gang_rule_first_runs_together_retries_alone() -> None:
    spec = JobSpec.from_body(job_created("g", 5, min_running=3))
    assert spec.gang_size == 3
    assert [spec.gang_id(i) for i in range(5)] == ["g/gang"] * 3 + [None, None]
    assert spec.gang_id(0, run=2) is None and spec.gang_members(0, run=2) == 1
    assert spec.gang_members(1) == 3 and spec.gang_members(4) == 1


def test_every_terminal_state_ranks_last() -> None:
    top = max(STAGE.values())
    assert {s for s in TaskState if STAGE[s] == top} == set(TERMINAL)
