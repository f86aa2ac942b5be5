"""The job manager over a real broker: an agent's report of a run's end whose decision the
broker refused for now (a timeout) still ends the run and its job. Agents' reports are
read live only (not replayed), so nothing but deciding the record again brings that end
back: before, the record was dead-lettered and passed, and the job stayed RUNNING."""

from __future__ import annotations

from typing import Any

import pytest
from event_bodies import (
    agent_status,
    entitlement_updated,
    job_submitted,
    launch,
    launch_requested,
    placement,
    placement_made,
    tasks_admitted,
)
from shell_core import produce, read_topic, refusing

from peloton.bus import driver as driver_module
from peloton.bus.codec import default_codec
from peloton.bus.driver import CoreDriver
from peloton.bus.faustapp import ensure_topics
from peloton.bus.keys import record_key
from peloton.jobmgr.service import JobManagerCore

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

CODEC = default_codec()
JOB, HOST = "refused-1", "host-1"


async def _feed(driver: CoreDriver, broker: str, topic: str, etype: str,
                body: dict[str, Any]) -> int:
    """Write the fact to its topic, then hand the driver that record as read back."""
    value = CODEC.encode(etype, body)
    await produce(broker, [(topic, record_key(etype, body), value)])
    rec = next((topic, p, o, k, v) for p, o, k, v in await read_topic(broker, topic)
               if v == value)
    return await driver.on_records([rec], {topic: [etype]})


async def _job_states(broker: str) -> list[str]:
    return [body["state"] for _, _, _, v in await read_topic(broker, "job-events")
            for etype, body in CODEC.decode_each(v)
            if etype == "JobStateChanged" and body["job_id"] == JOB]


async def test_an_end_report_refused_for_now_still_ends_its_job(
        fresh_broker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver_module, "REFUSED_RETRY_S", 0.01)
    broker = fresh_broker
    await ensure_topics(broker)
    driver = CoreDriver("jobmgr", JobManagerCore(), broker, CODEC, snapshots=False)
    await driver.rebuild()
    await driver.start_live()
    try:
        await _feed(driver, broker, "entitlement-updated", "EntitlementUpdated",
                    entitlement_updated({"/default": None}, at=1))
        await _feed(driver, broker, "job-submitted", "JobSubmitted",
                    job_submitted(JOB, 1, at=2))
        await _feed(driver, broker, "tasks-admitted", "TasksAdmitted",
                    tasks_admitted(JOB, 0, at=3))
        await _feed(driver, broker, "placement-made", "PlacementMade",
                    placement_made(placement(JOB, 0, HOST), at=4))
        await _feed(driver, broker, "task-launch-requested", "TaskLaunchRequested",
                    launch_requested(HOST, launch(JOB, 0), at=5))
        await _feed(driver, broker, "task-status-reported", "TaskStatusReported",
                    agent_status(HOST, JOB, 0, "RUNNING", at=6))
        assert await _job_states(broker) == ["RUNNING"]
        # the end's decision refused once; the broker takes it the second time
        refused = refusing(driver, "RequestTimedOutError: simulated", retriable=True)
        assert await _feed(driver, broker, "task-status-reported", "TaskStatusReported",
                           agent_status(HOST, JOB, 0, "SUCCEEDED", exit_code=0, at=7)) == 1
        await driver.flush_recovery()
        assert refused == [1]
        assert await _job_states(broker) == ["RUNNING", "SUCCEEDED"]
        assert await read_topic(broker, "dead-letters") == []
    finally:
        await driver.stop()
