"""`stuckreport.diagnose` on a real broker: it reads job-events and task-status-reported
again and says, per stuck run of a follower, which side lost its end."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from broker_topics import publish_events

from peloton.bus.faustapp import ensure_topics
from peloton.minicluster.load import JobFollower, RunHistory
from peloton.minicluster.stuckreport import CLASSES, diagnose

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]



def _change(state: str, previous: str, host: str) -> dict[str, Any]:
    return {"instance": 0, "run": 1, "state": state, "previous_state": previous,
            "reason": "", "host": host, "exit_code": None, "failures": 0,
            "not_before_ms": None, "round": 1, "pinned_host": None, "config_version": 1}


def _status(job: str, state: str) -> dict[str, Any]:
    return {"job_id": job, "instance": 0, "run": 1, "state": state, "exit_code": None,
            "message": "", "sandbox": "", "health": ""}


def _records() -> list[tuple[str, str, dict[str, Any], str]]:
    out: list[tuple[str, str, dict[str, Any], str]] = []
    for job, states in (("missed", ("RUNNING", "SUCCEEDED")), ("dropped", ("RUNNING",)),
                        ("silent", ("RUNNING",))):
        for at, (state, prev) in enumerate(zip(states, ("LAUNCHED", *states[:-1]),
                                               strict=True)):
            out.append(("job-events", "TaskStateChanged", {
                "job_id": job, "at": 10 + at, "changes": [_change(state, prev, "h1")],
                "more": []}, job))
    for job, states in (("missed", ("RUNNING", "SUCCEEDED")),
                        ("dropped", ("RUNNING", "SUCCEEDED")), ("silent", ("RUNNING",))):
        out.append(("task-status-reported", "TaskStatusReported", {
            "host": "h1", "incarnation": "i1", "at": 11,
            "statuses": [_status(job, s) for s in states]}, "h1"))
    return out


def test_each_stuck_run_is_put_on_the_side_that_lost_its_end(
        fresh_broker: str) -> None:
    broker = fresh_broker
    asyncio.run(ensure_topics(broker))
    asyncio.run(publish_events(broker, _records()))
    # a follower that saw every run RUNNING and no end (it missed "missed"'s end)
    follower = JobFollower(broker)
    follower.want({"missed": 1, "dropped": 1, "silent": 1})
    for job in ("missed", "dropped", "silent"):
        follower.runs[(job, 0, 1)] = RunHistory([(10, "RUNNING", "h1")])
    found = asyncio.run(diagnose(broker, follower))
    assert found["stuck_runs"] == 3
    assert found["by_class"] == {CLASSES[0]: 1, CLASSES[1]: 1, CLASSES[2]: 1}
    assert found["samples"][CLASSES[0]] == [
        "missed/0 run 1 on h1: job manager RUNNING, agent SUCCEEDED"]
    assert found["samples"][CLASSES[1]] == [
        "dropped/0 run 1 on h1: job manager RUNNING, agent SUCCEEDED"]
    assert found["samples"][CLASSES[2]] == [
        "silent/0 run 1 on h1: job manager RUNNING, agent RUNNING"]
    assert found["top_hosts"] == {"h1": 3}
