"""Gangs: all tasks of a gang are placed in the same round, or none of them.

PreFilter refuses a gang that has fewer than ``gang_size`` tasks in the round. Permit
refuses it when not every task got a host; the engine then unreserves all its groups,
so the tentative reservations never outlive the round.
"""

from __future__ import annotations

from peloton.placement.domain.framework import OK, Attempt, CycleState, Status, Unit
from peloton.placement.domain.types import Code

__all__ = ["Gang"]


class Gang:
    name = "gang"

    def prefilter(self, state: CycleState, unit: Unit) -> Status:
        if unit.gang_id is None:
            return OK
        sizes = sorted({g.gang_size for g in unit.groups})
        if len(sizes) > 1:
            return Status(
                Code.REJECTED,
                f"gang {unit.gang_id}: tasks disagree on gang_size ({sizes})",
            )
        if unit.task_count < unit.gang_size:
            return Status(
                Code.REJECTED,
                f"gang {unit.gang_id} incomplete: {unit.task_count} of {unit.gang_size} "
                "tasks in this round",
            )
        return OK

    def permit(self, state: CycleState, unit: Unit, attempts: list[Attempt]) -> Status:
        if unit.gang_id is None:
            return OK
        placed = sum(a.placed for a in attempts)
        if placed >= unit.task_count:
            return OK
        hosts = len({int(h) for a in attempts for h in a.hosts})
        why = next((a.shortfall.reason for a in attempts if not a.shortfall.ok), "")
        return Status(
            Code.REJECTED,
            f"gang {unit.gang_id} needs {unit.task_count} tasks, {placed} fit "
            f"(on {hosts} host(s))" + (f": {why}" if why else ""),
        )
