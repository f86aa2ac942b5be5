"""Why pending, in the API: every waiting task's structured reason and a job's summary.

Contract:
- A task (GET /v1/jobs/{id}/tasks[/{instance}]) carries `pending`: null unless it waits
  (PENDING, READY, PLACING), else `{code, detail, text, permanent}` from
  peloton.readmodel.pending.classify over what the read model shows, with the numbers of
  the job's pool from the newest entitlement cycle, the maintenance state of a host a
  pinned run waits for, and the live hosts' capacities (a task no host can hold is
  NO_HOST_FITS, permanent, at whatever stage it waits).
- A job (GET /v1/jobs/{id}) carries `pending`: null unless some task waits, else the
  summary of its waiting tasks by code (`summarize`) plus `queue_position` (1-based, among
  the jobs of its pool with PENDING tasks, in the resource manager's admission order:
  priority, then JobCreated time, then id; null when none of its tasks is PENDING, i.e.
  all are admitted and wait for placement) and `queue_length`.
- `permanent: true` means the job can never be admitted or placed as configured (see
  readmodel/pending.py); `peloton job create --wait` stops on it.
Everything here is a read: sync functions over the Store, called in a worker thread.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from peloton.readmodel.pending import WAITING_STATES, classify, queue_position, summarize
from peloton.readmodel.store import Store

__all__ = ["PendingReason", "PendingGroup", "JobPending", "annotate_tasks", "job_pending"]


class PendingReason(BaseModel):
    code: str = Field(description="POOL_OVER_ENTITLEMENT, NON_PREEMPTIBLE_BEYOND_RESERVATION,"
                      " NO_HOST_FITS, GANG_INCOMPLETE, WAITING_FOR_HOST_MAINTENANCE, ..., "
                      "UNKNOWN (see peloton.readmodel.pending)")
    detail: dict[str, Any] = Field(description="the numbers behind the code")
    text: str = Field(description="the reason as the services worded it")
    permanent: bool = Field(description="can never be admitted or placed as configured")


class PendingGroup(PendingReason):
    instances: list[int]


class JobPending(BaseModel):
    waiting: int = Field(description="tasks waiting (PENDING, READY, PLACING)")
    by_code: dict[str, int]
    reasons: list[PendingGroup] = Field(description="distinct reasons, most common first "
                                        "(at most 10)")
    permanent: bool = Field(description="some task can never be admitted as configured")
    queue_position: int | None = Field(description="1-based place of the job in its pool's "
                                       "admission queue; null: no task awaits admission")
    queue_length: int = Field(description="jobs of the pool with tasks awaiting admission")


def _pool_row(store: Store, pool: str) -> dict[str, Any] | None:
    return next((p for p in store.pools() if p["pool"] == pool), None)


def annotate_tasks(store: Store, job: dict[str, Any], tasks: list[dict[str, Any]]
                   ) -> list[dict[str, Any]]:
    """Set each task's `pending` (in place) and return the tasks."""
    waiting = [t for t in tasks if t["state"] in WAITING_STATES]
    for t in tasks:
        t["pending"] = None
    if not waiting:
        return tasks
    pool = _pool_row(store, str(job["respool"]))
    live = [h for h in store.hosts() if h["state"] != "LOST"]
    hosts = {str(h["host"]): h for h in live}
    capacities = [h["capacity"] for h in live]
    for t in waiting:
        t["pending"] = classify(t, pool=pool, hosts=hosts, needs=_needs(job, t["instance"]),
                                capacities=capacities)
    return tasks


def _needs(job: dict[str, Any], instance: int) -> dict[str, float] | None:
    """An instance's resources from the job's config (None when the config has none)."""
    config = job.get("config") or {}
    task = ((config.get("instance_tasks") or {}).get(str(instance))
            or config.get("default_task") or {})
    res = task.get("resources")
    return {str(k): float(v) for k, v in res.items()} if isinstance(res, dict) else None


def job_pending(store: Store, job: dict[str, Any]) -> dict[str, Any]:
    """The job with its `pending` summary (None when no task waits)."""
    counts = job.get("task_counts") or {}
    job["pending"] = None
    if not any(counts.get(s, 0) for s in WAITING_STATES):
        return job
    tasks = annotate_tasks(store, job, store.tasks_of_job(str(job["job_id"])))
    summary = summarize(tasks)
    position, length = (None, 0)
    if counts.get("PENDING", 0):
        position, length = queue_position(str(job["job_id"]),
                                          store.queued_jobs(str(job["respool"])))
    job["pending"] = {**summary, "queue_position": position, "queue_length": length}
    return job
