"""Runs that waited too long in one state, and what happens to them (Peloton, pure).

- A run READY (admitted, holding an allocation) but not placed within `placement_ms`
  goes back to PENDING: the resource manager takes its allocation back and admits it
  again no earlier than `not_before_ms` (the placement backoff of `retries`).
- A SERVICE run restarted in place by an update (`TaskRecord.in_place`, see restarts)
  that waits READY longer than `in_place_ms` for its old host is taken back (KILLED,
  reason `PREEMPTED (IN_PLACE: ...)`, not a kill for good): its restart runs anywhere.
- A run PREEMPTING whose kill never ends returns to RUNNING after `preempt_ms`
  (Peloton: 10 min); the resource manager may choose it again.
Time is event time: a run's `since` is the `at` of the change that put it in its state,
and `now_ms` is passed in by the tick. Only READY and PREEMPTING runs are watched (the
book indexes them), so a tick costs O(watched runs), not O(tasks).
"""

from __future__ import annotations

from dataclasses import dataclass

from peloton.jobmgr.domain.records import TaskRecord
from peloton.jobmgr.domain.retries import PREEMPTED, placement_backoff_ms
from peloton.model.taskstate import TaskState

__all__ = ["Timeouts", "WATCHED", "Expiry", "expiry"]

S = TaskState
WATCHED: frozenset[TaskState] = frozenset({S.READY, S.PREEMPTING})


@dataclass(frozen=True, slots=True)
class Timeouts:
    """The limits, in ms of event time (0 turns a timeout off). Defaults are Peloton's:
    10 min to place (the simulator's `ready_timeout_s` default too), a 5 min backoff
    unit, 10 min for a preemption to end. The service reads them from the environment
    (`JobManagerCore.from_env`: PELOTON_JOBMGR_PLACEMENT_TIMEOUT_S,
    PELOTON_JOBMGR_PLACEMENT_BACKOFF_S, PELOTON_JOBMGR_PREEMPT_TIMEOUT_S, seconds)."""

    placement_ms: int = 10 * 60_000
    placement_backoff_unit_ms: int = 5 * 60_000  # Peloton's placement backoff unit
    preempt_ms: int = 10 * 60_000
    restart_base_ms: int = 30_000  # Peloton's service restart backoff base (see restarts)
    in_place_ms: int = 10_000  # how long an in-place restart waits for its host
    #: a run on a host with no news for this long is asked about (`reconciliation`)
    reconcile_ms: int = 60_000
    reconcile_every_ms: int = 600_000  # ... and again at most this often

    def __post_init__(self) -> None:
        for name in ("placement_ms", "placement_backoff_unit_ms", "preempt_ms",
                     "restart_base_ms", "in_place_ms", "reconcile_ms", "reconcile_every_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")


@dataclass(frozen=True, slots=True)
class Expiry:
    target: TaskState
    reason: str
    not_before_ms: int | None = None


def expiry(task: TaskRecord, now_ms: int, limits: Timeouts) -> Expiry | None:
    """What a watched run's timeout decides at `now_ms`, or None if it has time left."""
    waited = now_ms - task.since
    if (task.state == S.READY and task.in_place and limits.in_place_ms > 0
            and waited >= limits.in_place_ms):
        return Expiry(S.KILLED, f"{PREEMPTED} (IN_PLACE: host {task.pinned_host} had no "
                                f"room for it within {limits.in_place_ms / 1000:g}s; it runs "
                                "where it fits)")
    if task.state == S.READY and limits.placement_ms > 0 and waited >= limits.placement_ms:
        attempt = task.placement_attempts + 1
        backoff = placement_backoff_ms(attempt, limits.placement_backoff_unit_ms)
        reason = (f"placement timeout: not placed within {limits.placement_ms / 1000:g}s "
                  f"(attempt {attempt}); allocation given back, ")
        reason += f"admitted again after {backoff / 1000:g}s" if backoff else "retried now"
        return Expiry(S.PENDING, reason, now_ms + backoff if backoff else None)
    if task.state == S.PREEMPTING and limits.preempt_ms > 0 and waited >= limits.preempt_ms:
        return Expiry(S.RUNNING, f"preemption timeout: not killed within "
                                 f"{limits.preempt_ms / 1000:g}s; the run keeps running")
    return None
