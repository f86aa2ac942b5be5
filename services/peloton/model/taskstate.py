"""Task and job states (Peloton's names) and their named sets: one vocabulary for every service.

Every core imports these; no module spells a state set of its own. The job manager's
transition table (`peloton.jobmgr.domain.states`) is built on them.

Stages: `STAGE` orders the states a run moves through on its way forward. A fact about a
run that arrives out of order across topics (Kafka orders a partition, not the cluster)
is judged by it: a fact about a later stage of the same run moves the run forward (the
earlier stages happened, their facts are just late); a fact about an earlier stage is
stale. The few backward moves the machine allows (a rejected placement goes back to READY,
a preemption that never ends goes back to RUNNING) are named in the transition table.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

__all__ = [
    "TaskState", "JobState", "TERMINAL", "ACTIVE", "ON_HOST", "HOLDING", "QUEUED",
    "VICTIMS", "ENDING", "LEAVES_PLACEMENT", "AGENT_STATES", "STAGE", "TERMINAL_JOB",
    "is_terminal", "stage", "task_state",
]


class TaskState(StrEnum):
    INITIALIZED = "INITIALIZED"
    PENDING = "PENDING"
    READY = "READY"
    PLACING = "PLACING"
    PLACED = "PLACED"
    LAUNCHING = "LAUNCHING"
    LAUNCHED = "LAUNCHED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    LOST = "LOST"
    PREEMPTING = "PREEMPTING"
    KILLING = "KILLING"
    KILLED = "KILLED"


class JobState(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLING = "KILLING"
    KILLED = "KILLED"
    #: every instance of a SERVICE/STATEFUL job was stopped (`job stop`); not terminal:
    #: `job start` runs them again (Peloton stops a stateless job the same way and calls
    #: the state KILLED; a distinct name tells a restartable job from an ended one)
    STOPPED = "STOPPED"


S = TaskState

#: A run in one of these has ended for good; a new run of the task may follow.
TERMINAL: frozenset[TaskState] = frozenset({S.SUCCEEDED, S.FAILED, S.LOST, S.KILLED})
#: Every state that is not terminal.
ACTIVE: frozenset[TaskState] = frozenset(set(S) - TERMINAL)
#: A process of the run may exist on its host, so a kill must reach the agent.
ON_HOST: frozenset[TaskState] = frozenset(
    {S.LAUNCHING, S.LAUNCHED, S.STARTING, S.RUNNING, S.KILLING, S.PREEMPTING})
#: The run holds an allocation in its pool (from admission until it ends).
HOLDING: frozenset[TaskState] = frozenset(
    {S.READY, S.PLACING, S.PLACED, S.LAUNCHING, S.LAUNCHED, S.STARTING, S.RUNNING,
     S.PREEMPTING, S.KILLING})
#: Admitted and waiting for (or holding) a placement, not on a host yet.
QUEUED: frozenset[TaskState] = frozenset({S.READY, S.PLACING, S.PLACED})
#: Runs the job manager can take back when the resource manager preempts them.
VICTIMS: frozenset[TaskState] = frozenset({S.READY, S.PLACING, S.LAUNCHED, S.STARTING,
                                           S.RUNNING})
#: On their way out: a kill or a preemption is under way.
ENDING: frozenset[TaskState] = frozenset({S.KILLING, S.PREEMPTING})
#: Runs placement no longer has to place or count in flight.
LEAVES_PLACEMENT: frozenset[TaskState] = TERMINAL | {S.KILLING}
#: What an agent may report about a run it was asked to launch (LOST: the agent does not
#: know the run, its answer to a reconciliation).
AGENT_STATES: frozenset[TaskState] = frozenset(
    {S.LAUNCHED, S.STARTING, S.RUNNING, S.SUCCEEDED, S.FAILED, S.KILLED, S.LOST})
#: Job states from which a job never moves again.
TERMINAL_JOB: frozenset[JobState] = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED, JobState.KILLED})

#: The forward order of a run's life (see the module doc). KILLING and PREEMPTING rank
#: with the on-host states they leave from; every terminal state ranks last.
STAGE: Mapping[TaskState, int] = {
    S.INITIALIZED: 0, S.PENDING: 1, S.READY: 2, S.PLACING: 3, S.PLACED: 4, S.LAUNCHING: 5,
    S.LAUNCHED: 6, S.STARTING: 7, S.RUNNING: 8, S.PREEMPTING: 9, S.KILLING: 9,
    S.SUCCEEDED: 10, S.FAILED: 10, S.LOST: 10, S.KILLED: 10,
}


_BY_NAME: dict[str, TaskState] = {s.value: s for s in TaskState}


def task_state(value: str) -> TaskState:
    """`TaskState(value)` by a table: an Enum call costs about 0.8 us here, and every
    reader of job-events turns each change's state into a member. Anything but a state's
    name raises what `TaskState(value)` raises (ValueError)."""
    try:
        return _BY_NAME[value]
    except (KeyError, TypeError):
        return TaskState(value)


def is_terminal(state: TaskState | str) -> bool:
    return task_state(state) in TERMINAL


def stage(state: TaskState | str) -> int:
    return STAGE[task_state(state)]
