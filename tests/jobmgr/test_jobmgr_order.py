"""The job manager's fold does not care about the order across topics (issue 8).

Kafka orders a partition, not the cluster: admissions (keyed by pool), placements (by
round), rejections, launch requests and agent reports (by host) about one run reach the
job manager in any order across those partitions. Named examples of the orders that hung
jobs under load, then a property: any interleaving that keeps each partition's order
(redeliveries included) folds to the same task states, and those are the states the
facts' own history ends in.
"""

from __future__ import annotations

import functools
import itertools
from collections import deque
from dataclasses import dataclass

import hypothesis.strategies as st
from event_bodies import (
    agent_status,
    job_submitted,
    launch,
    launch_requested,
    placement,
    placement_made,
    placement_rejected,
    tasks_admitted,
)
from hypothesis import HealthCheck, given, settings
from jobmgr_driver import Body, Jobmgr, changes, types

from peloton.model.event import Event
from peloton.model.taskstate import TaskState

S = TaskState
HOSTS = ("h1", "h2", "h3")
_submitted = functools.cache(job_submitted)  # the YAML round trip is the slow part


def submitted(instances: int = 1) -> Jobmgr:
    jm = Jobmgr()
    jm.submit("j", instances)
    return jm


def admit(jm: Jobmgr, instance: int = 0) -> list[str]:
    return types(jm.send("TasksAdmitted", tasks_admitted("j", instance)))


def place(jm: Jobmgr, host: str, round_: int = 1, instance: int = 0) -> list[str]:
    return types(jm.send("PlacementMade", placement_made(placement("j", instance, host),
                                                         round_=round_)))


def reject(jm: Jobmgr, host: str, round_: int = 1, instance: int = 0) -> list[str]:
    return types(jm.send("PlacementRejected",
                         placement_rejected("j", instance, host, round_=round_)))


def launched(jm: Jobmgr, host: str, instance: int = 0) -> list[str]:
    return types(jm.send("TaskLaunchRequested", launch_requested(host, launch("j", instance))))


# ==================================================================== named orders


def test_an_agent_report_read_before_the_launch_request_is_applied_not_dropped() -> None:
    jm = submitted()
    admit(jm)
    place(jm, "h1")
    out = jm.status("h1", "j", 0, "RUNNING")
    assert changes(out) == [("j", 0, 1, "PLACED", "RUNNING")]
    assert jm.job_state("j") == "RUNNING"
    assert launched(jm, "h1") == []  # the launch request is late: nothing moves back
    assert jm.states("j") == ["RUNNING"]


def test_an_agent_success_read_before_every_other_fact_ends_the_job() -> None:
    jm = submitted()
    out = jm.status("h1", "j", 0, "SUCCEEDED", exit_code=0)
    assert changes(out) == [("j", 0, 1, "PENDING", "SUCCEEDED")]
    assert jm.job_state("j") == "SUCCEEDED"
    assert admit(jm) + place(jm, "h1") + launched(jm, "h1") == []
    assert jm.states("j") == ["SUCCEEDED"] and jm.task("j", 0).host == "h1"


def _hosts(events: list[Event]) -> list[str]:
    return [c["host"] for e in events if e.type == "TaskStateChanged"
            for c in e.body["changes"]]


def test_a_launch_request_read_before_the_placement_records_the_placement_first() -> None:
    """The host manager launches only what placement placed: READY -> PLACED on the
    launch's host -> LAUNCHING, so the history names the host; the late placement is
    stale (a gang's histories lost PLACED this way under a slower fetch pacing)."""
    jm = submitted()
    admit(jm)
    out = jm.send("TaskLaunchRequested", launch_requested("h2", launch("j", 0)))
    assert changes(out) == [("j", 0, 1, "READY", "PLACED"), ("j", 0, 1, "PLACED", "LAUNCHING")]
    assert _hosts(out) == ["h2", "h2"]
    assert "placement read after LAUNCHING" in out[0].body["changes"][0]["reason"]
    assert place(jm, "h2") == []  # late: nothing moves, nothing twice
    assert jm.states("j") == ["LAUNCHING"] and jm.task("j", 0).host == "h2"


