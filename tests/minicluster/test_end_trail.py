"""`endtrail`: for the ends reconciliation brought back, the last hop their first report
reached (pure steps; then the burst's diagnosis over a real broker)."""

from __future__ import annotations

import asyncio

import event_bodies as eb
import pytest
from broker_topics import commit_ends, publish_events

from peloton.bus.faustapp import ensure_topics
from peloton.minicluster.burst import BurstOutcome, stuck_diagnosis
from peloton.minicluster.endtrail import (
    GROUP,
    STEPS,
    EndTrail,
    EndTrails,
    end_trail_summary,
    step_of,
)
from peloton.minicluster.load import JobFollower

ANSWER = "exit code 0 (reported again: reconciliation)"


def test_each_step_is_the_last_hop_the_first_report_reached() -> None:
    answered = [(0, 9, 70_000)]
    assert step_of(None, routing=True) == STEPS[0]
    assert step_of(EndTrail(answered=answered), routing=True) == STEPS[0]
    reported = EndTrail(reported=[(1, 4, 10_000)], answered=answered)
    assert step_of(reported, routing=True) == STEPS[1]
    assert step_of(reported, routing=False) == STEPS[3]  # one job manager: no inbox
    routed = EndTrail(reported=[(1, 4, 10_000)], routed=[(0, 7, 10_000)], answered=answered)
    assert step_of(routed, routing=True) == STEPS[2]


def test_the_summary_gives_the_inbox_range_of_reports_routed_and_not_recorded() -> None:
    runs = {("a", 0, 1), ("b", 0, 1), ("c", 0, 1)}
    trails = {("a", 0, 1): EndTrail(reported=[(0, 3, 5)], routed=[(1, 40, 5)]),
              ("b", 0, 1): EndTrail(reported=[(0, 3, 5)], routed=[(1, 44, 5)]),
              ("c", 0, 1): EndTrail(reported=[(0, 8, 6)])}
    # the group committed past a's inbox record (p1@40), not b's (p1@44) nor c's report
    out = end_trail_summary(EndTrails(trails, True, {("jobmgr-inbox", 1): 41,
                                                     ("task-status-reported", 0): 8}), runs)
    assert out["by_step"] == {STEPS[1]: 1, STEPS[2]: 2}
    assert out["committed_past"] == {STEPS[1]: 0, STEPS[2]: 1}
    assert out["inbox_offsets"] == {"p1": "40-44 (2 reports)"}
    assert out["samples"][STEPS[1]] == [
        "c/0 run 1: reported p0@8 at 6; routed none; answered none"]


def _outcome(broker: str, jobs: tuple[str, ...]) -> BurstOutcome:
    follower = JobFollower(broker)
    follower.want({job: 1 for job in jobs})
    for job in jobs:  # the job manager recorded each end from the agent's answer
        change = eb.task_state_changed(job, (0, "SUCCEEDED"), previous="RUNNING",
                                       host="h1", at=70_000)
        change["changes"][0]["reason"] = ANSWER
        follower._fold("TaskStateChanged", change)
        follower._fold("JobStateChanged", {"job_id": job, "state": "SUCCEEDED"})
    assert not follower.pending_jobs()
    return BurstOutcome({job: 1 for job in jobs}, len(jobs), follower, 0.1, 1.0,
                        "all jobs terminal")


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_the_burst_diagnosis_says_where_each_recovered_end_was_lost(
        fresh_broker: str) -> None:
    broker = fresh_broker
    asyncio.run(ensure_topics(broker))

    def reported(job: str, message: str = "exit code 0") -> eb.Body:
        return eb.agent_status("h1", job, 0, "SUCCEEDED", message=message, at=10_000)

    asyncio.run(publish_events(broker, [
        *[("task-status-reported", "TaskStatusReported", reported(job), "h1")
          for job in ("unrouted", "routed", "unrelated")],
        ("jobmgr-inbox", "TaskStatusReported", reported("routed"), "routed"),
        *[("task-status-reported", "TaskStatusReported", reported(job, ANSWER), "h1")
          for job in ("silent", "unrouted", "routed")],
    ]))
    asyncio.run(commit_ends(broker, GROUP, "jobmgr-inbox"))  # the shards took it all
    say: list[str] = []
    found = asyncio.run(stuck_diagnosis(
        broker, _outcome(broker, ("silent", "unrouted", "routed")),
        lambda msg, _f: say.append(msg)))
    assert "stuck_diagnosis" not in found  # every job ended
    trail = found["recovered_ends_trail"]
    assert trail["by_step"] == {STEPS[0]: 1, STEPS[1]: 1, STEPS[2]: 1}
    (routed,) = trail["samples"][STEPS[2]]
    assert routed.startswith("routed/0 run 1: reported p") and "answered p" in routed
    assert list(trail["inbox_offsets"].values()) == ["0-0 (1 reports)"]
    assert trail["committed_past"] == {STEPS[1]: 0, STEPS[2]: 1}
    assert any("ends recovered by reconciliation: 3" in m for m in say)
