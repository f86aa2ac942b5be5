"""Filter + Reserve: dynamic ports from the host's free port ranges.

A task asking for N named ports needs N free ports on its host. Reserve takes the lowest
free ports, task by task, and keeps them in the cycle state for Bind, which hands them
out by name; Unreserve returns them to the host's pool.
"""

from __future__ import annotations

import numpy as np

from peloton.placement.domain.framework import OK, CycleState, Status, TaskGroup
from peloton.placement.domain.hostindex import IntArray

__all__ = ["Ports"]


class Ports:
    name = "ports"
    static = False

    def applies(self, state: CycleState, group: TaskGroup) -> bool:
        return bool(group.ports)

    def describe(self, state: CycleState, group: TaskGroup) -> str:
        return f"{len(group.ports)} free port(s)"

    def filter(self, state: CycleState, group: TaskGroup, hosts: IntArray) -> IntArray:
        out: IntArray = state.port_counts[hosts] // len(group.ports)
        return out

    def reserve(
        self, state: CycleState, group: TaskGroup, hosts: IntArray, counts: IntArray
    ) -> Status:
        n = len(group.ports)
        if n == 0:
            return OK
        grants = state.port_grants.setdefault(group.ordinal, {})
        for host, count in zip(hosts.tolist(), counts.tolist(), strict=True):
            ports = state.port_pool(host).take(n * count)  # the lowest, task after task
            grants[host] = [ports[i:i + n] for i in range(0, n * count, n)]
        state.port_counts[hosts] -= counts * n
        return OK

    def unreserve(
        self, state: CycleState, group: TaskGroup, hosts: IntArray, counts: IntArray
    ) -> None:
        grants = state.port_grants.pop(group.ordinal, {})
        for host, lists in grants.items():
            state.port_pool(host).give_back(p for ports in lists for p in ports)
        if group.ports:
            state.port_counts[hosts] += counts * np.int64(len(group.ports))
