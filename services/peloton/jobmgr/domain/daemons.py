"""DAEMON jobs in the job manager: one instance on every UP host that matches (pure).

`place_daemons` runs the daemon rule (`updates.domain.daemons.plan_daemons`) for every
live daemon job over the hosts the host manager reports present (`HostTable`):
- a host that needs an instance gets a NEW instance id (the job's next free id: ids are
  never reused, so an instance's history stays its own), whose first run starts PENDING
  pinned to that host (`pinned_host`): the placement engine puts it there and nowhere
  else, and its restarts stay pinned (`restarts`);
- an instance whose host left, is DRAINED or DOWN, or no longer matches is killed for
  good (a user-stopped instance, it is not restarted), with the rule's reason;
- instances on DRAINING hosts stay: the drain stops them last (`drains`).
A DAEMON job is created with no instance (its JobCreated says instanceCount 0): its
instances appear as TaskStateChanged changes of new ids, which every fold accepts.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from peloton.jobmgr.domain import kills
from peloton.jobmgr.domain.records import Batch, JobRecord, change
from peloton.model.constraint import HardConstraint, parse_constraint, split_constraint
from peloton.model.spec import JobType
from peloton.model.taskstate import TaskState
from peloton.updates.domain.daemons import DaemonHost, DaemonInstance, plan_daemons

if TYPE_CHECKING:
    from peloton.jobmgr.domain.book import JobBook

__all__ = ["place_daemons", "is_daemon"]

S = TaskState


def is_daemon(job: JobRecord) -> bool:
    return job.spec.type == JobType.DAEMON


def _constraint(job: JobRecord) -> HardConstraint | None:
    raw = job.spec.default_task.constraint_json
    return split_constraint(parse_constraint(json.loads(raw)))[0] if raw else None


def place_daemons(book: JobBook, batch: Batch, job_ids: list[str] | None = None) -> None:
    if not (book.daemon_jobs if job_ids is None else job_ids):
        return  # no daemon job: no host list to build (a host event costs O(1), not O(hosts))
    hosts = [DaemonHost(v.name, v.labels, v.state)
             for _, v in sorted(book.hosts.views.items()) if v.present]
    for job_id in sorted(book.daemon_jobs if job_ids is None else job_ids):
        job = book.jobs.get(job_id)
        if job is None or job.kill_requested or job_id in book.ended:
            continue
        live = [DaemonInstance(t.instance, t.pinned_host) for t in job.tasks
                if not t.kill_requested and t.pinned_host is not None]
        plan = plan_daemons(hosts, _constraint(job), live)
        next_id = len(job.tasks) + len(
            {c["instance"] for c in batch.changes.get(job_id, ())
             if c["instance"] >= len(job.tasks)})
        for inst in plan.place:
            batch.add(job_id, change(next_id, 1, S.PENDING, S.INITIALIZED,
                                     f"daemon instance for host {inst.host}", None, None, 0,
                                     pinned_host=inst.host))
            next_id += 1
        for inst in plan.retire:
            kills.carry_out(book, job, [inst.instance], batch,
                            f"daemon instance retired: {plan.reasons[inst.instance]}")
