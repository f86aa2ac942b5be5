"""A host table kept across rounds and updated row by row places exactly as one built
afresh from the same views (the placement service keeps one; see board.py), and ports
are handed out lowest first whether a host's first free range suffices or not."""

from __future__ import annotations

import dataclasses

import pytest
from _placement_builders import host, job, n_hosts
from hypothesis import given
from hypothesis import strategies as st
from test_placement_properties import PROFILE, hosts_st, tasks_st

from peloton.model.resources import Resources
from peloton.placement.checker import check_round
from peloton.placement.domain import (
    HostTable,
    HostView,
    PlacementConfig,
    PlacementInputError,
    TaskRequest,
    place,
)

PARTIAL = PlacementConfig(partial_scan_from=1, scan_block=2, joint_pack_max_tasks=0)


@st.composite
def changed_st(draw: st.DrawFn, before: list[HostView]) -> list[HostView]:
    """Some of ``before``'s hosts with everything but their names redrawn."""
    redrawn = draw(hosts_st())
    out = []
    for old, new in zip(before, redrawn, strict=False):
        if draw(st.booleans()):
            out.append(dataclasses.replace(new, name=old.name))
    return out


@PROFILE
@given(st.data(), hosts_st(), tasks_st(), tasks_st(), st.sampled_from([None, PARTIAL]))
def test_an_updated_table_places_as_a_fresh_one(  # type: ignore[no-untyped-def]
    data, hosts, warm_up_tasks, tasks, config
) -> None:
    config = config or PlacementConfig()
    table = HostTable(hosts)
    place(table, warm_up_tasks, config)  # builds the lazy indexes the update must keep
    changed = data.draw(changed_st(hosts))
    table.update(changed)
    now = {h.name: h for h in hosts} | {h.name: h for h in changed}
    fresh = place(list(now.values()), tasks, config)
    assert place(table, tasks, config) == fresh
    assert check_round(list(now.values()), tasks, fresh) == []


def test_update_keeps_task_label_counts_labels_and_capacity_current() -> None:
    table = HostTable([host("a", cpu=4, tasks={"peloton.job_id=web": 1}),
                       host("b", cpu=4, labels={"zone": "x"})])
    table.warm_up(("zone",))
    assert table.task_label_counts("peloton.job_id=web").tolist() == [1, 0]
    table.update([host("a", cpu=4), host("b", cpu=8, labels={"zone": "y"},
                                            tasks={"peloton.job_id=web": 2})])
    assert table.task_label_counts("peloton.job_id=web").tolist() == [0, 2]
    assert table.code_of("zone", "y") == 0 and table.code_of("zone", "x") < 0
    assert table.capacity[0].tolist() == [4, 8] and table.min_capacity[0] == 4


def test_update_refuses_a_host_the_table_does_not_have() -> None:
    table = HostTable(n_hosts(2))
    with pytest.raises(PlacementInputError, match="not in this table"):
        table.update([host("zz")])


def test_free_can_be_overwritten_in_place_between_rounds() -> None:
    table = HostTable(n_hosts(2, cpu=4))
    table.free[0] = [0.0, 4.0]
    assert {p.host for p in place(table, job("j", 2, cpu=2)).placements} == {"h1"}


def ports_of(result_placements: list) -> list[int]:  # type: ignore[type-arg]
    return [port for p in result_placements for port in p.ports.values()]


def test_ports_go_lowest_first_across_short_ranges() -> None:
    hosts = [host("a", ports=((31000, 31001), (31005, 31006)))]
    first = job("a1", 1, ports=("http",))
    second = job("b2", 3, ports=("http",))
    result = place(hosts, first + second)
    assert [p.task_id for p in result.placements] == ["a1-0", "b2-0", "b2-1", "b2-2"]
    assert ports_of(result.placements) == [31000, 31001, 31005, 31006]


def test_ports_of_an_unreserved_gang_are_handed_out_again() -> None:
    hosts = [host("a", cpu=4, ports=((31000, 31003),))]
    gang = [TaskRequest(f"g-{i}", "g", Resources(2, 1024), ("p",), gang_id="g", gang_size=3)
            for i in range(3)]  # needs 6 cpus: refused whole, its ports given back
    result = place(hosts, gang + job("j", 2, ports=("p", "q")))
    assert set(result.unplaced) == {"g-0", "g-1", "g-2"}
    assert ports_of(result.placements) == [31000, 31001, 31002, 31003]
