"""Controller tasks and task-level revocable are honoured, not dropped (issue 8, item 6).

Peloton: a controller task (instance 0 only) decides the job's end. When its run ends for
good, the job's other tasks are killed (the job is KILLING meanwhile) and, once nothing
runs, the job ends as the controller did. A task-level `revocable` reaches the typed spec
(`spec.task(i).revocable`) that every core reads.
"""

from __future__ import annotations

from typing import Any

import pytest
from jobmgr_driver import Jobmgr, changes, controlled, job_states

from peloton.jobmgr.domain.states import derive_job_state
from peloton.jobmgr.domain.validation import validate_submission
from peloton.model.jobfile import parse_job_file
from peloton.model.spec import JobSpec
from peloton.model.taskstate import JobState, TaskState

S, J = TaskState, JobState

def running_controlled_job(n: int = 3, max_failures: int = 0) -> Jobmgr:
    jm = Jobmgr()
    jm.send("JobSubmitted", controlled("c", n, max_failures))
    for i in range(n):
        jm.to_running("c", i, f"h{i}")
    assert jm.job_state("c") == "RUNNING"
    return jm


def kills(events: list[Any]) -> list[tuple[str, int, int]]:
    return [(e.key, k["instance"], k["run"]) for e in events if e.type == "TaskKillRequested"
            for k in e.body["kills"]]


# ======================================================================= controller


def test_the_job_file_and_validation_keep_the_controller_on_instance_0() -> None:
    created, problems = validate_submission(controlled("c"), None, None, 0)
    assert problems == [] and created is not None
    spec = JobSpec.from_body(created)
    assert [spec.task(i).controller for i in range(3)] == [True, False, False]
    assert spec.task(0).command == "./drive" and spec.task(1).command == "./work"


def test_a_controller_on_another_instance_is_rejected_with_its_reason() -> None:
    body = controlled("c")
    body["instance_config"]["2"] = dict(body["instance_config"]["0"])
    _, problems = validate_submission(body, None, None, 0)
    assert "instanceConfig.2.controller: only instance 0 may be a controller task" in problems


def test_when_the_controller_succeeds_the_others_are_killed_and_the_job_succeeds() -> None:
    jm = running_controlled_job()
    out = jm.status("h0", "c", 0, "SUCCEEDED", exit_code=0)
    assert changes(out) == [("c", 0, 1, "RUNNING", "SUCCEEDED"),
                            ("c", 1, 1, "RUNNING", "KILLING"),
                            ("c", 2, 1, "RUNNING", "KILLING")]
    assert kills(out) == [("h1", 1, 1), ("h2", 2, 1)]
    assert job_states(out) == [("RUNNING", "KILLING")]  # not terminal while tasks run
    jm.status("h1", "c", 1, "KILLED")
    assert jm.job_state("c") == "KILLING"
    out = jm.status("h2", "c", 2, "KILLED")
    assert job_states(out) == [("KILLING", "SUCCEEDED")]  # as the controller ended
    assert jm.states("c") == ["SUCCEEDED", "KILLED", "KILLED"]


def test_the_job_ends_as_its_controller_even_when_a_worker_failed() -> None:
    jm = running_controlled_job()
    jm.status("h1", "c", 1, "FAILED", exit_code=2)
    jm.status("h2", "c", 2, "SUCCEEDED", exit_code=0)
    assert jm.job_state("c") == "RUNNING"  # by counts alone it would fail: not yet
    out = jm.status("h0", "c", 0, "SUCCEEDED", exit_code=0)
    assert job_states(out) == [("RUNNING", "SUCCEEDED")]
    assert kills(out) == []


def test_a_failed_controller_fails_the_job_and_kills_the_workers() -> None:
    jm = running_controlled_job()
    out = jm.status("h0", "c", 0, "FAILED", exit_code=1)
    assert kills(out) == [("h1", 1, 1), ("h2", 2, 1)]
    jm.status("h1", "c", 1, "KILLED")
    jm.status("h2", "c", 2, "SUCCEEDED", exit_code=0)  # it finished before the kill
    assert jm.states("c") == ["FAILED", "KILLED", "SUCCEEDED"]
    assert jm.job_state("c") == "FAILED"


