"""A partitioned job manager reads launches and statuses whole: each shard keeps the items
of its jobs (`JOB_ROUTE.shares`, `routing.share`), with no router hop in between.

Property: shards, each holding the jobs of its partition and each fed every launch and
status report whole (reports that list runs of many jobs, in any order, repeated), decide
together exactly what one job manager of all jobs decides, each change by the shard of
its job, and none of them decides anything about another partition's job.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from event_bodies import agent_status, launch, launch_requested
from hypothesis import given, settings
from jobmgr_driver import Jobmgr, changes

from peloton.bus.routing import partition_for, share
from peloton.jobmgr.shard import JOB_ROUTE, JobShardCore
from peloton.model.event import Event

N = JOB_ROUTE.partitions
HOST = "h1"
STATES = ("LAUNCHED", "STARTING", "RUNNING", "SUCCEEDED", "FAILED", "KILLED")


def of(job_id: str) -> int:
    return partition_for(job_id.encode(), N)


#: jobs spread over every partition (two of each)
JOBS = [j for p in range(N) for j in [f"j{i}" for i in range(200) if of(f"j{i}") == p][:2]]

items = st.tuples(st.sampled_from(JOBS), st.integers(0, 1), st.sampled_from(STATES),
                  st.integers(1, 2))
reports = st.lists(st.tuples(st.booleans(), st.lists(items, min_size=1, max_size=8)),
                   min_size=1, max_size=12)


def report(is_launch: bool, parts: list[tuple[str, int, str, int]]) -> tuple[str, dict[str, Any]]:
    if is_launch:
        return "TaskLaunchRequested", launch_requested(
            HOST, *[launch(j, i, run=r) for j, i, _s, r in parts])
    statuses = [s for j, i, state, r in parts
                for s in agent_status(HOST, j, i, state, run=r,
                                      exit_code=1 if state == "FAILED" else None)["statuses"]]
    return "TaskStatusReported", {**agent_status(HOST, "x", 0, "RUNNING"), "statuses": statuses}


def placed(jobmgr: Jobmgr, jobs: list[str]) -> None:
    """Submit `jobs` (2 tasks each) and take them to PLACED on HOST."""
    for job_id in jobs:
        jobmgr.submit(job_id, 2)
        for i in (0, 1):
            jobmgr.to_launching(job_id, i, HOST)


def shards() -> list[tuple[JobShardCore, Jobmgr]]:
    out = []
    for p in range(N):
        core = JobShardCore(partition=p)
        jobmgr = Jobmgr(core.book)
        placed(jobmgr, [j for j in JOBS if of(j) == p])
        out.append((core, jobmgr))
    return out


@settings(max_examples=60, deadline=None)
@given(reports)
def test_shards_fed_every_report_whole_decide_what_one_job_manager_decides(
        sent: list[tuple[bool, list[tuple[str, int, str, int]]]]) -> None:
    whole = Jobmgr()
    placed(whole, JOBS)
    parts = shards()
    now = whole.now
    for is_launch, listed in sent:
        etype, body = report(is_launch, listed)
        now += 10
        expected = whole.book.handle(etype, body, now)
        got: list[Event] = []
        for core, _ in parts:
            out = core.handle(etype, body, now)
            assert {e.body["job_id"] for e in out if "job_id" in e.body} <= {
                j for j in JOBS if of(j) == core.partition}
            got += out
        assert sorted(changes(got)) == sorted(changes(expected))
        assert sorted(e.type for e in got) == sorted(e.type for e in expected)
    for core, _ in parts:
        for job_id, job in core.book.jobs.items():
            assert of(job_id) == core.partition
            assert [t.state for t in job.tasks] == [
                t.state for t in whole.book.jobs[job_id].tasks]


def test_a_report_of_no_job_of_the_partition_is_nothing_to_it() -> None:
    p = of(JOBS[0])
    other = next(j for j in JOBS if of(j) != p)
    etype, body = report(False, [(other, 0, "RUNNING", 1)])
    assert share(JOB_ROUTE.shares[etype], body, p, of) is None
    core, _ = shards()[p]
    assert core.handle(etype, body, 10**6) == []
