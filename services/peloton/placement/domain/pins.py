"""Runs pinned to one host: their hard constraint and their reason to wait (pure).

A run may be pinned to one host (TasksAdmitted v2 `pinned_host`: a stateful instance
goes back to the host that keeps its volume, a daemon instance runs on its host). Its
request carries the hard constraint `hostname == <host>` (every host carries the label
`hostname=<its name>`, see model/constraint.py), ANDed with the task's own constraint,
so the engine places it on that host or nowhere; the host's name alone decides, however
emptier other hosts are.

A pinned run that stays unplaced waits for its host, and its PlacementFailed reason says
so first, in words a person reads: `waiting for host h7 (the run is pinned to it): ...`,
followed by why: the host has sent no offer (unknown, or gone), it is not available, or
the engine's reason (its per-filter host counts included) when the host has no room.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from peloton.model.constraint import (
    HOSTNAME_LABEL,
    AndConstraint,
    Constraint,
    HostLabelConstraint,
    LabelOp,
)

__all__ = ["pin_constraint", "pinned_reason", "PINNED_WAIT"]

#: The words of a pinned run's reason that say it waits for its host (the job manager
#: reads them to let a daemon make room there, see jobmgr/domain/daemonroom.py).
PINNED_WAIT = "(the run is pinned to it)"


class _Offer(Protocol):
    @property
    def available(self) -> bool: ...


def pin_constraint(host: str, constraint: Constraint | None) -> Constraint:
    """`hostname == host`, ANDed with the task's constraint when it has one."""
    pin = HostLabelConstraint(HOSTNAME_LABEL, LabelOp.EQUALS, (host,))
    return pin if constraint is None else AndConstraint((pin, constraint))


def pinned_reason(host: str, offers: Mapping[str, _Offer], reason: str) -> str:
    """Why a run pinned to `host` was not placed, given the engine's `reason`."""
    offer = offers.get(host)
    if offer is None:
        why = f"no offer from {host} (the host is unknown or gone)"
    elif not offer.available:
        why = f"{host} is not available"
    else:
        why = reason
    return f"waiting for host {host} {PINNED_WAIT}: {why}"