def test_a_controller_failure_with_retries_left_is_retried_and_ends_nothing() -> None:
    jm = running_controlled_job(max_failures=1)
    out = jm.status("h0", "c", 0, "FAILED", exit_code=1)
    assert changes(out) == [("c", 0, 1, "RUNNING", "FAILED"), ("c", 0, 2, "INITIALIZED",
                                                                "PENDING")]
    assert kills(out) == [] and jm.job_state("c") == "RUNNING"


def test_workers_finishing_first_leave_the_job_running_until_the_controller_ends() -> None:
    jm = running_controlled_job()
    jm.status("h1", "c", 1, "SUCCEEDED", exit_code=0)
    jm.status("h2", "c", 2, "SUCCEEDED", exit_code=0)
    assert jm.job_state("c") == "RUNNING"
    jm.status("h0", "c", 0, "SUCCEEDED", exit_code=0)
    assert jm.job_state("c") == "SUCCEEDED"


def test_workers_not_on_a_host_yet_end_killed_at_once() -> None:
    jm = Jobmgr()
    jm.send("JobSubmitted", controlled("c"))
    jm.to_running("c", 0, "h0")
    out = jm.status("h0", "c", 0, "SUCCEEDED", exit_code=0)
    assert changes(out)[1:] == [("c", 1, 1, "PENDING", "KILLED"),
                                ("c", 2, 1, "PENDING", "KILLED")]
    assert kills(out) == [] and jm.job_state("c") == "SUCCEEDED"


def test_a_replayed_controller_end_is_not_carried_out_twice() -> None:
    jm = running_controlled_job()
    jm.status("h0", "c", 0, "SUCCEEDED", exit_code=0)
    assert jm.book.reconcile(jm.now + 1) == []


@pytest.mark.parametrize(("controller", "counts", "expected"), [
    (S.SUCCEEDED, {S.SUCCEEDED: 1, S.RUNNING: 2}, J.KILLING),
    (S.SUCCEEDED, {S.SUCCEEDED: 1, S.FAILED: 2}, J.SUCCEEDED),
    (S.FAILED, {S.FAILED: 1, S.SUCCEEDED: 2}, J.FAILED),
    (S.LOST, {S.LOST: 1, S.KILLED: 2}, J.FAILED),
    (S.KILLED, {S.KILLED: 1, S.SUCCEEDED: 2}, J.KILLED),
    (S.RUNNING, {S.RUNNING: 1, S.SUCCEEDED: 2}, J.RUNNING),
])
def test_derive_job_state_with_a_controller(controller: TaskState,
                                            counts: dict[TaskState, int],
                                            expected: JobState) -> None:
    assert derive_job_state(counts, 3, False, controller) is expected


# ======================================================================== revocable


REVOCABLE = """\
name: mixed
instanceCount: 3
sla: {{preemptible: {preemptible}, revocable: {job_revocable}}}
defaultConfig:
  resource: {{cpuLimit: 1}}
  command: {{value: ./work}}
instanceConfig:
  1: {{revocable: true}}
"""


def test_a_task_level_revocable_reaches_the_typed_spec() -> None:
    body = parse_job_file(REVOCABLE.format(preemptible="true", job_revocable="false"), "r", 0)
    assert body["instance_config"]["1"]["revocable"] is True
    created, problems = validate_submission(body, None, None, 0)
    assert problems == [] and created is not None
    spec = JobSpec.from_body(created)
    assert [spec.task(i).revocable for i in range(3)] == [False, True, False]
    assert not spec.revocable
    assert JobSpec.from_body(spec.to_body()) == spec  # it survives the JobCreated round trip


def test_a_revocable_task_in_a_job_that_cannot_be_preempted_is_rejected() -> None:
    body = parse_job_file(REVOCABLE.format(preemptible="false", job_revocable="false"), "r", 0)
    created, problems = validate_submission(body, None, None, 0)
    assert created is None
    assert problems == ["instanceConfig.1.revocable: revocable tasks need a preemptible job "
                        "(sla.preemptible)"]


def test_a_revocable_job_makes_every_task_revocable() -> None:
    body = parse_job_file(REVOCABLE.format(preemptible="true", job_revocable="true"), "r", 0)
    created, _ = validate_submission(body, None, None, 0)
    assert created is not None
    spec = JobSpec.from_body(created)
    assert [spec.task(i).revocable for i in range(3)] == [True, True, True]
