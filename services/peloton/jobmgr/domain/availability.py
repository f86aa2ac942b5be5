"""How many of a job's instances are not serving now, and whether a voluntary
disruption (preemption, drain, update) may take one more (pure).

An instance is unavailable when its current run is not RUNNING, or runs but is not
healthy (its health check has not passed yet, or fails); instances a user stopped do not
count, nor do instances whose previous run still serves on a draining host while their
replacement starts (`handover`). `sla.maximumUnavailableInstances` (JobCreated
`max_unavailable`, None: no limit) bounds voluntary disruptions: `may_disrupt` is False
once that many are unavailable, like a Kubernetes PodDisruptionBudget.
"""

from __future__ import annotations

from peloton.jobmgr.domain import handover
from peloton.jobmgr.domain.records import Batch, JobRecord
from peloton.model.taskstate import TaskState

__all__ = ["unavailable", "may_disrupt"]

S = TaskState


def unavailable(job: JobRecord, batch: Batch) -> int:
    count = 0
    for task in job.tasks:
        if task.kill_requested or job.kill_requested or handover.serving(task):
            continue  # stopped; or its outgoing run serves while a replacement starts
        cur = batch.pending(job.job_id, task)
        if cur.state != S.RUNNING or task.health not in ("", "HEALTHY"):
            count += 1
    return count


def may_disrupt(job: JobRecord, batch: Batch) -> bool:
    budget = job.spec.get("max_unavailable")
    return budget is None or unavailable(job, batch) < int(budget)
