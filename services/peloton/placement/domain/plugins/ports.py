"""Filter + Reserve: dynamic ports from the host's free port ranges.

A task asking for N named ports needs N free ports on its host. Reserve hands out the
lowest free ports, task by task, and keeps them in the cycle state for Bind, which hands
them out by name; Unreserve returns them to the host's pool. While a host's first free
range has room (the usual case) this is arithmetic over all the group's hosts at once;
otherwise the host's own allocator (`PortPool`) takes over.
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
        need = counts * n
        nxt = state.port_next
        begin = nxt[hosts]
        simple = begin + need <= state.table.port_first[1][hosts] + 1
        if state.port_pools:
            simple &= np.array([h not in state.port_pools for h in hosts.tolist()], dtype=bool)
        # task k of the group sits on host index of_task[k], as the k - first[...]th there
        of_task = np.repeat(np.arange(hosts.size), counts)
        first = np.cumsum(counts) - counts
        rank = np.arange(of_task.size) - first[of_task]
        numbers = (begin[of_task] + rank * n)[:, None] + np.arange(n)
        nxt[hosts[simple]] += need[simple]
        for i in (~simple).nonzero()[0].tolist():  # first range too short: the allocator
            count = int(counts[i])
            taken = state.port_pool(int(hosts[i])).take(n * count)
            numbers[first[i]:first[i] + count] = np.array(taken).reshape(count, n)
        state.port_grants[group.ordinal] = numbers
        state.port_counts[hosts] -= need
        return OK

    def unreserve(
        self, state: CycleState, group: TaskGroup, hosts: IntArray, counts: IntArray
    ) -> None:
        numbers = state.port_grants.pop(group.ordinal, None)
        if numbers is None:
            return
        first = (np.cumsum(counts) - counts).tolist()
        for host, start, count in zip(hosts.tolist(), first, counts.tolist(), strict=True):
            state.port_pool(host).give_back(numbers[start:start + count].ravel().tolist())
        state.port_counts[hosts] += counts * np.int64(len(group.ports))
