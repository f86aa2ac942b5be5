"""Moving runs off hosts in maintenance, within every job's SLA (pure).

For each DRAINING host (`HostTable`), the runs the job manager has on it (the book's
host index, and the runs drains replace there: `handover`) and each of their jobs'
budgets (`sla.maximumUnavailableInstances`, and how many of the job's instances are
unavailable now: not RUNNING, or RUNNING but not healthy; instances a user stopped do not
count) go to the drain planner (`updates.domain.drain`, replacement first):
- a SERVICE run gets a replacement elsewhere first (`handover.start`); the old run is
  killed once the replacement runs healthily (`handover.kill`), so the instance keeps
  serving; at most max(1, maximumUnavailableInstances) replacements of a job start at
  once on the host;
- batch and stateful runs are killed within the job's budget, as a preemption with
  reason HOST_MAINTENANCE (Peloton's drainer does the same): the run goes PREEMPTING, its
  agent is told, and once it has ended the instance gets a new run (a batch task is
  retried, a stateful instance waits for its host to come back, `restarts`);
- daemons stop last; a passed deadline kills whatever is left.

`drain_hosts` returns a HostDrainProgressed body per draining host whose account
changed (what this step moved, why the rest waits); the job manager publishes it, so the
API and `peloton host list` can say why a drain is not finished.
The host manager, not this module, decides that a host with no runs left is DRAINED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from peloton.jobmgr.domain import handover, kills
from peloton.jobmgr.domain.availability import unavailable
from peloton.jobmgr.domain.records import Batch
from peloton.model.taskstate import ENDING, ON_HOST, TaskState
from peloton.updates.domain.drain import DrainActionKind, HostRun, JobBudget, plan_drain

if TYPE_CHECKING:
    from peloton.jobmgr.domain.book import JobBook

__all__ = ["drain_hosts", "HOST_MAINTENANCE"]

S = TaskState
HOST_MAINTENANCE = "HOST_MAINTENANCE"


def drain_hosts(book: JobBook, batch: Batch, now_ms: int) -> list[dict[str, Any]]:
    progress: list[dict[str, Any]] = []
    down: dict[str, int] = {}  # job -> instances unavailable, counted once per call
    for view in book.hosts.draining():
        runs: list[HostRun] = []
        budgets: dict[str, JobBudget] = {}
        refs: dict[tuple[str, int], int] = {}
        outgoing = set(book.outgoing.get(view.name, ()))
        for job_id, instance in sorted(set(book.on_host.get(view.name, ())) | outgoing):
            job = book.jobs[job_id]
            task = job.tasks[instance]
            out = task.outgoing
            if (job_id, instance) in outgoing and out is not None:
                runs.append(HostRun(job_id, instance, job.spec.type,
                                    handover.replacement_state(job, task, batch),
                                    ending=out.ending))
            else:
                cur = batch.pending(job_id, task)
                if cur.host != view.name or cur.state not in ON_HOST:
                    continue
                runs.append(HostRun(job_id, instance, job.spec.type,
                                    ending=cur.state in ENDING or cur.state == S.LAUNCHING))
                refs[(job_id, instance)] = cur.run
            if job_id not in budgets:
                if job_id not in down:
                    down[job_id] = unavailable(job, batch)
                budgets[job_id] = JobBudget(job.spec.get("max_unavailable"), down[job_id])
        plan = plan_drain(view.name, runs, budgets, now_ms, view.deadline_ms)
        preempted = []
        for a in plan.actions:
            job = book.jobs[a.job_id]
            task = job.tasks[a.instance]
            why = f"host {view.name} is draining; {a.reason}"
            if a.kind is DrainActionKind.START_REPLACEMENT:
                handover.start(job, task, batch, view.name)
            elif (a.job_id, a.instance) in outgoing:
                handover.kill(job, task, batch, f"{HOST_MAINTENANCE}: {why}")
            else:
                preempted.append({"job_id": a.job_id, "instance": a.instance,
                                  "run": refs[(a.job_id, a.instance)],
                                  "reason": HOST_MAINTENANCE, "detail": why})
                if a.job_id in down:  # each kill takes one more instance of its job down
                    down[a.job_id] += 1
        kills.preempt(book, batch, preempted)
        moved = [f"{a.job_id}/{a.instance}: {a.reason}" for a in plan.actions]
        if moved or book.drain_reasons.get(view.name) != plan.reason:
            progress.append({"host": view.name, "at": now_ms, "reason": plan.reason,
                             "waiting": list(plan.waiting), "moved": moved})
    return progress