def test_an_agent_report_read_before_placement_and_launch_records_the_placement() -> None:
    jm = submitted()
    admit(jm)
    out = jm.status("h3", "j", 0, "RUNNING")
    assert changes(out) == [("j", 0, 1, "READY", "PLACED"), ("j", 0, 1, "PLACED", "RUNNING")]
    assert _hosts(out) == ["h3", "h3"]
    assert place(jm, "h3") + launched(jm, "h3") == []
    assert jm.states("j") == ["RUNNING"]


def test_a_run_not_admitted_yet_still_jumps_to_the_later_stage() -> None:
    """PENDING: the resource manager never held the run, so no PLACED is written for it."""
    jm = submitted()
    out = jm.send("TaskLaunchRequested", launch_requested("h1", launch("j", 0)))
    assert changes(out) == [("j", 0, 1, "PENDING", "LAUNCHING")]


def test_an_admission_read_after_the_placement_does_not_move_placed_back_to_ready() -> None:
    jm = submitted()
    assert changes(jm.send("PlacementMade", placement_made(placement("j", 0, "h1")))) == [
        ("j", 0, 1, "PENDING", "PLACED")]
    assert admit(jm) == []
    assert jm.states("j") == ["PLACED"]
    launched(jm, "h1")
    assert jm.states("j") == ["LAUNCHING"]


def test_a_rejection_read_before_its_placement_is_held_and_cancels_it() -> None:
    jm = submitted()
    assert reject(jm, "h1") == []  # nothing to reject yet: held, not dropped
    assert len(jm.book.held) == 1
    admit(jm)
    assert place(jm, "h1") == []  # the placement arrives already rejected
    assert place(jm, "h1") == []  # and so does its redelivery
    assert jm.states("j") == ["READY"]
    place(jm, "h2", round_=2)
    launched(jm, "h2")
    assert jm.states("j") == ["LAUNCHING"] and len(jm.book.held) == 0


def test_a_placement_of_a_newer_round_replaces_the_one_the_run_holds() -> None:
    jm = submitted()
    admit(jm)
    place(jm, "h1", round_=1)
    out = jm.send("PlacementMade", placement_made(placement("j", 0, "h2"), round_=2))
    assert changes(out) == [("j", 0, 1, "PLACED", "READY"), ("j", 0, 1, "READY", "PLACED")]
    assert (jm.task("j", 0).host, jm.task("j", 0).round) == ("h2", 2)
    assert reject(jm, "h1", round_=1) == []  # the late rejection of round 1 is stale
    assert place(jm, "h1", round_=1) == []  # so is a redelivery of round 1
    assert jm.states("j") == ["PLACED"] and jm.task("j", 0).host == "h2"


def test_a_placement_of_an_older_round_read_late_is_stale() -> None:
    jm = submitted()
    admit(jm)
    place(jm, "h2", round_=2)  # after a failover or a handover round 1 may come later
    assert place(jm, "h1", round_=1) == []
    assert reject(jm, "h1", round_=1) == []
    assert jm.states("j") == ["PLACED"] and jm.task("j", 0).host == "h2"


def test_a_rejection_of_a_newer_round_read_while_an_older_is_held_is_not_lost() -> None:
    # true history: P1(h1) R1(h1) P2(h2) R2(h2); read as P1 R2 P2 R1
    jm = submitted()
    admit(jm)
    place(jm, "h1", round_=1)
    assert reject(jm, "h2", round_=2) == []  # rejects a placement not read yet: held
    assert place(jm, "h2", round_=2) == []  # ... which arrives rejected
    assert jm.states("j") == ["PLACED"]
    assert types(jm.send("PlacementRejected", placement_rejected("j", 0, "h1", round_=1))) \
        == ["TaskStateChanged"]
    assert jm.states("j") == ["READY"]


def test_a_failure_read_before_the_launch_is_final_and_fails_the_job() -> None:
    jm = submitted()
    admit(jm)
    out = jm.status("h1", "j", 0, "FAILED", exit_code=3)
    # it failed on h1, so it was placed there: PLACED first (see the launch request above)
    assert changes(out) == [("j", 0, 1, "READY", "PLACED"), ("j", 0, 1, "PLACED", "FAILED")]
    assert place(jm, "h1") + launched(jm, "h1") == []
    assert jm.job_state("j") == "FAILED"


# ==================================================================== the property


@dataclass(frozen=True)
class Fact:
    partition: tuple[str, str]  # (topic, partition key) whose order Kafka keeps
    etype: str
    body: Body


