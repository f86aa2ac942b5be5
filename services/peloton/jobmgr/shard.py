"""The job manager partitioned by job id: one `JobShardCore` per partition, and its route.

Partitioned mode (issue 10): the job manager runs as N instances of one consumer group.
Its own topics (job-submitted, job-kill-requested, job-update-requested, job-events,
which it alone writes; tasks-admitted and placement-made, whose records the resource
manager and the placement engines key by job and fill with one partition's jobs) are keyed
by job id and co-partitioned, so partition p of each holds the facts of the same jobs.
An instance runs one `JobShardCore` per partition it owns: the same book and decisions as
the single job manager (`JobManagerCore`), restricted to the jobs of that partition. Its
inputs:
- partition p of the own topics and of the inbox `jobmgr-inbox`, where the job router
  (`JOB_ROUTE`, `peloton.bus.routing.RouterCore`) puts the share of partition p of every
  other service's facts (the host manager's rejections and launches, agents' statuses,
  lost hosts' runs, preemptions), split by job;
- the few facts every partition needs, read whole: entitlement-updated (the pools) and
  host-events (host states for daemons and drains).
Its replay (rebuild) is partition p of the requests and its own facts (job-submitted,
job-kill-requested, job-update-requested, job-events) plus those two, and its snapshot
covers exactly those positions, so a partition moves between instances as a restart
moves a whole job manager: restore the partition's snapshot, fold the tail, decide what
was left undecided (`after_replay`), consume from the group's committed offsets.

One difference from the single job manager: several partitions account for one drain.
Each publishes its own HostDrainProgressed (what it moved on the host, why its jobs' runs
wait); a partition ignores the accounts read from host-events (they may be another
partition's: folding them would make two partitions answer each other for ever) and knows
only its own (kept in its snapshot; after a full replay it says its account once again).
"""

from __future__ import annotations

from typing import Any

from peloton.bus.routing import Route, Split, item_field
from peloton.jobmgr.service import JobManagerCore
from peloton.model.event import Event
from peloton.model.ids import parse_run_id

__all__ = ["JOB_ROUTE", "JobShardCore"]


def _run_job(rid: Any) -> str:
    """The job of a run id (an unreadable one keys on itself: the job manager skips it)."""
    try:
        return parse_run_id(str(rid))[0]
    except ValueError:
        return str(rid)


JOB_ROUTE = Route(
    service="jobmgr",
    inbox="jobmgr-inbox",
    own=("job-submitted", "job-kill-requested", "job-update-requested", "job-events",
         "tasks-admitted", "placement-made"),
    splits={
        "PlacementRejected": Split("rejections", item_field("job_id")),
        "TaskLaunchRequested": Split("launches", item_field("job_id")),
        "TaskStatusReported": Split("statuses", item_field("job_id")),
        "HostLost": Split("runs", _run_job),
        "TasksPreempted": Split("tasks", item_field("job_id")),
    },
    ignored=JobManagerCore.ignores,
)

_OTHERS_ACCOUNT = "HostDrainProgressed"


class JobShardCore(JobManagerCore):
    """The job manager's core for the jobs of one partition (see the module doc)."""

    inputs: tuple[str, ...] = (
        "job-submitted", "job-kill-requested", "job-update-requested", "tasks-admitted",
        "placement-made", "jobmgr-inbox", "entitlement-updated", "host-events")
    replay: tuple[str, ...] = (
        "job-submitted", "job-kill-requested", "job-events", "entitlement-updated",
        "host-events", "job-update-requested")

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        if etype != _OTHERS_ACCOUNT:
            super().fold(etype, body)

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        if etype == _OTHERS_ACCOUNT:
            return []
        return super().handle(etype, body, now)
