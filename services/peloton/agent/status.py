"""Run states, the `TaskStatus` report, and the transition table both runners obey.

The state machine is data (`TRANSITIONS`) plus one function (`advance`) that applies it
and rejects undefined pairs. Every run a runner accepts produces exactly one of:

    STARTING -> RUNNING -> SUCCEEDED | FAILED | KILLED     (the process was spawned)
    FAILED                                                  (spawn error / lost run)
    SUCCEEDED | FAILED | KILLED                             (recovered after a restart)

`StatusFeed` delivers reports either to a synchronous callback or, when none is given, to
an unbounded `asyncio.Queue` the shell drains. Reports carry no timestamps: the shell
stamps them, so runners never read the clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from peloton.agent.errors import InvalidTransitionError
from peloton.model.quickinit import quick_init

__all__ = [
    "RunState",
    "TaskStatus",
    "TRANSITIONS",
    "TERMINAL_STATES",
    "advance",
    "StatusCallback",
    "StatusFeed",
    "LogStream",
]

LogStream = Literal["stdout", "stderr"]


class RunState(StrEnum):
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"


TERMINAL_STATES: frozenset[RunState] = frozenset(
    {RunState.SUCCEEDED, RunState.FAILED, RunState.KILLED}
)

# (from, to); None is "not yet reported".
TRANSITIONS: frozenset[tuple[RunState | None, RunState]] = frozenset(
    {
        (None, RunState.STARTING),
        (None, RunState.SUCCEEDED),  # recovered: ended under a previous agent
        (None, RunState.FAILED),  # spawn error, lost, or recovered
        (None, RunState.KILLED),  # recovered
        (RunState.STARTING, RunState.RUNNING),
        (RunState.RUNNING, RunState.SUCCEEDED),
        (RunState.RUNNING, RunState.FAILED),
        (RunState.RUNNING, RunState.KILLED),
    }
)


def advance(current: RunState | None, new: RunState) -> RunState:
    """Return `new` if (current, new) is in `TRANSITIONS`, else raise InvalidTransitionError."""
    if (current, new) not in TRANSITIONS:
        raise InvalidTransitionError(f"undefined run state transition {current} -> {new}")
    return new


@quick_init
@dataclass(frozen=True, slots=True)
class TaskStatus:
    """One state change of one run.

    exit_code: the process's exit status when it exited on its own (also for KILLED when it
    exited after SIGTERM), None while running, on spawn errors and when killed by a signal
    (the message then names the signal, e.g. "killed by signal 9 (SIGKILL)").
    sandbox: the run's sandbox directory ("" for the simulated runner).
    """

    run_id: str
    state: RunState
    exit_code: int | None
    message: str
    sandbox: str


StatusCallback = Callable[[TaskStatus], None]


class StatusFeed:
    """Delivers reports to `on_status`, or to `queue` when no callback is given."""

    __slots__ = ("_callback", "queue")

    def __init__(self, on_status: StatusCallback | None) -> None:
        self._callback = on_status
        self.queue: asyncio.Queue[TaskStatus] | None = (
            asyncio.Queue() if on_status is None else None
        )

    def publish(self, status: TaskStatus) -> None:
        if self._callback is not None:
            self._callback(status)
        else:
            assert self.queue is not None
            self.queue.put_nowait(status)
