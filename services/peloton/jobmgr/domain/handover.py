"""Replacement first: a service run on a draining host keeps serving until its
replacement runs healthily elsewhere (pure).

Kubernetes users have asked for this for years (a drain evicts first, then the pod is
recreated); Peloton's drainer kills first too. Here the drain planner
(`updates.domain.drain`, `replace_first`) asks for a replacement of a SERVICE run, and:

- `start` gives the instance a new run at once (PENDING, its reason starting
  `REPLACEMENT`); the run it replaces is the task's *outgoing* run (`Outgoing`: its run
  number, host and config version): it still runs on the draining host, and the rest of
  the cluster already treats it as the task's past (the resource manager and placement
  judge runs by number: a newer run supersedes it), except the host manager, which keeps
  its room on the host until its own end (so the host is not DRAINED while it runs).
- The job manager keeps the outgoing run in its book (`TaskRecord.outgoing`, indexed by
  host in `JobBook.outgoing`) until it ends: it counts as available (`availability`);
  the planner kills it (`kill`: a KILLING change of that older run plus the agent's
  TaskKillRequested) once the current run is RUNNING and healthy (`replacement_state`),
  or at the maintenance deadline; a job kill or an instance stop kills it too.
- Its end (the agent's report, or the loss of its host) is published as a change of that
  older run (`ended`), so the read model shows it KILLED and the host manager releases
  its room; the fold (`fold`) clears the outgoing run. Changes of the outgoing run never
  move the task's current run (`Batch.add_past`).
Everything is in the job manager's own TaskStateChanged events, so a replay (or a
snapshot: `Outgoing` is saved with the task) restores the same outgoing runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from peloton.jobmgr.domain.records import Batch, JobRecord, Outgoing, TaskRecord, change
from peloton.model.taskstate import ON_HOST, TERMINAL, TaskState, task_state
from peloton.updates.domain.drain import Replacement

if TYPE_CHECKING:
    from peloton.jobmgr.domain.book import JobBook

__all__ = ["REPLACEMENT", "Outgoing", "start", "kill", "ended", "fold", "replacement_state",
           "serving"]

S = TaskState
REPLACEMENT = "REPLACEMENT"


def start(job: JobRecord, task: TaskRecord, batch: Batch, host: str) -> None:
    """A new run of `task`, whose current run (on `host`, draining) keeps serving."""
    cur = batch.pending(job.job_id, task)
    batch.add(job.job_id, change(
        task.instance, cur.run + 1, S.PENDING, S.INITIALIZED,
        f"{REPLACEMENT}: run {cur.run} keeps serving on draining host {host} until this "
        "run runs healthily", None, None, cur.failures))


def serving(task: TaskRecord) -> bool:
    """The task's outgoing run still serves (it runs and no kill of it was decided)."""
    return task.outgoing is not None and not task.outgoing.ending


def replacement_state(job: JobRecord, task: TaskRecord, batch: Batch) -> Replacement:
    """How far the replacement of `task`'s outgoing run is: HEALTHY once the current run
    is RUNNING and has passed its health check (RUNNING is enough without a check)."""
    cur = batch.pending(job.job_id, task)
    if cur.state != S.RUNNING or cur.run != task.run:
        return Replacement.STARTING
    healthy = task.health == "HEALTHY" if job.health_checked(task) else task.health in (
        "", "HEALTHY")
    return Replacement.HEALTHY if healthy else Replacement.STARTING


def kill(job: JobRecord, task: TaskRecord, batch: Batch, reason: str) -> None:
    """Stop the outgoing run (once per decision: its KILLING change marks it ending)."""
    out = task.outgoing
    if out is None or out.ending or batch.past_decided(job.job_id, task.instance, out.run):
        return
    batch.add_past(job.job_id, change(task.instance, out.run, S.KILLING, S.RUNNING, reason,
                                      out.host, None, 0) | {
        "config_version": out.config_version})
    grace = job.spec_of(out.config_version).task(task.instance).kill_grace_period_s
    batch.kill(out.host, job.job_id, task.instance, out.run, grace, reason)


def ended(job: JobRecord, task: TaskRecord, batch: Batch, run: int, state: TaskState,
          reason: str, exit_code: int | None) -> bool:
    """A fact that run `run` ended `state`: if it is the outgoing run, record its end
    (True); else False (the caller judges it as a fact about the current run)."""
    out = task.outgoing
    if out is None or out.run != run or state not in TERMINAL:
        return False
    if not batch.past_decided(job.job_id, task.instance, run, final=True):
        if state == S.KILLED and not out.ending:
            state, reason = S.FAILED, reason or "killed outside the scheduler"
        batch.add_past(job.job_id, change(
            task.instance, run, state, S.KILLING if out.ending else S.RUNNING,
            reason, out.host, exit_code, 0) | {"config_version": out.config_version})
    return True


def fold(book: JobBook, job: JobRecord, task: TaskRecord, ch: dict[str, Any]) -> bool:
    """Fold one change: the start of a replacement (the current run becomes outgoing) or
    a change of the outgoing run (True: nothing else of the task moves)."""
    out = task.outgoing
    if out is not None and ch["run"] == out.run < task.run:
        state = task_state(ch["state"])
        if state == S.KILLING:
            out.ending = True
        elif state in TERMINAL:
            task.outgoing = None
            book.outgoing.get(out.host, {}).pop((job.job_id, task.instance), None)
        return True
    if (ch["run"] > task.run and ch["reason"].startswith(REPLACEMENT)
            and task.state in ON_HOST and task.host and task.outgoing is None):
        task.outgoing = Outgoing(task.run, task.host, task.config_version)
        book.outgoing.setdefault(task.host, {})[(job.job_id, task.instance)] = None
    return False
