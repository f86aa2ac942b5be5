"""Long-running instances (SERVICE, STATEFUL, DAEMON): restarts with backoff (pure).

Contract:
- An instance of a long-running job runs until it is stopped: when its run ends for any
  reason but a kill the user asked for, a new run starts PENDING (`restart_run`).
- How soon (`restart_delay`): a run that exited on its own (SUCCEEDED or FAILED, a failed
  health check included) extends the instance's failure streak, and the new run waits
  Peloton's backoff, min(30 s x 2^(n-1), 60 min), scaled by `base_ms / 30 s` (the service
  reads the base from PELOTON_JOBMGR_RESTART_BACKOFF_S); a streak resets once a run has
  been healthy for 10 min (`model.backoff`). A run the scheduler took away (LOST with
  its host, preempted, drained) restarts at once: that was not the instance's fault.
- A STATEFUL instance's new run is pinned to the host that keeps its volume
  (`TaskRecord.volume_host`, the host its first run reached), so it never moves off its
  data; it waits for that host (the placement engine says so) rather than start empty
  elsewhere.
- In place (Peloton's in-place update): a SERVICE run an update replaced (its end's
  reason starts `PREEMPTED (UPDATE:`) restarts pinned to the host it ran on, its reason
  starting `restart in place on <host>` (`IN_PLACE`), so the new version reuses the
  host's room (and its warm caches and images). The pin is soft: a run that waits READY
  longer than `Timeouts.in_place_ms` for that host is taken back and runs anywhere
  (`timeouts.expiry`); the restart after it is never pinned.
- The delay is decided once, by the job manager, and travels in the new run's
  `not_before_ms`; the fold only replays it.
"""

from __future__ import annotations

from peloton.jobmgr.domain.records import Change, JobRecord, TaskRecord, change
from peloton.jobmgr.domain.retries import PREEMPTED
from peloton.model.backoff import BASE_DELAY_MS
from peloton.model.spec import JobType
from peloton.model.taskstate import TaskState

__all__ = ["OWN_EXITS", "IN_PLACE", "restart_delay", "restart_run"]

#: The start of the reason of a restart pinned (softly) to the host its run was updated on.
IN_PLACE = "restart in place on "
_UPDATE_KILL = f"{PREEMPTED} (UPDATE:"

S = TaskState
#: Run ends that count against an instance's streak (the instance ended it itself).
OWN_EXITS = frozenset({S.SUCCEEDED, S.FAILED})


def restart_delay(task: TaskRecord, ended: TaskState, now_ms: int, base_ms: int) -> int:
    """How long the next run waits, in ms (see the module contract)."""
    if ended not in OWN_EXITS:
        return 0
    streak = task.backoff.exited(now_ms)
    return streak.delay_ms() * base_ms // BASE_DELAY_MS


def restart_run(job: JobRecord, task: TaskRecord, run: int, ended: TaskState, reason: str,
                failures: int, now_ms: int, base_ms: int, host: str | None) -> Change:
    """The next run of a long-running instance whose run `run` ended `ended`."""
    delay = restart_delay(task, ended, now_ms, base_ms)
    in_place = (job.spec.type == JobType.SERVICE and host is not None
                and reason.startswith(_UPDATE_KILL))
    if job.stateful:
        pinned = task.volume_host or host
    elif job.spec.type == JobType.SERVICE:
        pinned = host if in_place else None
    else:
        pinned = task.pinned_host
    where = f" in place on {pinned}" if in_place else f" on {pinned}" if pinned else ""
    wait = f" in {delay / 1000:g}s (backoff)" if delay else ""
    why = f"restart{where}{wait} after run {run} ended {ended.value.lower()}: {reason}"
    return change(task.instance, run + 1, S.PENDING, S.INITIALIZED, why, None, None,
                  failures, not_before_ms=now_ms + delay if delay else None,
                  pinned_host=pinned)
