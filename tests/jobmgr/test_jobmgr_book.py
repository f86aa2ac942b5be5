"""JobBook: named scenarios driven through handle(), and hypothesis properties.

Properties, over random interleavings of plausible inputs (admissions, placements,
rejections, launches, agent statuses including duplicates, stale and out-of-order ones,
host losses, kills, re-deliveries, reconciles):
(a) every TaskStateChanged is a legal transition of TRANSITIONS from the task's actual
    previous state, and a new run starts from INITIALIZED after the old run ended;
(b) folding the public inputs and every emitted event into a fresh book with apply()
    rebuilds the live book, and folding them twice changes nothing;
(c) the same inputs give the same outputs;
(d) a job's task counts always sum to its instance count and match its tasks.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import asdict
from typing import Any

import pytest
from event_bodies import (
    agent_status,
    entitlement_updated,
    host_lost,
    job_kill_requested,
    job_submitted,
    launch,
    launch_requested,
    placement,
    placement_failed,
    placement_made,
    placement_rejected,
    tasks_admitted,
    tasks_preempted,
)
from hypothesis import HealthCheck, given, settings
from jobmgr_driver import RECONCILE, Body, Jobmgr, changes, job_states, types
from jobmgr_inputs import STEP_KINDS, Input, input_streams

from peloton.jobmgr.domain.book import SYSTEM_RETRIES, JobBook
from peloton.jobmgr.domain.states import TERMINAL, TaskState, can_transition
from peloton.jobmgr.domain.validation import validate_submission
from peloton.model.event import Event

# =============================================================== named scenarios


def test_submission_creates_the_job_with_pending_tasks() -> None:
    jm = Jobmgr()
    sub = job_submitted("j1", 3, max_failures=2)
    out = jm.send("JobSubmitted", sub)
    assert types(out) == ["JobCreated", "TaskStateChanged"]
    created, problems = validate_submission(sub, None, None, jm.now)
    assert problems == [] and out[0].body == created and out[0].key == "j1"
    assert changes(out) == [("j1", i, 1, "INITIALIZED", "PENDING") for i in range(3)]
    assert jm.states("j1") == ["PENDING"] * 3 and jm.job_state("j1") == "PENDING"


def test_admission_makes_the_admitted_tasks_ready() -> None:
    jm = Jobmgr()
    jm.submit("j1", 3)
    out = jm.send("TasksAdmitted", tasks_admitted("j1", 0, 2))
    assert changes(out) == [("j1", 0, 1, "PENDING", "READY"), ("j1", 2, 1, "PENDING", "READY")]
    assert jm.states("j1") == ["READY", "PENDING", "READY"]
    assert job_states(out) == []


def test_placement_makes_the_task_placed_on_its_host() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1)
    jm.send("TasksAdmitted", tasks_admitted("j1", 0))
    out = jm.send("PlacementMade", placement_made(placement("j1", 0, "h1")))
    assert changes(out) == [("j1", 0, 1, "READY", "PLACED")]
    assert jm.task("j1", 0).host == "h1"


def test_launch_request_makes_the_task_launching() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1)
    jm.send("TasksAdmitted", tasks_admitted("j1", 0))
    jm.send("PlacementMade", placement_made(placement("j1", 0, "h1")))
    out = jm.send("TaskLaunchRequested", launch_requested("h1", launch("j1", 0)))
    assert changes(out) == [("j1", 0, 1, "PLACED", "LAUNCHING")]


def test_agent_statuses_run_the_job_to_success() -> None:
    jm = Jobmgr()
    jm.submit("j1", 2)
    for i in range(2):
        jm.to_launching("j1", i, "h1")
    assert changes(jm.status("h1", "j1", 0, "STARTING")) == [
        ("j1", 0, 1, "LAUNCHING", "STARTING")]
    out = jm.status("h1", "j1", 0, "RUNNING")
    assert changes(out) == [("j1", 0, 1, "STARTING", "RUNNING")]
    assert job_states(out) == [("PENDING", "RUNNING")]
    jm.status("h1", "j1", 1, "RUNNING")
    assert job_states(jm.status("h1", "j1", 0, "SUCCEEDED", exit_code=0)) == []
    out = jm.status("h1", "j1", 1, "SUCCEEDED", exit_code=0)
    assert changes(out) == [("j1", 1, 1, "RUNNING", "SUCCEEDED")]
    assert job_states(out) == [("RUNNING", "SUCCEEDED")]
    assert out[-1].body["task_counts"] == {"SUCCEEDED": 2}
    assert jm.task("j1", 1).exit_code == 0


def test_a_failing_task_is_retried_up_to_max_failures_then_the_job_fails() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1, max_failures=2)
    for run in (1, 2):
        jm.to_running("j1", 0, "h1", run=run)
        out = jm.status("h1", "j1", 0, "FAILED", run=run, exit_code=3, message="boom")
        assert changes(out) == [("j1", 0, run, "RUNNING", "FAILED"),
                                ("j1", 0, run + 1, "INITIALIZED", "PENDING")]
        change = out[0].body["changes"]
        assert change[0]["failures"] == run and change[0]["exit_code"] == 3
        assert change[1]["reason"] == f"retry after failed run {run}: boom"
        assert jm.task("j1", 0).run == run + 1 and jm.states("j1") == ["PENDING"]
    jm.to_running("j1", 0, "h1", run=3)
    out = jm.status("h1", "j1", 0, "FAILED", run=3, exit_code=3)
    assert changes(out) == [("j1", 0, 3, "RUNNING", "FAILED")]
    assert job_states(out) == [("RUNNING", "FAILED")]
    assert jm.task("j1", 0).failures == 3


def test_without_max_failures_a_failure_is_final() -> None:
    jm = Jobmgr()
    jm.submit("j1", 2)
    jm.to_running("j1", 0, "h1")
    out = jm.status("h1", "j1", 0, "FAILED", exit_code=1)
    assert changes(out) == [("j1", 0, 1, "RUNNING", "FAILED")]
    # instance 1 has not ended, and no task runs: Peloton's rule 6
    assert job_states(out) == [("RUNNING", "PENDING")]


def test_a_lost_host_loses_its_tasks_and_retries_them_as_new_runs() -> None:
    jm = Jobmgr()
    jm.submit("j1", 3)
    jm.to_running("j1", 0, "h1")
    jm.to_launching("j1", 1, "h2")
    jm.send("TasksAdmitted", tasks_admitted("j1", 2))
    out = jm.send("HostLost", host_lost("h1", reason="no heartbeat", runs=["j1-0-1"]))
    assert changes(out) == [("j1", 0, 1, "RUNNING", "LOST"),
                            ("j1", 0, 2, "INITIALIZED", "PENDING")]
    assert out[0].body["changes"][0]["reason"] == "host h1 lost: no heartbeat"
    assert jm.states("j1") == ["PENDING", "LAUNCHING", "READY"]
    assert jm.task("j1", 0).host is None and jm.task("j1", 0).failures == 1


def test_a_lost_host_loses_placed_runs_only_when_they_were_launched_there() -> None:
    """HostLost lists the runs the host manager launched on that incarnation; a run only
    PLACED there is rejected back by the host manager instead."""
    jm = Jobmgr()
    jm.submit("j1", 2)
    jm.send("TasksAdmitted", tasks_admitted("j1", 0))
    jm.send("TasksAdmitted", tasks_admitted("j1", 1))
    jm.send("PlacementMade", placement_made(placement("j1", 0, "h1")))
    jm.send("PlacementMade", placement_made(placement("j1", 1, "h1")))
    out = jm.send("HostLost", host_lost("h1", runs=["j1-0-1"]))
    assert changes(out)[0] == ("j1", 0, 1, "PLACED", "LOST")
    assert jm.states("j1")[1] == "PLACED"


def test_lost_runs_are_retried_at_least_system_retries_times() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1, max_failures=0)
    for run in range(1, SYSTEM_RETRIES + 1):
        jm.to_running("j1", 0, "h1", run=run)
        out = jm.send("HostLost", host_lost("h1", runs=[f"j1-0-{run}"]))
        assert changes(out) == [("j1", 0, run, "RUNNING", "LOST"),
                                ("j1", 0, run + 1, "INITIALIZED", "PENDING")]
    last = SYSTEM_RETRIES + 1
    jm.to_running("j1", 0, "h1", run=last)
    out = jm.send("HostLost", host_lost("h1", runs=[f"j1-0-{last}"]))
    assert changes(out) == [("j1", 0, last, "RUNNING", "LOST")]
    assert job_states(out) == [("RUNNING", "FAILED")]


def test_a_lost_host_completes_kills_under_way_there() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1, max_failures=3)
    jm.to_running("j1", 0, "h1")
    jm.send("JobKillRequested", job_kill_requested("j1"))
    out = jm.send("HostLost", host_lost("h1", runs=["j1-0-1"]))
    assert changes(out) == [("j1", 0, 1, "KILLING", "KILLED")]
    assert job_states(out) == [("KILLING", "KILLED")]


def test_a_lost_host_leaves_other_hosts_and_unplaced_tasks_alone() -> None:
    jm = Jobmgr()
    jm.submit("j1", 3)
    jm.to_running("j1", 0, "h2")
    jm.send("TasksAdmitted", tasks_admitted("j1", 1))
    assert jm.send("HostLost", host_lost("h1")) == []


def test_kill_job_kills_unlaunched_tasks_directly_and_asks_agents_for_the_rest() -> None:
    jm = Jobmgr()
    jm.submit("j1", 4, max_failures=3, grace_s=3)
    jm.send("TasksAdmitted", tasks_admitted("j1", 1))
    jm.to_running("j1", 2, "h2")
    jm.to_launching("j1", 3, "h1")
    out = jm.send("JobKillRequested", job_kill_requested("j1", reason="done"))
    assert changes(out) == [("j1", 0, 1, "PENDING", "KILLED"), ("j1", 1, 1, "READY", "KILLED"),
                            ("j1", 2, 1, "RUNNING", "KILLING"),
                            ("j1", 3, 1, "LAUNCHING", "KILLING")]
    assert job_states(out) == [("RUNNING", "KILLING")]
    kills = [e for e in out if e.type == "TaskKillRequested"]
    assert [(e.key, e.body["host"]) for e in kills] == [("h1", "h1"), ("h2", "h2")]
    assert kills[0].body["kills"] == [{"job_id": "j1", "instance": 3, "run": 1,
                                       "grace_period_s": 3.0, "reason": "kill requested"}]
    assert [k["instance"] for k in kills[1].body["kills"]] == [2]
    assert changes(jm.status("h2", "j1", 2, "KILLED")) == [("j1", 2, 1, "KILLING", "KILLED")]
    out = jm.status("h1", "j1", 3, "KILLED")
    assert changes(out) == [("j1", 3, 1, "KILLING", "KILLED")]  # no retry after a kill
    assert job_states(out) == [("KILLING", "KILLED")]
    assert jm.send(RECONCILE) == []


def test_a_task_that_finishes_while_being_killed_keeps_its_outcome() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1, max_failures=3)
    jm.to_running("j1", 0, "h1")
    jm.send("JobKillRequested", job_kill_requested("j1"))
    out = jm.status("h1", "j1", 0, "FAILED", exit_code=1)
    assert changes(out) == [("j1", 0, 1, "KILLING", "FAILED")]  # and no retry
    assert job_states(out) == [("KILLING", "FAILED")]


def test_kill_some_instances() -> None:
    jm = Jobmgr()
    jm.submit("j1", 3, max_failures=2)
    for i in range(3):
        jm.to_running("j1", i, "h1")
    out = jm.send("JobKillRequested", job_kill_requested("j1", 1))
    assert changes(out) == [("j1", 1, 1, "RUNNING", "KILLING")]
    assert job_states(out) == []  # the job is not being killed, one instance is
    assert [k["instance"] for e in out if e.type == "TaskKillRequested"
            for k in e.body["kills"]] == [1]
    assert changes(jm.status("h1", "j1", 1, "KILLED")) == [("j1", 1, 1, "KILLING", "KILLED")]
    jm.status("h1", "j1", 0, "SUCCEEDED", exit_code=0)
    out = jm.status("h1", "j1", 2, "SUCCEEDED", exit_code=0)
    assert job_states(out) == [("RUNNING", "KILLED")]  # some killed, all ended


def test_a_kill_before_the_job_exists_is_carried_out_when_it_is_created() -> None:
    jm = Jobmgr()
    assert jm.send("JobKillRequested", job_kill_requested("j1")) == []
    out = jm.submit("j1", 2)
    assert types(out)[0] == "JobCreated"
    assert changes(out) == [("j1", 0, 1, "INITIALIZED", "PENDING"),
                            ("j1", 1, 1, "INITIALIZED", "PENDING"),
                            ("j1", 0, 1, "PENDING", "KILLED"), ("j1", 1, 1, "PENDING", "KILLED")]
    assert jm.job_state("j1") == "KILLED"


def test_an_agent_kill_nobody_asked_for_is_a_failure() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1, max_failures=1)
    jm.to_running("j1", 0, "h1")
    out = jm.status("h1", "j1", 0, "KILLED")
    assert changes(out) == [("j1", 0, 1, "RUNNING", "FAILED"),
                            ("j1", 0, 2, "INITIALIZED", "PENDING")]
    assert out[0].body["changes"][0]["reason"] == "killed outside the scheduler"


def test_an_invalid_submission_is_rejected_with_every_reason() -> None:
    jm = Jobmgr()
    out = jm.send("JobSubmitted", job_submitted("j1", 2, cpu=0, min_running=5))
    assert types(out) == ["JobRejected"]
    assert out[0].body["reasons"] == [
        "sla.minimumRunningInstances: must be 1..instanceCount (2), got 5",
        "defaultConfig.resource.cpuLimit: must be > 0 (got 0.0)"]
    assert "j1" not in jm.book.jobs and jm.book.rejected["j1"] == out[0].body["reasons"]
    assert jm.send("JobSubmitted", job_submitted("j1", 2)) == []  # the id is taken


def test_pools_are_checked_once_the_resource_manager_has_published_them() -> None:
    jm = Jobmgr()
    assert jm.send("EntitlementUpdated",
                   entitlement_updated({"/": None, "/default": "/", "/a": "/"})) == []
    out = jm.send("JobSubmitted", job_submitted("j1", 1, respool="/nope"))
    assert out[0].body["reasons"] == ["respool: resource pool /nope does not exist"]
    out = jm.send("JobSubmitted", job_submitted("j2", 1, respool="/"))
    assert out[0].body["reasons"] == ["respool: / has child pools; jobs go to leaf pools"]
    assert types(jm.send("JobSubmitted", job_submitted("j3", 1, respool="/a")))[0] == "JobCreated"


def test_placement_rejection_sends_the_task_back_to_ready() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1)
    jm.send("TasksAdmitted", tasks_admitted("j1", 0))
    jm.send("PlacementMade", placement_made(placement("j1", 0, "h1")))
    out = jm.send("PlacementRejected", placement_rejected("j1", 0, "h1", reason="host gone"))
    assert changes(out) == [("j1", 0, 1, "PLACED", "READY")]
    assert out[0].body["changes"][0]["reason"] == "placement rejected: host gone"


def test_placement_failure_only_notes_the_reason() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1)
    jm.send("TasksAdmitted", tasks_admitted("j1", 0))
    assert jm.send("PlacementFailed", placement_failed("j1", 0, reason="no room")) == []
    assert jm.task("j1", 0).reason == "no room" and jm.states("j1") == ["READY"]


LIFECYCLE: list[tuple[str, Body]] = [
    ("JobSubmitted", job_submitted("j1", 2)),
    ("TasksAdmitted", tasks_admitted("j1", 0, 1)),
    ("PlacementMade", placement_made(placement("j1", 0, "h1"), placement("j1", 1, "h2"))),
    ("TaskLaunchRequested", launch_requested("h1", launch("j1", 0))),
    ("TaskStatusReported", agent_status("h1", "j1", 0, "STARTING")),
    ("TaskStatusReported", agent_status("h1", "j1", 0, "RUNNING")),
    ("JobKillRequested", job_kill_requested("j1", 0)),
    ("TaskStatusReported", agent_status("h1", "j1", 0, "KILLED")),
    ("TaskLaunchRequested", launch_requested("h2", launch("j1", 1))),
    ("TaskStatusReported", agent_status("h2", "j1", 1, "RUNNING")),
    ("TaskStatusReported", agent_status("h2", "j1", 1, "SUCCEEDED", exit_code=0)),
]


@pytest.mark.parametrize("step", range(len(LIFECYCLE)), ids=[e for e, _ in LIFECYCLE])
def test_a_duplicate_delivery_is_a_no_op(step: int) -> None:
    jm = Jobmgr()
    for etype, body in LIFECYCLE[:step + 1]:
        first = jm.send(etype, body)
    assert first  # every step of the lifecycle does something the first time
    before = snapshot(jm.book)
    etype, body = LIFECYCLE[step]
    assert jm.send(etype, body) == []
    assert snapshot(jm.book) == before


def test_reports_about_an_older_run_are_ignored() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1, max_failures=1)
    jm.to_running("j1", 0, "h1")
    jm.status("h1", "j1", 0, "FAILED", exit_code=1)
    assert jm.task("j1", 0).run == 2
    before = snapshot(jm.book)
    stale = [
        ("TasksAdmitted", tasks_admitted("j1", 0, run=1)),
        ("PlacementMade", placement_made(placement("j1", 0, "h1", run=1))),
        ("PlacementRejected", placement_rejected("j1", 0, "h1", run=1)),
        ("TaskLaunchRequested", launch_requested("h1", launch("j1", 0, run=1))),
        ("TaskStatusReported", agent_status("h1", "j1", 0, "RUNNING", run=1)),
        ("TaskStatusReported", agent_status("h1", "j1", 0, "SUCCEEDED", run=1)),
        ("TaskStatusReported", agent_status("h1", "j1", 0, "RUNNING", run=3)),  # not yet
    ]
    for etype, body in stale:
        assert jm.send(etype, body) == [], etype
    assert snapshot(jm.book) == before


def test_out_of_order_agent_reports_never_move_a_task_backwards() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1)
    jm.to_running("j1", 0, "h1")
    assert jm.status("h1", "j1", 0, "STARTING") == []
    assert jm.status("h1", "j1", 0, "LAUNCHED") == []
    assert jm.send("TaskLaunchRequested", launch_requested("h1", launch("j1", 0))) == []
    assert jm.states("j1") == ["RUNNING"]


def test_reports_for_unknown_jobs_and_instances_are_ignored() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1)
    assert jm.send("TasksAdmitted", tasks_admitted("nope", 0)) == []
    assert jm.send("TasksAdmitted", tasks_admitted("j1", 5)) == []
    assert jm.status("h1", "j1", 7, "RUNNING") == []


def test_reconcile_is_quiet_when_the_book_is_consistent() -> None:
    jm = Jobmgr()
    jm.submit("j1", 2)
    jm.to_running("j1", 0, "h1")
    jm.send("JobKillRequested", job_kill_requested("j1", 0))
    assert jm.send(RECONCILE) == []
    assert jm.send(RECONCILE) == []


def test_reconcile_decides_what_a_crash_left_undecided() -> None:
    book = JobBook()
    book.apply("JobSubmitted", job_submitted("j1", 1))
    book.apply("JobSubmitted", job_submitted("bad", 1, cpu=0))
    out = book.reconcile(100)
    assert types(out) == ["JobRejected", "JobCreated", "TaskStateChanged"]
    book.apply("JobKillRequested", job_kill_requested("j1"))
    assert changes(book.reconcile(200)) == [("j1", 0, 1, "PENDING", "KILLED")]
    assert book.reconcile(300) == []


# ======================================================================== bugs


def test_an_agent_kill_report_that_overtakes_the_launch_is_a_legal_transition() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1, max_failures=1)
    jm.send("TasksAdmitted", tasks_admitted("j1", 0))
    jm.send("PlacementMade", placement_made(placement("j1", 0, "h1")))
    # the agent got TaskLaunchRequested, the process was killed (e.g. OOM) and its report
    # reaches jobmgr before the TaskLaunchRequested record does (different topics)
    out = jm.status("h1", "j1", 0, "KILLED")
    for _, _, _, previous, state in changes(out):
        if previous != "INITIALIZED":
            assert can_transition(TaskState(previous), TaskState(state)), (previous, state)


def test_a_kill_reaches_a_run_whose_launch_was_already_under_way() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1)
    jm.send("TasksAdmitted", tasks_admitted("j1", 0))
    jm.send("PlacementMade", placement_made(placement("j1", 0, "h1")))
    out = jm.send("JobKillRequested", job_kill_requested("j1"))
    out += jm.send("TaskLaunchRequested", launch_requested("h1", launch("j1", 0)))
    out += jm.status("h1", "j1", 0, "RUNNING")
    out += jm.send(RECONCILE)
    kills = [(e.body["host"], k["job_id"], k["instance"], k["run"])
             for e in out if e.type == "TaskKillRequested" for k in e.body["kills"]]
    assert ("h1", "j1", 0, 1) in kills


def test_losing_an_old_incarnation_spares_tasks_on_the_new_one() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1)
    jm.send("TasksAdmitted", tasks_admitted("j1", 0))
    jm.send("PlacementMade", placement_made(placement("j1", 0, "h1", incarnation="inc-2")))
    out = jm.send("HostLost", host_lost("h1", incarnation="inc-1", runs=[],
                                        reason="agent restarted (new incarnation)"))
    assert changes(out) == []


def test_replay_with_the_kill_record_first_rebuilds_a_killing_job() -> None:
    jm = Jobmgr()
    jm.submit("j1", 2)
    jm.to_running("j1", 0, "h1")
    jm.to_running("j1", 1, "h1")
    jm.send("JobKillRequested", job_kill_requested("j1"))
    assert jm.job_state("j1") == "KILLING"
    kill = [(t, b) for t, b in jm.log if t == "JobKillRequested"]
    rebuilt = JobBook()
    for etype, body in kill + [(t, b) for t, b in jm.log if t != "JobKillRequested"]:
        rebuilt.apply(etype, copy.deepcopy(body))
    report = agent_status("h1", "j1", 0, "KILLED")
    live_out = jm.book.handle("TaskStatusReported", copy.deepcopy(report), 1000)
    rebuilt_out = rebuilt.handle("TaskStatusReported", copy.deepcopy(report), 1000)
    assert [(e.type, e.body) for e in rebuilt_out] == [(e.type, e.body) for e in live_out]
    assert rebuilt.jobs["j1"].state.value == "KILLING"


def test_a_whole_job_kill_always_shows_the_job_killing() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1)
    jm.to_running("j1", 0, "h1")
    jm.send("JobKillRequested", job_kill_requested("j1", 0))
    jm.send("JobKillRequested", job_kill_requested("j1"))
    assert jm.job_state("j1") == "KILLING"


def test_killing_a_job_while_a_task_is_being_preempted_asks_the_agent_once() -> None:
    jm = Jobmgr()
    jm.submit("j1", 1)
    jm.to_running("j1", 0, "h1")
    assert changes(jm.send("TasksPreempted", tasks_preempted("j1", 0)))[0][3:] == (
        "RUNNING", "PREEMPTING")
    jm.send("JobKillRequested", job_kill_requested("j1"))
    assert jm.send(RECONCILE) == []
    assert jm.job_state("j1") == "KILLING"


# ================================================================== properties

def run_inputs(inputs: list[Input]) -> tuple[Jobmgr, list[list[Event]]]:
    jm = Jobmgr()
    outputs = [jm.send(etype, body) for etype, body in inputs]
    return jm, outputs


def snapshot(book: JobBook) -> dict[str, Any]:
    """The jobs, their tasks and the rejected submissions, as plain comparable data."""
    jobs = {}
    for job_id, job in sorted(book.jobs.items()):
        jobs[job_id] = {"state": job.state, "kill_requested": job.kill_requested,
                        "counts": +job.counts, "spec": job.spec,
                        "tasks": [asdict(t) for t in job.tasks]}
    return {"jobs": jobs, "rejected": dict(book.rejected)}


PROPERTY = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPERTY
@given(input_streams())
def test_every_task_change_is_a_legal_transition(inputs: list[Input]) -> None:
    jm, outputs = run_inputs(inputs)
    current: dict[tuple[str, int], tuple[int, TaskState]] = {}
    for out in outputs:
        for ev in out:
            if ev.type == "JobCreated":
                for i in range(ev.body["instance_count"]):
                    current[(ev.body["job_id"], i)] = (1, TaskState.INITIALIZED)
            if ev.type != "TaskStateChanged":
                continue
            for ch in ev.body["changes"]:
                key = (ev.body["job_id"], ch["instance"])
                run, state = current[key]
                previous, target = TaskState(ch["previous_state"]), TaskState(ch["state"])
                if ch["run"] == run:
                    assert previous is state, (key, ch)
                    assert can_transition(previous, target), (key, ch)
                else:
                    assert ch["run"] == run + 1 and state in TERMINAL, (key, ch)
                    assert (previous, target) == (TaskState.INITIALIZED, TaskState.PENDING)
                current[key] = (ch["run"], target)


@PROPERTY
@given(input_streams(kinds=tuple(k for k in STEP_KINDS if k != "placement_failed")))
def test_replaying_the_log_rebuilds_the_book(inputs: list[Input]) -> None:
    # PlacementFailed is left out: jobmgr keeps its reason without an event of its own,
    # so a replay does not see it (a display detail, reported separately).
    jm, _ = run_inputs(inputs)
    live = snapshot(jm.book)
    once, twice, doubled = JobBook(), JobBook(), JobBook()
    for etype, body in jm.log:
        once.apply(etype, copy.deepcopy(body))
        doubled.apply(etype, copy.deepcopy(body))
        doubled.apply(etype, copy.deepcopy(body))
    for etype, body in jm.log + jm.log:
        twice.apply(etype, copy.deepcopy(body))
    assert snapshot(once) == live
    assert snapshot(doubled) == live
    assert snapshot(twice) == live
    # a new leader that replayed the log decides exactly what the old one would
    decided = [(e.type, e.body) for e in once.reconcile(jm.now + 1)]
    assert decided == [(e.type, e.body) for e in jm.book.reconcile(jm.now + 1)]


@PROPERTY
@given(input_streams())
def test_same_inputs_same_outputs(inputs: list[Input]) -> None:
    first = [[(e.type, e.key, e.body) for e in out] for out in run_inputs(inputs)[1]]
    second = [[(e.type, e.key, e.body) for e in out] for out in run_inputs(inputs)[1]]
    assert first == second


@PROPERTY
@given(input_streams())
def test_job_counts_always_sum_to_the_instance_count(inputs: list[Input]) -> None:
    jm = Jobmgr()
    for etype, body in inputs:
        out = jm.send(etype, body)
        for job in jm.book.jobs.values():
            n = job.spec.instance_count
            assert len(job.tasks) == n
            assert sum(job.counts.values()) == n and min(job.counts.values()) >= 0
            assert +job.counts == Counter(t.state for t in job.tasks)
        for ev in out:
            if ev.type == "JobStateChanged":
                counts = ev.body["task_counts"]
                assert sum(counts.values()) == jm.book.jobs[ev.key].spec.instance_count
                assert all(v > 0 for v in counts.values())
