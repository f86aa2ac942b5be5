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
  (`JOB_ROUTE`, `peloton.bus.routing.RouterCore`) puts the share of partition p of the
  host manager's rejections, lost hosts' runs and the resource manager's preemptions,
  split by job;
- the host manager's launches (task-launch-requested) and the agents' statuses
  (task-status-reported), read whole: each partition keeps the items of its jobs
  (`JOB_ROUTE.shares`, `routing.share`), so an agent's report of a run's start or end
  reaches the shard that records it without a router hop (a consume, a publish, a
  consume: measured in docs/performance.md, "Launches and statuses read whole"). Until
  session 35 the router split them onto the inbox; parts it wrote before an upgrade are
  still read there (the book takes a fact about a run once);
- the few facts every partition needs, read whole: entitlement-updated (the pools) and
  host-events (host states for daemons and drains).
Its replay (rebuild) is partition p of the requests and its own facts (job-submitted,
job-kill-requested, job-update-requested, job-events) plus those two, and its snapshot
covers exactly those positions, so a partition moves between instances as a restart
moves a whole job manager: restore the partition's snapshot, fold the tail, decide what
was left undecided (`after_replay`), consume from the group's committed offsets. The
launches and statuses have no group offset (every shard reads them whole): their
positions are in the snapshot too, and the rebuild handles their records again from
there (`rehandle`, `peloton.bus.rehandle`): what the last owner decided of them is in
job-events, folded, and the book makes nothing of it twice; what it had not published
is decided then.

One difference from the single job manager: several partitions account for one drain.
Each publishes its own HostDrainProgressed (what it moved on the host, why its jobs' runs
wait); a partition ignores the accounts read from host-events (they may be another
partition's: folding them would make two partitions answer each other for ever) and knows
only its own (kept in its snapshot; after a full replay it says its account once again).
"""

from __future__ import annotations

from typing import Any

from peloton.bus.routing import Route, Split, item_field, partition_of, taken
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
        "HostLost": Split("runs", _run_job),
        "TasksPreempted": Split("tasks", item_field("job_id")),
    },
    ignored=JobManagerCore.ignores,
    shares={"TaskLaunchRequested": Split("launches", item_field("job_id")),
            "TaskStatusReported": Split("statuses", item_field("job_id"))},
)
#: the partition of a job (the inbox's count, as the router splits: `route.partitions`)
_PARTITION_OF = partition_of(JOB_ROUTE.inbox or JOB_ROUTE.own[0])

_OTHERS_ACCOUNT = "HostDrainProgressed"


class JobShardCore(JobManagerCore):
    """The job manager's core for the jobs of one partition (see the module doc)."""

    inputs: tuple[str, ...] = (
        "job-submitted", "job-kill-requested", "job-update-requested", "tasks-admitted",
        "placement-made", "jobmgr-inbox", "entitlement-updated", "host-events",
        "task-launch-requested", "task-status-reported")
    #: read whole with no group offset: handled again at a rebuild from the snapshot's
    #: positions (module doc)
    rehandle: tuple[str, ...] = ("task-launch-requested", "task-status-reported")
    replay: tuple[str, ...] = (
        "job-submitted", "job-kill-requested", "job-events", "entitlement-updated",
        "host-events", "job-update-requested")

    def __init__(self, *args: Any, partition: int, **kwargs: Any) -> None:
        """The core of partition `partition` (`JobManagerCore`'s options before it)."""
        super().__init__(*args, **kwargs)
        self.partition = partition

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        if etype != _OTHERS_ACCOUNT:
            super().fold(etype, body)

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        if etype == _OTHERS_ACCOUNT:
            return []
        # launches and statuses are read whole: the items of this partition's jobs
        if (mine := taken(JOB_ROUTE, etype, body, self.partition, _PARTITION_OF)) is None:
            return []
        return super().handle(etype, mine, now)
