"""The resource manager and the placement engine put in one record only jobs of one partition
of the topic they write (tasks-admitted, placement-made), so that a partitioned job
manager's shard reads its jobs' admissions and placements in its own partition. They cut by
the partition count the topic has on the broker, where the records land, not by the
catalog's setting: a topic created under another setting keeps its count
(`partitions_known`, told by the shell at its rebuild; `peloton.bus.brokercounts`). Real
broker: each core rebuilt by the real driver, its decisions published, and where every
record landed compared with its jobs' partitions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from broker_topics import create_topic
from event_bodies import job_created, offer, offer_received, task_state_changed, tasks_admitted

from peloton.bus.catalog import topic
from peloton.bus.codec import default_codec
from peloton.bus.driver import CoreDriver
from peloton.bus.faustapp import ensure_topics
from peloton.bus.publisher import Publisher
from peloton.bus.routing import partition_for
from peloton.model.event import Event
from peloton.placement.service import PlacementCore
from peloton.resmgr.service import ResourceManagerCore

pytestmark = pytest.mark.integration

JOBS = [f"job-{i}" for i in range(24)]


def _admissions(core: ResourceManagerCore) -> list[Event]:
    core.fold("OfferReceived", offer_received(*(offer(f"h{i}", cpu=8, mem=10_000.0)
                                                for i in range(8))))
    for job_id in JOBS:
        core.fold("JobCreated", job_created(job_id, 2, cpu=1, mem=10))
        core.fold("TaskStateChanged", task_state_changed(job_id, (0, "PENDING"),
                                                         (1, "PENDING"),
                                                         previous="INITIALIZED"))
    return [e for e in core.tick(0) if e.type == "TasksAdmitted"]


def _placements(core: PlacementCore) -> list[Event]:
    for job_id in JOBS:
        core.fold("JobCreated", job_created(job_id, 1, cpu=1.0))
    core.fold("OfferReceived", offer_received(*(offer(f"h{i}", cpu=4) for i in range(8))))
    for job_id in JOBS:
        core.fold("TasksAdmitted", tasks_admitted(job_id, 0))
    return [e for e in core.tick(1_000) if e.type == "PlacementMade"]


CASES: list[tuple[str, str, Callable[[], Any], Callable[[Any], list[Event]], str]] = [
    ("resmgr", "tasks-admitted", ResourceManagerCore, _admissions, "tasks"),
    ("placement", "placement-made", PlacementCore, _placements, "placements"),
]


@pytest.mark.parametrize(("name", "written", "make", "decide", "field"), CASES,
                         ids=[c[0] for c in CASES])
async def test_records_hold_only_jobs_of_the_partition_they_land_in(
        fresh_broker: str, name: str, written: str, make: Callable[[], Any],
        decide: Callable[[Any], list[Event]], field: str) -> None:
    broker_count = topic(written).partitions + 1  # created under an older setting
    await create_topic(fresh_broker, written, broker_count)
    await ensure_topics(fresh_broker)  # the others with the catalog's counts
    driver = CoreDriver(name, make(), fresh_broker, default_codec(), clock=lambda: 0)
    await driver.rebuild()
    events = decide(driver.core)
    assert sum(len(e.body[field]) for e in events) >= len(JOBS)
    publisher = Publisher(fresh_broker, default_codec())
    await publisher.start()
    try:
        delivered = await publisher.publish(events)
    finally:
        await publisher.stop()
    # more than one partition, so a cut by the catalog's count would mix them
    assert len({p for _t, p, _o in delivered}) > 1
    for event, (landed_topic, landed, _offset) in zip(events, delivered, strict=True):
        assert landed_topic == written
        jobs = {item["job_id"] for item in event.body[field]}
        assert {partition_for(j.encode(), broker_count) for j in jobs} == {landed}, jobs