@st.composite
def task_history(draw: st.DrawFn, job_id: str, instance: int,
                 rounds: itertools.count[int]) -> tuple[list[Fact], tuple[S, str | None]]:
    """The facts other services publish about one run, in the order they happen, and
    the state (and host) that history ends in."""
    facts = [Fact(("tasks-admitted", "/default"), "TasksAdmitted",
                  tasks_admitted(job_id, instance))]
    end: tuple[S, str | None] = (S.READY, None)
    placements = draw(st.integers(0, 3))
    for k in range(placements):
        round_, host = next(rounds), draw(st.sampled_from(HOSTS))
        # spread over queues by round (more orders than a job's one partition allows)
        facts.append(Fact(("placement-made", str(round_ % 4)), "PlacementMade",
                          placement_made(placement(job_id, instance, host), round_=round_)))
        end = (S.PLACED, host)
        if k < placements - 1 or draw(st.booleans()):  # every replaced one was rejected
            facts.append(Fact(("placement-rejected", host), "PlacementRejected",
                              placement_rejected(job_id, instance, host, round_=round_)))
            end = (S.READY, None)
    if end[0] is not S.PLACED or not draw(st.booleans()):
        return facts, end
    on = end[1]
    assert on is not None
    facts.append(Fact(("task-launch-requested", on), "TaskLaunchRequested",
                      launch_requested(on, launch(job_id, instance))))
    end = (S.LAUNCHING, on)
    reports = [s for s in ("LAUNCHED", "STARTING", "RUNNING") if draw(st.booleans())]
    ending = draw(st.sampled_from((None, "SUCCEEDED", "FAILED")))
    for state in reports + ([ending] if ending else []):
        facts.append(Fact(("task-status-reported", on), "TaskStatusReported",
                          agent_status(on, job_id, instance, state,
                                       exit_code={"SUCCEEDED": 0, "FAILED": 1}.get(state))))
        end = (S(state), on)
    return facts, end


@st.composite
def interleavings(draw: st.DrawFn) -> tuple[list[Fact], list[Fact], dict[tuple[str, int],
                                                                         tuple[S, str | None]]]:
    """(the facts in the order they happened, one order a consumer may read them in,
    the state each task's history ends in)."""
    rounds = itertools.count(1)
    happened: list[Fact] = []
    ends = {}
    for job_id in ("a", "b"):
        for instance in range(draw(st.integers(1, 3))):
            facts, end = draw(task_history(job_id, instance, rounds))
            happened += facts
            ends[(job_id, instance)] = end
    streams: dict[tuple[str, str], deque[Fact]] = {}
    for fact in happened:
        stream = streams.setdefault(fact.partition, deque())
        stream.append(fact)
        if draw(st.integers(0, 5)) == 0:  # at-least-once: a redelivery, later in order
            stream.append(fact)
    read: list[Fact] = []
    while streams:
        keys = sorted(streams)
        key = keys[draw(st.integers(0, len(keys) - 1))]
        read.append(streams[key].popleft())
        if not streams[key]:
            del streams[key]
    return happened, read, ends


def fold(facts: list[Fact], instances: dict[str, int]) -> Jobmgr:
    jm = Jobmgr()
    for job_id, n in sorted(instances.items()):
        jm.send("JobSubmitted", _submitted(job_id, n))
    for fact in facts:
        jm.send(fact.etype, fact.body)
    return jm


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(interleavings())
def test_any_cross_topic_order_folds_to_the_same_task_states(
    case: tuple[list[Fact], list[Fact], dict[tuple[str, int], tuple[S, str | None]]],
) -> None:
    happened, read, ends = case
    instances = {job_id: 1 + max(i for j, i in ends if j == job_id) for job_id, _ in ends}
    in_order, any_order = fold(happened, instances), fold(read, instances)
    for (job_id, instance), (state, host) in sorted(ends.items()):
        for jm in (in_order, any_order):
            task = jm.task(job_id, instance)
            assert (task.run, task.state, task.host) == (1, state, host), (job_id, instance)
    for job_id in instances:
        assert any_order.job_state(job_id) == in_order.job_state(job_id)
    # rejections read early are held only for runs still waiting for a placement
    waiting = {key for key, (state, _) in ends.items() if state in (S.READY, S.PLACED)}
    assert {(row[0], row[1]) for row in any_order.book.held.to_data()} <= waiting
