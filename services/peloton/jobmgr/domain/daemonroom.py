"""Room for daemons: a daemon instance that cannot fit on its host preempts batch work
there (pure). Peers do not do this yet; their users ask for it: a node agent must run on
every node, even a full one.

Contract (`make_room`, run by the job manager's tick):
- A daemon instance's run is ADMITTED (READY, holding its pool's allocation) and PINNED to
  its host, and the placement engine said it waits for that host (its reason names the
  pin). Then the job manager preempts runs on that host, chosen among BATCH runs of
  preemptible jobs that run there (RUNNING, STARTING, LAUNCHED), lowest priority first,
  then the most recently started, until their resources together cover the daemon's
  request in every dimension it asks for: whatever else is free on the host, that is
  enough. Victims end with reason PREEMPTED (DAEMON: ...) and are retried elsewhere (a
  preemption is not a failure).
- If the batch runs there cannot cover it, nothing is preempted (the daemon waits, its
  reason says why). While a run on the host is still being preempted for a daemon, no
  more are chosen there: the room comes when it ends.
- Long-running work (services, stateful, other daemons) is never taken for a daemon.
Deterministic: hosts, jobs and runs in sorted order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from peloton.jobmgr.domain import kills
from peloton.jobmgr.domain.records import Batch, JobRecord, TaskRecord
from peloton.model.resources import Resources
from peloton.model.taskstate import ENDING, TaskState
from peloton.placement.domain.pins import PINNED_WAIT

if TYPE_CHECKING:
    from peloton.jobmgr.domain.book import JobBook

__all__ = ["make_room", "DAEMON"]

S = TaskState
DAEMON = "DAEMON"
_RUNNING = frozenset({S.LAUNCHED, S.STARTING, S.RUNNING})
_DIMENSIONS = ("cpu", "memory", "disk", "gpu")


def _need(job: JobRecord, task: TaskRecord) -> Resources:
    return job.spec_of(task.config_version).task(task.instance).resources


def _covers(have: Resources, need: Resources) -> bool:
    return all(getattr(have, d) >= getattr(need, d) for d in _DIMENSIONS
               if getattr(need, d) > 0)


def _waiting(book: JobBook) -> list[tuple[JobRecord, TaskRecord]]:
    out = []
    for job_id in sorted(book.daemon_jobs):
        job = book.jobs.get(job_id)
        if job is None or job.kill_requested:
            continue
        for task in job.tasks:
            if (task.state == S.READY and task.pinned_host and not task.kill_requested
                    and PINNED_WAIT in task.reason):
                out.append((job, task))
    return out


def make_room(book: JobBook, batch: Batch) -> None:
    for job, task in _waiting(book):
        host = str(task.pinned_host)
        on_host = sorted(book.on_host.get(host, ()))
        candidates: list[tuple[int, int, str, int, Resources, int]] = []
        busy = False
        for job_id, instance in on_host:
            other = book.jobs[job_id]
            run = other.tasks[instance]
            cur = batch.pending(job_id, run)
            if cur.host != host:
                continue
            if cur.state in ENDING and DAEMON in run.reason:
                busy = True  # room is on its way
                break
            if (other.long_running or not other.spec.preemptible or run.kill_requested
                    or other.kill_requested or cur.state not in _RUNNING):
                continue
            candidates.append((other.spec.priority, -run.since, job_id, instance,
                               _need(other, run), cur.run))
        if busy:
            continue
        need, have, chosen = _need(job, task), Resources(), []
        for _, _, job_id, instance, res, run_no in sorted(candidates):
            chosen.append({"job_id": job_id, "instance": instance, "run": run_no,
                           "reason": DAEMON, "detail": f"daemon {job.job_id}/{task.instance} "
                           f"needs room on host {host}"})
            have = have + res
            if _covers(have, need):
                kills.preempt(book, batch, chosen)
                break
