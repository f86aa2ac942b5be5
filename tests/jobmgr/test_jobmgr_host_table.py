"""The job manager's host table (`peloton.jobmgr.domain.hosts`): the newest view per host
wins, and the draining list, kept as views are applied, is what a scan would find."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given

from peloton.jobmgr.domain.hosts import HostTable
from peloton.model.hoststate import HostState

_changes = st.lists(st.tuples(st.sampled_from([f"host-{i}" for i in range(6)]),
                              st.sampled_from(list(HostState)), st.integers(0, 20)),
                    max_size=60)


def _body(host: str, state: HostState, at: int) -> dict[str, object]:
    return {"host": host, "state": state.value, "present": True, "labels": {}, "at": at}


@given(_changes)
def test_draining_is_the_scan_of_the_newest_views(changes: list[tuple[str, HostState, int]]
                                                  ) -> None:
    table = HostTable()
    newest: dict[str, tuple[int, HostState]] = {}
    for host, state, at in changes:
        table.apply(_body(host, state, at))
        if host not in newest or at >= newest[host][0]:
            newest[host] = (at, state)
    scan = sorted(h for h, (_, s) in newest.items() if s is HostState.DRAINING)
    assert [v.name for v in table.draining()] == scan
    again = HostTable.from_data(table.to_data())  # a snapshot keeps the same list
    assert [v.name for v in again.draining()] == scan


def test_many_hosts_none_draining_until_one_drains() -> None:
    """Each change asks for the draining hosts (drains are decided per change); with
    10,000 hosts registering that used to sort every host per change (the job manager
    then spent 15 s on a cluster's start: `bench scale --hosts 10000`)."""
    table = HostTable()
    for i in range(10_000):
        table.apply(_body(f"host-{i}", HostState.UP, 1))
        assert table.draining() == []
    table.apply(_body("host-7", HostState.DRAINING, 2))
    assert [v.name for v in table.draining()] == ["host-7"]
