"""Task and job states (Peloton's names) and the task state machine as data.

`TRANSITIONS` is the whole machine: a pair not in it is rejected by `transition`. The
docs' diagram (`peloton docs states`) and the tests read the same table. A retried task
does not go "back" to PENDING: a new run (attempt) starts at INITIALIZED.

The table is built from `model.taskstate.STAGE`: facts about a run arrive in any order
across topics, so from every state a run may jump FORWARD to any later stage a fact can
prove (an agent's RUNNING read before the host manager's launch request moves PLACED to
RUNNING: the launch happened, its record is late). Besides those, the machine has the
kill/preemption decisions of the job manager and a few named BACKWARD moves
(`BACKWARD`): a placement timeout (READY -> PENDING), a rejected or replaced
placement (PLACED -> READY), and a preemption that never ends (PREEMPTING -> RUNNING).
"""

from __future__ import annotations

from collections.abc import Mapping

from peloton.model.taskstate import (
    ACTIVE,
    ENDING,
    ON_HOST,
    STAGE,
    TERMINAL,
    JobState,
    TaskState,
)

__all__ = [
    "TaskState", "JobState", "TRANSITIONS", "TERMINAL", "ACTIVE", "IllegalTransition",
    "transition", "can_transition", "derive_job_state", "FACT_STATES", "BACKWARD",
    "controller_job_state",
]


S = TaskState

#: States a fact from another service can prove a run reached (admission, placement,
#: launch request, agent reports, host loss).
FACT_STATES: frozenset[TaskState] = frozenset(
    {S.READY, S.PLACING, S.PLACED, S.LAUNCHING, S.LAUNCHED, S.STARTING, S.RUNNING} | TERMINAL)
#: The only moves to an earlier stage, each with its one cause.
BACKWARD: Mapping[tuple[TaskState, TaskState], str] = {
    (S.READY, S.PENDING): "placement timeout: the allocation is given back",
    (S.PLACING, S.READY): "placement given up",
    (S.PLACING, S.PENDING): "placement timeout: the allocation is given back",
    (S.PLACED, S.READY): "the placement the run holds was rejected (or replaced by a "
                         "newer round)",
    (S.PLACED, S.PENDING): "placement timeout: the allocation is given back",
    (S.LAUNCHING, S.READY): "launch given up",
    (S.PREEMPTING, S.RUNNING): "preemption timeout: the run was never killed",
}
_DECISIONS: Mapping[TaskState, frozenset[TaskState]] = {
    # the job manager's own decisions: create, kill, preempt
    S.INITIALIZED: frozenset({S.PENDING, S.KILLED}),
    S.LAUNCHING: frozenset({S.KILLING}),
    **{s: frozenset({S.KILLING, S.PREEMPTING}) for s in ON_HOST - ENDING - {S.LAUNCHING}},
    S.PREEMPTING: frozenset(TERMINAL),
    S.KILLING: frozenset(TERMINAL),
}


def _table() -> dict[TaskState, frozenset[TaskState]]:
    table: dict[TaskState, set[TaskState]] = {s: set() for s in TaskState}
    for state in ACTIVE - ENDING - {S.INITIALIZED}:
        table[state] |= {t for t in FACT_STATES if STAGE[t] > STAGE[state]}
    for state, targets in _DECISIONS.items():
        table[state] |= targets
    for state, target in BACKWARD:
        table[state].add(target)
    return {s: frozenset(t) for s, t in table.items()}


# from-state -> the states it may move to. Kill is allowed from every active state.
TRANSITIONS: Mapping[TaskState, frozenset[TaskState]] = _table()


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


def controller_job_state(state: TaskState) -> JobState:
    """The job state a job with a controller task takes when the controller run ends."""
    if state is S.SUCCEEDED:
        return JobState.SUCCEEDED
    return JobState.KILLED if state is S.KILLED else JobState.FAILED


def derive_job_state(
    counts: Mapping[TaskState, int], instance_count: int, killing: bool,
    controller: TaskState | None = None, *, long_running: bool = False,
    stopped: bool = False,
) -> JobState:
    """Peloton's rule order: the first matching rule wins.

    0. the job has a controller task (instance 0) whose run ended for good (`controller`,
       a terminal state): its other tasks are being killed (KILLING) until every task is
       terminal, then the job ends as the controller did (Peloton: a job with a controller
       task takes its terminal state from instance 0). So the job turns terminal only when
       nothing of it runs any more, as for any other job;
    1. SUCCEEDED >= N -> SUCCEEDED; 2. SUCCEEDED+FAILED+LOST >= N -> FAILED;
    3. some KILLED and all terminal -> KILLED; 4. a kill in progress -> KILLING;
    5. any RUNNING -> RUNNING; 6. otherwise PENDING.

    A long-running job (SERVICE, STATEFUL, DAEMON: `long_running`) never "succeeds": its
    instances are restarted until stopped, so see `_long_running_state`; `stopped`: every
    instance of it was stopped by `job stop` (each one's kill, not the job's): KILLING
    until none runs, then STOPPED.
    """
    succeeded = counts.get(S.SUCCEEDED, 0)
    terminal = sum(counts.get(s, 0) for s in TERMINAL)
    if long_running:
        if stopped and not killing:
            return JobState.STOPPED if terminal >= instance_count else JobState.KILLING
        return _long_running_state(counts, instance_count, killing, terminal)
    if controller is not None and controller in TERMINAL:
        if terminal >= instance_count:
            return controller_job_state(controller)
        return JobState.KILLING
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


def _long_running_state(counts: Mapping[TaskState, int], instance_count: int, killing: bool,
                        terminal: int) -> JobState:
    """A stopped job ends KILLED once nothing of it runs (KILLING until then); else it is
    RUNNING while any instance runs, PENDING before (a daemon with no matching host yet
    is PENDING too)."""
    if killing:
        return JobState.KILLED if terminal >= instance_count else JobState.KILLING
    if counts.get(S.RUNNING, 0) > 0:
        return JobState.RUNNING
    return JobState.PENDING
