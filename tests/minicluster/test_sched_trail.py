"""`schedtrail`: the step a stuck, never launched run reached, from the scheduling topics
read again (pure steps; then `diagnose` over a real broker)."""

from __future__ import annotations

import asyncio

import event_bodies as eb
import pytest
from broker_topics import commit_ends, publish_events

from peloton.bus.faustapp import ensure_topics
from peloton.minicluster.load import JobFollower, RunHistory
from peloton.minicluster.schedtrail import GROUP, STEPS, Trail, step_of
from peloton.minicluster.stuckreport import CLASSES, diagnose


def test_each_step_is_the_last_one_the_trail_shows() -> None:
    assert step_of(None) == STEPS[0]
    assert step_of(Trail(admitted=1)) == STEPS[1]
    assert step_of(Trail(admitted=1, placed=[(5, "h1", 0)])) == STEPS[2]
    assert step_of(Trail(admitted=1, placed=[(5, "h1", 0)], rejected={5})) == STEPS[3]
    # placed again after a rejection: the newest placement is what counts
    again = Trail(admitted=2, placed=[(5, "h1", 0), (9, "h2", 1)], rejected={5})
    assert step_of(again) == STEPS[2]
    assert step_of(Trail(admitted=1, placed=[(5, "h1", 0)], launched=1)) == STEPS[4]


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_diagnose_says_where_each_unlaunched_run_stopped(fresh_broker: str) -> None:
    broker = fresh_broker
    asyncio.run(ensure_topics(broker))
    made = {job: eb.placement_made(eb.placement(job, 0, "h1"), round_=7)
            for job in ("taken", "untaken", "rejected", "launched", "routed")}
    asyncio.run(publish_events(broker, [
        *[("tasks-admitted", "TasksAdmitted", eb.tasks_admitted(job, 0), job)
          for job in ("waiting", *made)],
        *[("placement-made", "PlacementMade", made[job], job)
          for job in ("taken", "rejected", "launched", "routed")],
        # an old router's part (before session 32), the host manager took it
        ("hostmgr-inbox", "PlacementMade", made["routed"], "h1"),
        ("placement-rejected", "PlacementRejected",
         eb.placement_rejected("rejected", 0, "h1", round_=7), "rejected"),
        ("task-launch-requested", "TaskLaunchRequested",
         eb.launch_requested("h1", eb.launch("launched", 0, round_=7)), "h1"),
    ]))
    # the host manager took everything written so far (one host manager: placement-made)
    asyncio.run(commit_ends(broker, GROUP, "placement-made"))
    asyncio.run(commit_ends(broker, GROUP, "hostmgr-inbox"))
    asyncio.run(publish_events(broker, [  # placed after: never taken
        ("placement-made", "PlacementMade", made["untaken"], "untaken")]))
    jobs = ("never", "waiting", *made)
    follower = JobFollower(broker)
    follower.want({job: 1 for job in jobs})
    for job in jobs:  # the job manager's newest states, as the follower saw them
        state = "PENDING" if job in ("never", "waiting") else "PLACED"
        follower.runs[(job, 0, 1)] = RunHistory([(10, state, "h1")])
    found = asyncio.run(diagnose(broker, follower))
    assert found["by_class"] == {CLASSES[4]: 7}
    trail = found["not_launched_trail"]
    assert trail["by_step"] == {STEPS[0]: 1, STEPS[1]: 1, STEPS[2]: 3, STEPS[3]: 1,
                                STEPS[4]: 1}
    # "taken" and "routed" were taken (committed past), "untaken"'s placement never was
    assert trail["committed_past"] == {STEPS[2]: 2}
    assert any(s.startswith("untaken/0 run 1: admitted 1x; round 7 on h1")
               for s in trail["samples"][STEPS[2]])
