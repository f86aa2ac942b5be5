"""Starting stopped long-running work again (JobStartRequested), pure.

Contract:
- Instances of SERVICE and STATEFUL jobs that were stopped (`job stop`, whole or
  `--instances`: each instance's own kill) start again. Once every instance is stopped the
  job is STOPPED (`all_stopped`), a state that is not terminal: the other services keep
  the job, so a start needs nothing but new runs. A job that was killed (`job kill`: the
  job's kill) has ENDED (KILLED) and does not start again: the other services forget an
  ended job (their retention), so it is submitted again. A start of anything else changes
  no run (the API refuses it with the reason).
- The fold (`apply_start`) withdraws the job's kill intents for the started instances (a
  whole-job start withdraws them all), clears their "killed for good" marks and the job's,
  and records the start's event time. Kills and starts of a job share one partition
  (job-kill-requested), so a replay folds them in their order.
- The decision (`carry_out`) gives every started instance whose run has ended for good
  (KILLED by the stop) a new run, PENDING at once, its reason starting `STARTED`; a run
  that ended after the start, or is still on its way out, is left to the usual rules. A
  DAEMON job's instances follow its hosts (the daemon rule), so a start changes none.
- The fold of a `STARTED` new run clears the task's kill mark unless a kill newer than
  that run's decision was read (event times), so replaying the job's kill/start topic and
  its job-events in any interleaving gives the same book.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from peloton.jobmgr.domain.records import Batch, JobRecord, change
from peloton.model.spec import JobType
from peloton.model.taskstate import TERMINAL, TaskState

if TYPE_CHECKING:
    from peloton.jobmgr.domain.book import JobBook

__all__ = ["STARTED", "all_stopped", "apply_start", "carry_out", "startable"]

S = TaskState
STARTED = "STARTED"


def all_stopped(job: JobRecord) -> bool:
    """Every instance of a SERVICE/STATEFUL job is stopped by its own kill (a whole `job
    stop`, or stops of each instance): once none runs the job is STOPPED, not ended (a job
    kill ends it). Stops at the first instance still wanted."""
    if not startable(job) or job.spec.type == JobType.DAEMON or job.kill_requested:
        return False
    return all(t.kill_requested for t in job.tasks)


def startable(job: JobRecord | None) -> bool:
    return job is not None and job.long_running


def _chosen(job: JobRecord, instances: list[int]) -> list[int]:
    return [i for i in (instances or range(len(job.tasks))) if 0 <= i < len(job.tasks)]


def apply_start(book: JobBook, body: dict[str, Any]) -> None:
    job_id, at = body["job_id"], int(body["at"])
    job = book.jobs.get(job_id)
    if job is None and job_id not in book.forgotten:
        _spare(book, job_id, set(body["instances"]))  # read before its JobCreated
        book.start_at[job_id] = max(at, book.start_at.get(job_id, at))
        return
    if not startable(job) or job_id in book.ended:
        return  # an ended job stays ended (see the module doc)
    assert job is not None
    chosen = _chosen(job, list(body["instances"]))
    intent = book.kill_intents.get(job_id, set())
    if not body["instances"]:
        book.kill_intents.pop(job_id, None)
        job.kill_requested = False
    elif job_id in book.kill_intents:
        left = (set(range(len(job.tasks))) if intent is None else set(intent)) - set(chosen)
        if left:
            book.kill_intents[job_id] = left
        else:
            book.kill_intents.pop(job_id, None)
        job.kill_requested = False
    if job.spec.type != JobType.DAEMON:  # a daemon's stopped instances stay stopped:
        for i in chosen:                  # the daemon rule places new ones
            job.tasks[i].kill_requested = False
    book.start_at[job_id] = max(at, book.start_at.get(job_id, at))


def _spare(book: JobBook, job_id: str, instances: set[int]) -> None:
    """A start of a job whose JobCreated is not folded yet (replay reads topics in any
    order): withdraw the kills folded so far (they came before it: one partition)."""
    if job_id not in book.kill_intents:
        return
    intent = book.kill_intents[job_id]
    if not instances:
        book.kill_intents.pop(job_id, None)
        book.kill_spared.pop(job_id, None)
    elif intent is None:
        book.kill_spared[job_id] = book.kill_spared.get(job_id, set()) | instances
    elif intent - instances:
        book.kill_intents[job_id] = intent - instances
    else:
        book.kill_intents.pop(job_id, None)


def carry_out(book: JobBook, job: JobRecord, batch: Batch, requested_by: str = "") -> None:
    """New runs for the started instances whose run ended for good before the start."""
    if (job.spec.type == JobType.DAEMON or job.job_id not in book.start_at
            or job.job_id in book.ended):
        return  # daemons: the daemon rule places them again; an ended job stays ended
    started = book.start_at[job.job_id]
    who = f" by {requested_by}" if requested_by else ""
    for task in job.tasks:
        cur = batch.pending(job.job_id, task)
        if task.kill_requested or cur.state not in TERMINAL or cur.run != task.run:
            continue
        if task.since > started:
            continue  # ended after the start: not the stop this start undoes
        if cur.state != S.KILLED:
            continue  # a run that ended otherwise was already restarted (or is a batch end)
        batch.add(job.job_id, change(
            task.instance, cur.run + 1, S.PENDING, S.INITIALIZED,
            f"{STARTED}: started again{who} after run {cur.run} was stopped", None, None,
            cur.failures, pinned_host=(task.volume_host if job.stateful
                                       else task.pinned_host)))
