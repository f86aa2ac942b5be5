"""Ending runs on purpose: kills, a controller task's end, and preemption (pure).

- `carry_out`: a kill intent (JobKillRequested) ends the named tasks' runs. A run that may
  have a process on its host goes KILLING and its agent is asked to kill it (grace period
  from the task spec); a run not on a host yet ends KILLED at once (a PLACED one's host is
  told too, so a launch already under way never starts it). Runs ending already are left.
- `controllers`: when a job's controller task (instance 0) has ended for good, its other
  tasks are killed (the job is KILLING meanwhile) and, once all have ended, the job ends
  as the controller did (`states.derive_job_state`, Peloton's rule).
- `preempt` (TasksPreempted from the resource manager): running victims
  (`VICTIMS & ON_HOST`) go PREEMPTING and their agents are asked to kill them; once
  KILLED, the run ends with a PREEMPTED reason and a new run starts PENDING. Victims not
  on a host yet (`VICTIMS & QUEUED`) end KILLED and a new run starts PENDING at once.
  Preemption is never counted as a failure. Stale runs, runs in other states (PLACED,
  LAUNCHING) and tasks being killed are left alone; the resource manager chooses again.
  So is a running instance of a long-running job whose `sla.maximumUnavailableInstances`
  is used up (`availability.may_disrupt`): preemption honours the job's SLA as drains
  and updates do (they count the budget themselves: `SLA_BUDGETED`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from peloton.jobmgr.domain import handover
from peloton.jobmgr.domain.availability import may_disrupt
from peloton.jobmgr.domain.records import Batch, JobRecord, change
from peloton.jobmgr.domain.retries import PREEMPTED, requeued
from peloton.model.taskstate import ENDING, ON_HOST, QUEUED, TERMINAL, VICTIMS, TaskState

if TYPE_CHECKING:
    from peloton.jobmgr.domain.book import JobBook

__all__ = ["carry_out", "controllers", "preempt", "KILL_REASON", "CONTROLLER_ENDED"]

S = TaskState
KILL_REASON = "kill requested"
CONTROLLER_ENDED = "controller task ended"
_VICTIMS_ON_HOST = VICTIMS & ON_HOST
#: Preemptions whose caller already counted the job's SLA budget (drains, updates).
SLA_BUDGETED = frozenset({"HOST_MAINTENANCE", "UPDATE"})
_VICTIMS_QUEUED = VICTIMS & QUEUED


def carry_out(book: JobBook, job: JobRecord, instances: Sequence[int] | range | None,
              batch: Batch, reason: str = KILL_REASON) -> None:
    for i in range(len(job.tasks)) if instances is None else instances:
        if not 0 <= i < len(job.tasks):
            continue
        task = job.tasks[i]
        task.kill_requested = True
        handover.kill(job, task, batch, reason)  # a run a drain replaces goes too
        cur = batch.pending(job.job_id, task)
        if cur.state in TERMINAL or cur.state in ENDING:
            continue  # ending already; a preempted run ends KILLED, not re-queued
        grace = job.spec.task(i).kill_grace_period_s
        if cur.state in ON_HOST and cur.host:
            book.emit(batch, job, task, S.KILLING, cur, reason, None, None)
            batch.kill(cur.host, job.job_id, i, cur.run, grace, reason)
        else:
            book.emit(batch, job, task, S.KILLED, cur, reason, None, None)
            if cur.state == S.PLACED and cur.host:
                # the host manager may launch it before it sees the kill: the agent
                # remembers killed runs and never starts them
                batch.kill(cur.host, job.job_id, i, cur.run, 0.0, reason)


def controllers(book: JobBook, job_ids: Iterable[str], batch: Batch) -> None:
    """Kill the other tasks of jobs whose controller task ended (idempotent)."""
    for job_id in job_ids:
        job = book.jobs.get(job_id)
        if job is None:
            continue
        n = len(job.tasks)
        if sum(job.counts[s] for s in TERMINAL | ENDING) < n:
            carry_out(book, job, range(1, n), batch, CONTROLLER_ENDED)


def preempt(book: JobBook, batch: Batch, victims: Iterable[dict[str, Any]]) -> None:
    for ref in victims:
        job = book.jobs.get(ref["job_id"])
        if job is None or not 0 <= ref["instance"] < len(job.tasks):
            continue
        task = job.tasks[ref["instance"]]
        cur = batch.pending(job.job_id, task)
        if cur.run != ref["run"] or task.kill_requested or job.kill_requested:
            continue
        reason = f"{PREEMPTED} ({ref['reason']}: {ref['detail']})"
        if (ref["reason"] not in SLA_BUDGETED and job.long_running
                and cur.state in _VICTIMS_ON_HOST and not may_disrupt(job, batch)):
            continue  # its SLA allows no more instances down: the resmgr chooses again
        if cur.state in _VICTIMS_ON_HOST and cur.host:
            book.emit(batch, job, task, S.PREEMPTING, cur, reason, None, None)
            grace = job.spec.task(task.instance).kill_grace_period_s
            batch.kill(cur.host, job.job_id, task.instance, cur.run, grace, reason)
        elif cur.state in _VICTIMS_QUEUED:
            batch.add(job.job_id, change(task.instance, cur.run, S.KILLED, cur.state, reason,
                                         cur.host, None, cur.failures))
            batch.add(job.job_id, requeued(task.instance, cur.run, reason, cur.failures))
