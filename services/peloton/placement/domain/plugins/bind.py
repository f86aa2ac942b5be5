"""Bind: reservations -> `Placement` records (host names, port numbers by name).

Records are built at C speed (``zip`` makes the tuples, ``tuple.__new__`` types them), so
a placed task costs one tuple and, when it asked for ports, one dict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from itertools import repeat
from typing import Any, cast

from peloton.placement.domain.framework import Attempt, CycleState
from peloton.placement.domain.types import NO_PORTS, Placement

__all__ = ["DefaultBind"]

_placement = cast(Callable[[Iterable[Any]], Placement], partial(tuple.__new__, Placement))


class DefaultBind:
    name = "bind"

    def bind(self, state: CycleState, attempt: Attempt) -> list[Placement]:
        group = attempt.group
        names = state.table.names
        hosts: list[str] = []
        for host, count in zip(attempt.hosts.tolist(), attempt.counts.tolist(), strict=True):
            hosts += [names[host]] * count
        ids = group.task_ids[: len(hosts)]
        if not group.ports:
            return list(map(_placement, zip(ids, hosts, repeat(NO_PORTS))))
        if not hosts:
            return []
        numbers = state.port_grants[group.ordinal].tolist()
        port_names = group.ports
        if len(port_names) == 1:
            (only,) = port_names
            ports = [{only: port} for (port,) in numbers]
        else:
            ports = [dict(zip(port_names, row, strict=True)) for row in numbers]
        return list(map(_placement, zip(ids, hosts, ports, strict=True)))
