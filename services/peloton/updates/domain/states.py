"""The update state machine as data (Peloton's update states, h11 style).

A status is the state plus, for PAUSED, the state a resume returns to (Peloton: "pause
remembers the previous state and resume restores it"). There are nine statuses, all
listed in `STATUSES`; `TRANSITIONS` maps ``(status, trigger) -> status`` and is the whole
machine::

    INITIALIZED      --start--> ROLLING_FORWARD
    INITIALIZED      --start_paused/pause--> PAUSED(fwd)
    ROLLING_FORWARD  --pause--> PAUSED(fwd)          --resume--> ROLLING_FORWARD
    ROLLING_FORWARD  --rollback--> ROLLING_BACKWARD  (user, or failures with
                                                      rollbackOnFailure)
    PAUSED(fwd)      --rollback--> ROLLING_BACKWARD
    ROLLING_BACKWARD --pause--> PAUSED(bwd)          --resume--> ROLLING_BACKWARD
    ROLLING_FORWARD  --complete--> SUCCEEDED         --fail--> FAILED
    ROLLING_BACKWARD --complete--> ROLLED_BACK       --fail--> FAILED
    every non-terminal status --abort--> ABORTED

Contract:
- `apply(status, trigger)` returns the next status or raises `IllegalUpdateTransition`
  (a ValueError) for any pair not in the table, with a reason a person can read; the
  caller keeps its status. Terminal statuses (SUCCEEDED, ROLLED_BACK, ABORTED, FAILED)
  have no exits: a new update starts from INITIALIZED.
- User commands are pause, resume, abort and rollback (`USER_TRIGGERS`); start,
  start_paused, complete and fail are the planner's.
- Every status reachable from INITIALIZED is in `STATUSES`, and every status has a way
  to a terminal one (abort): tests check both over the table and over random sequences.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "UpdateState", "Trigger", "UpdateStatus", "STATUSES", "TRANSITIONS", "TERMINAL_UPDATE",
    "USER_TRIGGERS", "IllegalUpdateTransition", "apply", "can_apply", "INITIAL",
]


class UpdateState(StrEnum):
    INITIALIZED = "INITIALIZED"
    ROLLING_FORWARD = "ROLLING_FORWARD"
    PAUSED = "PAUSED"
    SUCCEEDED = "SUCCEEDED"
    ROLLING_BACKWARD = "ROLLING_BACKWARD"
    ROLLED_BACK = "ROLLED_BACK"
    ABORTED = "ABORTED"
    FAILED = "FAILED"


class Trigger(StrEnum):
    START = "start"
    START_PAUSED = "start_paused"
    PAUSE = "pause"
    RESUME = "resume"
    ABORT = "abort"
    ROLLBACK = "rollback"
    COMPLETE = "complete"
    FAIL = "fail"


U = UpdateState
T = Trigger

TERMINAL_UPDATE: frozenset[UpdateState] = frozenset({U.SUCCEEDED, U.ROLLED_BACK, U.ABORTED,
                                                     U.FAILED})
USER_TRIGGERS: frozenset[Trigger] = frozenset({T.PAUSE, T.RESUME, T.ABORT, T.ROLLBACK})


@dataclass(frozen=True, slots=True)
class UpdateStatus:
    """An update's state; ``resume_to`` is set exactly when the state is PAUSED."""

    state: UpdateState
    resume_to: UpdateState | None = None

    def __post_init__(self) -> None:
        if (self.state is U.PAUSED) != (self.resume_to is not None):
            raise ValueError("resume_to is set exactly when the update is PAUSED")
        if self.resume_to not in (None, U.ROLLING_FORWARD, U.ROLLING_BACKWARD):
            raise ValueError("a paused update resumes to ROLLING_FORWARD or ROLLING_BACKWARD")

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_UPDATE

    @property
    def backward(self) -> bool:
        """Rolling (or paused while rolling) back to the old config."""
        return U.ROLLING_BACKWARD in (self.state, self.resume_to)

    def __str__(self) -> str:
        if self.resume_to is None:
            return self.state.value
        return f"PAUSED (resumes {self.resume_to.value})"

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state.value,
                "resume_to": None if self.resume_to is None else self.resume_to.value}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UpdateStatus:
        resume = d.get("resume_to")
        return cls(UpdateState(d["state"]), None if resume is None else UpdateState(resume))


INITIAL = UpdateStatus(U.INITIALIZED)
_FWD = UpdateStatus(U.ROLLING_FORWARD)
_BWD = UpdateStatus(U.ROLLING_BACKWARD)
_P_FWD = UpdateStatus(U.PAUSED, U.ROLLING_FORWARD)
_P_BWD = UpdateStatus(U.PAUSED, U.ROLLING_BACKWARD)
_END = {s: UpdateStatus(s) for s in TERMINAL_UPDATE}

STATUSES: tuple[UpdateStatus, ...] = (
    INITIAL, _FWD, _P_FWD, _BWD, _P_BWD, *(_END[s] for s in sorted(TERMINAL_UPDATE)))

TRANSITIONS: Mapping[tuple[UpdateStatus, Trigger], UpdateStatus] = {
    (INITIAL, T.START): _FWD,
    (INITIAL, T.START_PAUSED): _P_FWD,
    (INITIAL, T.PAUSE): _P_FWD,
    (INITIAL, T.ABORT): _END[U.ABORTED],
    (_FWD, T.PAUSE): _P_FWD,
    (_FWD, T.ROLLBACK): _BWD,
    (_FWD, T.COMPLETE): _END[U.SUCCEEDED],
    (_FWD, T.FAIL): _END[U.FAILED],
    (_FWD, T.ABORT): _END[U.ABORTED],
    (_P_FWD, T.RESUME): _FWD,
    (_P_FWD, T.ROLLBACK): _BWD,
    (_P_FWD, T.ABORT): _END[U.ABORTED],
    (_BWD, T.PAUSE): _P_BWD,
    (_BWD, T.COMPLETE): _END[U.ROLLED_BACK],
    (_BWD, T.FAIL): _END[U.FAILED],
    (_BWD, T.ABORT): _END[U.ABORTED],
    (_P_BWD, T.RESUME): _BWD,
    (_P_BWD, T.ABORT): _END[U.ABORTED],
}


class IllegalUpdateTransition(ValueError):
    def __init__(self, status: UpdateStatus, trigger: Trigger) -> None:
        reason = _reason(status, trigger)
        super().__init__(reason)
        self.status = status
        self.trigger = trigger
        self.reason = reason


def _reason(status: UpdateStatus, trigger: Trigger) -> str:
    if status not in STATUSES:
        return f"unknown update status {status}"
    if status.terminal:
        return (f"the update is {status.state.value}, which is final: it accepts no "
                f"{trigger.value}; start a new update instead")
    if trigger is T.PAUSE and status.state is U.PAUSED:
        return "the update is already paused"
    if trigger is T.RESUME:
        return f"the update is {status}, not paused: nothing to resume"
    if trigger is T.ROLLBACK and status.backward:
        return "the update is already rolling back"
    if trigger is T.ROLLBACK:
        return "the update has not started: nothing to roll back (abort it instead)"
    return f"{trigger.value} is not allowed when the update is {status}"


def can_apply(status: UpdateStatus, trigger: Trigger) -> bool:
    return (status, trigger) in TRANSITIONS


def apply(status: UpdateStatus, trigger: Trigger) -> UpdateStatus:
    """The next status, or IllegalUpdateTransition (the status is left as it was)."""
    target = TRANSITIONS.get((status, trigger))
    if target is None:
        raise IllegalUpdateTransition(status, trigger)
    return target
