"""Task and job states (Peloton's names) and the task state machine as data.

`TRANSITIONS` is the whole machine: a pair not in it is rejected by `transition`. The
docs' diagram (`peloton docs states`) and the tests read the same table. A retried task
does not go "back" to PENDING: a new run (attempt) starts at INITIALIZED.
"""

from __future__ import annotations

from collections.abc import Mapping

from peloton.model.taskstate import ACTIVE, ENDING, ON_HOST, TERMINAL, JobState, TaskState

__all__ = [
    "TaskState", "JobState", "TRANSITIONS", "TERMINAL", "ACTIVE", "IllegalTransition",
    "transition", "can_transition", "derive_job_state",
]


S = TaskState
_ON_HOST = ON_HOST - ENDING

# from-state -> the states it may move to. Kill is allowed from every active state.
TRANSITIONS: Mapping[TaskState, frozenset[TaskState]] = {
    S.INITIALIZED: frozenset({S.PENDING, S.KILLED}),
    S.PENDING: frozenset({S.READY, S.PLACED, S.KILLED}),
    S.READY: frozenset({S.PLACING, S.PLACED, S.PENDING, S.KILLED}),
    S.PLACING: frozenset({S.PLACED, S.READY, S.PENDING, S.KILLED}),
    S.PLACED: frozenset({S.LAUNCHING, S.READY, S.PENDING, S.KILLED, S.LOST}),
    S.LAUNCHING: frozenset({S.LAUNCHED, S.STARTING, S.RUNNING, S.READY} | TERMINAL | {S.KILLING}),
    S.LAUNCHED: frozenset({S.STARTING, S.RUNNING} | TERMINAL | {S.KILLING, S.PREEMPTING}),
    S.STARTING: frozenset({S.RUNNING} | TERMINAL | {S.KILLING, S.PREEMPTING}),
    S.RUNNING: frozenset(TERMINAL | {S.KILLING, S.PREEMPTING}),
    S.PREEMPTING: frozenset({S.RUNNING, S.KILLED, S.SUCCEEDED, S.FAILED, S.LOST}),
    S.KILLING: frozenset({S.KILLED, S.SUCCEEDED, S.FAILED, S.LOST}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.LOST: frozenset(),
    S.KILLED: frozenset(),
}


class IllegalTransition(ValueError):
    def __init__(self, current: TaskState, target: TaskState) -> None:
        super().__init__(f"illegal task transition {current.value} -> {target.value}")
        self.current = current
        self.target = target


def can_transition(current: TaskState, target: TaskState) -> bool:
    return target in TRANSITIONS[current]


def transition(current: TaskState, target: TaskState) -> TaskState:
    """Apply one transition or raise IllegalTransition; the whole machine is the table."""
    if target not in TRANSITIONS[current]:
        raise IllegalTransition(current, target)
    return target


def is_on_host(state: TaskState) -> bool:
    """States in which a process may exist on a host (so a kill must reach the agent)."""
    return state in ON_HOST


def derive_job_state(
    counts: Mapping[TaskState, int], instance_count: int, killing: bool
) -> JobState:
    """Peloton's rule order: the first matching rule wins.

    1. SUCCEEDED >= N -> SUCCEEDED; 2. SUCCEEDED+FAILED+LOST >= N -> FAILED;
    3. some KILLED and all terminal -> KILLED; 4. a kill in progress -> KILLING;
    5. any RUNNING -> RUNNING; 6. otherwise PENDING.
    """
    succeeded = counts.get(S.SUCCEEDED, 0)
    terminal = sum(counts.get(s, 0) for s in TERMINAL)
    if succeeded >= instance_count:
        return JobState.SUCCEEDED
    if succeeded + counts.get(S.FAILED, 0) + counts.get(S.LOST, 0) >= instance_count:
        return JobState.FAILED
    if counts.get(S.KILLED, 0) > 0 and terminal >= instance_count:
        return JobState.KILLED
    if killing:
        return JobState.KILLING
    if counts.get(S.RUNNING, 0) > 0:
        return JobState.RUNNING
    return JobState.PENDING
