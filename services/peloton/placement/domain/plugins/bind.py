"""Bind: reservations -> `Placement` records (host names, port numbers by name)."""

from __future__ import annotations

from peloton.placement.domain.framework import Attempt, CycleState
from peloton.placement.domain.types import Placement

__all__ = ["DefaultBind"]


class DefaultBind:
    name = "bind"

    def bind(self, state: CycleState, attempt: Attempt) -> list[Placement]:
        group = attempt.group
        names = state.table.names
        grants = state.port_grants.get(group.ordinal, {})
        ids = iter(group.task_ids)
        out: list[Placement] = []
        for host, count in zip(attempt.hosts.tolist(), attempt.counts.tolist(), strict=True):
            name = names[host]
            if group.ports:
                for ports in grants[host][:count]:
                    out.append(Placement(next(ids), name, dict(zip(group.ports, ports,
                                                                   strict=True))))
            else:
                out.extend(Placement(next(ids), name, {}) for _ in range(count))
        return out
