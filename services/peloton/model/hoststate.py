"""Host maintenance states (Peloton's names) and their machine as data.

    UP --start_maintenance--> DRAINING --drained--> DRAINED --down--> DOWN
    DOWN --complete_maintenance--> UP
    DRAINING / DRAINED --cancel_maintenance--> UP          (beyond Peloton: Nomad's
                                                            `node drain -disable`)

Contract:
- `TRANSITIONS` is the whole machine: ``(state, command) -> state``. `apply` applies one
  pair and raises `HostStateError` (a ValueError) for any pair not in the table, with a
  reason a person can read (``REASONS``, else a generic one). Rejection changes nothing:
  the caller keeps its state.
- `drained` is not a user command: the drain planner reports it once the host runs
  nothing. `down` is the host manager's fact that the host has left for maintenance.
- Placement uses `accepts_work`: only UP hosts get new work. Daemons stay on DRAINING
  hosts until the rest has gone (see the drain planner) but a DRAINING host gets none.

Examples:

    ===========  =====================  =====================================
    state        command                result
    ===========  =====================  =====================================
    UP           start_maintenance      DRAINING
    DRAINING     drained                DRAINED
    DRAINED      down                   DOWN
    DOWN         complete_maintenance   UP
    DOWN         start_maintenance      rejected: already DOWN for maintenance
    UP           complete_maintenance   rejected: not in maintenance
    ===========  =====================  =====================================
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

__all__ = [
    "HostState", "HostCommand", "TRANSITIONS", "REASONS", "HostStateError", "apply",
    "can_apply", "accepts_work", "IN_MAINTENANCE",
]


class HostState(StrEnum):
    UP = "UP"
    DRAINING = "DRAINING"
    DRAINED = "DRAINED"
    DOWN = "DOWN"


class HostCommand(StrEnum):
    START_MAINTENANCE = "start_maintenance"
    DRAINED = "drained"
    DOWN = "down"
    COMPLETE_MAINTENANCE = "complete_maintenance"
    CANCEL_MAINTENANCE = "cancel_maintenance"


H = HostState
C = HostCommand

#: States in which the host is in maintenance (between start and complete/cancel).
IN_MAINTENANCE: frozenset[HostState] = frozenset({H.DRAINING, H.DRAINED, H.DOWN})

TRANSITIONS: Mapping[tuple[HostState, HostCommand], HostState] = {
    (H.UP, C.START_MAINTENANCE): H.DRAINING,
    (H.DRAINING, C.DRAINED): H.DRAINED,
    (H.DRAINED, C.DOWN): H.DOWN,
    (H.DOWN, C.COMPLETE_MAINTENANCE): H.UP,
    (H.DRAINING, C.CANCEL_MAINTENANCE): H.UP,
    (H.DRAINED, C.CANCEL_MAINTENANCE): H.UP,
}

#: Why a pair is rejected, for the pairs users hit; the rest get a generic reason.
REASONS: Mapping[tuple[HostState, HostCommand], str] = {
    (H.DRAINING, C.START_MAINTENANCE): "maintenance already started: the host is DRAINING",
    (H.DRAINED, C.START_MAINTENANCE): "maintenance already started: the host is DRAINED",
    (H.DOWN, C.START_MAINTENANCE):
        "the host is already DOWN for maintenance; complete that maintenance first",
    (H.UP, C.COMPLETE_MAINTENANCE): "the host is UP: it is not in maintenance",
    (H.DRAINING, C.COMPLETE_MAINTENANCE):
        "the host is still DRAINING: maintenance completes once the host is DOWN "
        "(cancel it to bring the host back now)",
    (H.DRAINED, C.COMPLETE_MAINTENANCE):
        "the host is DRAINED but not DOWN yet: maintenance completes once it is DOWN "
        "(cancel it to bring the host back now)",
    (H.UP, C.CANCEL_MAINTENANCE): "the host is UP: there is no maintenance to cancel",
    (H.DOWN, C.CANCEL_MAINTENANCE):
        "the host is DOWN: complete the maintenance once the host is back",
    (H.UP, C.DRAINED): "the host is UP: only a DRAINING host can become DRAINED",
    (H.UP, C.DOWN): "the host is UP: only a DRAINED host goes DOWN for maintenance",
    (H.DRAINING, C.DOWN): "the host is still DRAINING: it goes DOWN once it is DRAINED",
}


class HostStateError(ValueError):
    def __init__(self, state: HostState, command: HostCommand) -> None:
        reason = REASONS.get(
            (state, command), f"{command.value} is not allowed when the host is {state.value}")
        super().__init__(reason)
        self.state = state
        self.command = command
        self.reason = reason


def can_apply(state: HostState, command: HostCommand) -> bool:
    return (state, command) in TRANSITIONS


def apply(state: HostState, command: HostCommand) -> HostState:
    """The next state, or HostStateError (the state is left as it was)."""
    target = TRANSITIONS.get((state, command))
    if target is None:
        raise HostStateError(state, command)
    return target


def accepts_work(state: HostState) -> bool:
    """Only UP hosts get new placements (daemons included)."""
    return state is H.UP
