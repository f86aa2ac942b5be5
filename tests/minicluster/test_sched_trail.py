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
    assert step_of(None, routing=True) == STEPS[0]
    assert step_of(Trail(admitted=1), routing=True) == STEPS[1]
    placed = Trail(admitted=1, placed=[(5, "h1", 0)])
    assert step_of(placed, routing=True) == STEPS[2]
    assert step_of(placed, routing=False) == STEPS[3]  # one host manager: nothing routed
    assert step_of(Trail(admitted=1, placed=[(5, "h1", 0)], routed={5}),
                   routing=True) == STEPS[3]
    assert step_of(Trail(admitted=1, placed=[(5, "h1", 0)], routed={5}, rejected={5}),
                   routing=True) == STEPS[4]
    # placed again after a rejection: the newest placement is what counts
    again = Trail(admitted=2, placed=[(5, "h1", 0), (9, "h2", 1)], routed={5, 9},
                  rejected={5})
    assert step_of(again, routing=True) == STEPS[3]
    assert step_of(Trail(admitted=1, placed=[(5, "h1", 0)], launched=1),
                   routing=True) == STEPS[5]


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_diagnose_says_where_each_unlaunched_run_stopped(fresh_broker: str) -> None:
    broker = fresh_broker
    asyncio.run(ensure_topics(broker))
    made = {job: eb.placement_made(eb.placement(job, 0, "h1"), round_=7)
            for job in ("silent", "unrouted", "rejected", "launched")}
    asyncio.run(publish_events(broker, [
        *[("tasks-admitted", "TasksAdmitted", eb.tasks_admitted(job, 0), job)
          for job in ("waiting", "silent", "unrouted", "rejected", "launched")],
        *[("placement-made", "PlacementMade", made[job], "7") for job in made],
        *[("hostmgr-inbox", "PlacementMade", made[job], "h1")
          for job in ("silent", "rejected", "launched")],
        ("placement-rejected", "PlacementRejected",
         eb.placement_rejected("rejected", 0, "h1", round_=7), "rejected"),
        ("task-launch-requested", "TaskLaunchRequested",
         eb.launch_requested("h1", eb.launch("launched", 0, round_=7)), "h1"),
    ]))
    jobs = ("never", "waiting", "silent", "unrouted", "rejected", "launched")
    follower = JobFollower(broker)
    follower.want({job: 1 for job in jobs})
    for job in jobs:  # the job manager's newest states, as the follower saw them
        state = "PENDING" if job in ("never", "waiting") else "PLACED"
        follower.runs[(job, 0, 1)] = RunHistory([(10, state, "h1")])
    asyncio.run(commit_ends(broker, GROUP, "hostmgr-inbox"))  # the shards took it all
    found = asyncio.run(diagnose(broker, follower))
    assert found["by_class"] == {CLASSES[4]: 6}
    trail = found["not_launched_trail"]
    assert trail["by_step"] == {step: 1 for step in STEPS}
    # "silent"'s part was taken (committed past), "unrouted"'s placement never was
    assert trail["committed_past"] == {STEPS[2]: 0, STEPS[3]: 1}
    (unrouted,) = trail["samples"][STEPS[2]]
    assert unrouted.startswith("unrouted/0 run 1: admitted 1x; round 7 on h1")
