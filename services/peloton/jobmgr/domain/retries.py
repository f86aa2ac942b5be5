"""When a task gets another run, and when a run may be tried again (Peloton's rules, pure).

- A FAILED run is retried while the task's failures stay within `max_failures`; a LOST
  run at least `SYSTEM_RETRIES` times (system failures always get 4 attempts). Killed
  tasks are never retried.
- A preempted run ends KILLED with a reason starting `PREEMPTED` and a new run starts
  PENDING at once; preemption is not a failure.
- A run that times out waiting for a placement goes back to PENDING with a backoff:
  Peloton's `(attempt mod 3) x unit` (unit 5 min), where `attempt` counts the run's
  placement timeouts; every third attempt retries at once (a full cycle).
"""

from __future__ import annotations

from peloton.jobmgr.domain.records import Change, JobRecord, TaskRecord, change
from peloton.model.taskstate import TaskState

__all__ = ["SYSTEM_RETRIES", "PREEMPTED", "PLACEMENT_BACKOFF_CYCLE", "should_retry",
           "retry_run", "requeued", "preempted_reason", "placement_backoff_ms"]

S = TaskState
SYSTEM_RETRIES = 4  # a LOST run is retried at least this many times (Peloton's rule)
PREEMPTED = "PREEMPTED"  # how every reason of a preempted run starts
PLACEMENT_BACKOFF_CYCLE = 3  # Peloton's placement retry count per cycle


def should_retry(job: JobRecord, task: TaskRecord, state: TaskState, failures: int) -> bool:
    if task.kill_requested or job.kill_requested:
        return False
    allowed = job.spec.task(task.instance).max_failures
    if state == S.LOST:
        allowed = max(allowed, SYSTEM_RETRIES)
    return failures <= allowed


def retry_run(instance: int, run: int, ended: TaskState, reason: str, failures: int) -> Change:
    """The next run of a task whose run ended FAILED or LOST."""
    return change(instance, run + 1, S.PENDING, S.INITIALIZED,
                  f"retry after {ended.value.lower()} run {run}: {reason}", None, None,
                  failures)


def requeued(instance: int, run: int, reason: str, failures: int) -> Change:
    """The next run of a preempted task: PENDING, failures unchanged."""
    return change(instance, run + 1, S.PENDING, S.INITIALIZED,
                  f"{PREEMPTED}: run {run} was preempted; {reason}", None, None, failures)


def preempted_reason(reason: str) -> str:
    return reason if reason.startswith(PREEMPTED) else PREEMPTED


def placement_backoff_ms(attempt: int, unit_ms: int) -> int:
    """Peloton's placement backoff: (attempt mod 3) x unit; attempt counts from 1."""
    return (attempt % PLACEMENT_BACKOFF_CYCLE) * unit_ms
