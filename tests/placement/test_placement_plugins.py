"""Each plugin on its own, driven through a CycleState: named example tables."""

from __future__ import annotations

import numpy as np
import pytest
from _placement_builders import cycle, host, job, n_hosts

from peloton.model.constraint import (
    Condition,
    HostLabelConstraint,
    LabelConstraint,
    LabelKind,
    LabelOp,
    MaxPerHostConstraint,
    parse_constraint,
)
from peloton.model.resources import Resources
from peloton.placement.domain.framework import BIG, Attempt, Unit
from peloton.placement.domain.plugins.bind import DefaultBind
from peloton.placement.domain.plugins.capacity import Capacity
from peloton.placement.domain.plugins.free_resources import FreeResources
from peloton.placement.domain.plugins.gang import Gang
from peloton.placement.domain.plugins.gpu_scarcity import GpuScarcity
from peloton.placement.domain.plugins.host_constraint import HostConstraint
from peloton.placement.domain.plugins.least_allocated import LeastAllocated
from peloton.placement.domain.plugins.most_allocated import MostAllocated
from peloton.placement.domain.plugins.pack import Pack
from peloton.placement.domain.plugins.ports import Ports
from peloton.placement.domain.plugins.preference import Preference
from peloton.placement.domain.plugins.spread import Spread
from peloton.placement.domain.plugins.task_constraint import TaskConstraint
from peloton.placement.domain.plugins.task_labels import TaskLabels
from peloton.placement.domain.types import Code, Strategy

ALL = np.arange(4, dtype=np.int64)


def got(values: np.ndarray | None) -> list[float]:
    assert values is not None
    return list(values.tolist())


# --------------------------------------------------------------------------- capacity / free

FREE_EXAMPLES = [
    # name, host free cpus, task cpu, expected per-host counts
    ("exact fit counts", [8, 4, 3, 0], 2.0, [4, 2, 1, 0]),
    ("fractional cpus fit within epsilon", [0.3, 0.2, 1, 0.6], 0.1, [3, 2, 10, 6]),
]


@pytest.mark.parametrize(("name", "free", "cpu", "expected"), FREE_EXAMPLES,
                         ids=[e[0] for e in FREE_EXAMPLES])
def test_free_resources_counts_tasks_per_host(name, free, cpu, expected) -> None:  # type: ignore[no-untyped-def]
    hosts = [host(f"h{i}", cpu=8, free=Resources(f, 131072, 10**6)) for i, f in enumerate(free)]
    state, (group,) = cycle(hosts, job("j", 1, cpu=cpu))
    assert got(FreeResources().filter(state, group, ALL)) == expected


def test_free_resources_reserve_and_unreserve_are_inverse() -> None:
    state, (group,) = cycle(n_hosts(4, cpu=8), job("j", 1, cpu=2, memory=100))
    plugin = FreeResources()
    before = state.free.copy()
    hosts, counts = np.array([1, 3]), np.array([2, 1])
    plugin.reserve(state, group, hosts, counts)
    assert state.free[0].tolist() == [8, 4, 8, 6]
    plugin.unreserve(state, group, hosts, counts)
    assert np.array_equal(state.free, before)


def test_revocable_tasks_use_slack_only() -> None:
    hosts = [host("a", cpu=8, slack=Resources(4, 4096)), host("b", cpu=8)]
    state, (group,) = cycle(hosts, job("j", 1, cpu=2, revocable=True))
    assert got(FreeResources().filter(state, group, np.arange(2))) == [2, 0]
    assert FreeResources().describe(state, group).startswith("free slack")


def test_capacity_is_static_and_ignores_usage() -> None:
    hosts = [host("a", cpu=8, free=Resources()), host("b", cpu=2)]
    state, (group,) = cycle(hosts, job("j", 1, cpu=4))
    assert Capacity.static
    assert got(Capacity().filter(state, group, np.arange(2))) == [BIG, 0]


# --------------------------------------------------------------------------- ports

def test_ports_filter_reserve_and_give_back() -> None:
    hosts = [host("a", ports=((31000, 31004),)), host("b", ports=((40000, 40001), (40001, 40003)))]
    state, (group,) = cycle(hosts, job("j", 1, ports=("http", "admin")))
    plugin = Ports()
    assert got(plugin.filter(state, group, np.arange(2))) == [2, 2]  # 5 and 4 free ports
    plugin.reserve(state, group, np.array([0, 1]), np.array([2, 1]))
    assert state.port_grants[group.ordinal].tolist() == [[31000, 31001], [31002, 31003],
                                                         [40000, 40001]]
    assert got(plugin.filter(state, group, np.arange(2))) == [0, 1]
    plugin.unreserve(state, group, np.array([0, 1]), np.array([2, 1]))
    assert got(plugin.filter(state, group, np.arange(2))) == [2, 2]
    assert state.port_pool(0).take(5) == [31000, 31001, 31002, 31003, 31004]


# --------------------------------------------------------------------------- constraints

HOSTS_BY_ZONE = [host("a", labels={"zone": "x"}), host("b", labels={"zone": "y"}),
                 host("c", labels={"zone": "z", "ssd": "1"}), host("d")]
HOST_CONSTRAINT_EXAMPLES = [
    ("equals", HostLabelConstraint("zone", LabelOp.EQUALS, ("x",)), [1, 0, 0, 0]),
    ("in", HostLabelConstraint("zone", LabelOp.IN, ("x", "z", "nowhere")), [1, 0, 1, 0]),
    ("not in keeps hosts without the label", HostLabelConstraint("zone", LabelOp.NOT_IN, ("x",)),
     [0, 1, 1, 1]),
    ("exists", HostLabelConstraint("ssd", LabelOp.EXISTS), [0, 0, 1, 0]),
    ("not exists", HostLabelConstraint("zone", LabelOp.NOT_EXISTS), [0, 0, 0, 1]),
    ("peloton HOST equal 1", LabelConstraint(LabelKind.HOST, Condition.EQUAL, "zone", "y", 1),
     [0, 1, 0, 0]),
    ("peloton HOST less than 1 is anti-affinity",
     LabelConstraint(LabelKind.HOST, Condition.LESS_THAN, "zone", "y", 1), [1, 0, 1, 1]),
    ("hostname is a host label",
     LabelConstraint(LabelKind.HOST, Condition.EQUAL, "hostname", "d", 1), [0, 0, 0, 1]),
    ("or of labels", parse_constraint({"orConstraint": {"constraints": [
        {"hostLabel": {"key": "zone", "equals": "x"}},
        {"hostLabel": {"key": "ssd", "exists": True}}]}}), [1, 0, 1, 0]),
]


@pytest.mark.parametrize(("name", "constraint", "expected"), HOST_CONSTRAINT_EXAMPLES,
                         ids=[e[0] for e in HOST_CONSTRAINT_EXAMPLES])
def test_host_constraint(name, constraint, expected) -> None:  # type: ignore[no-untyped-def]
    state, (group,) = cycle(HOSTS_BY_ZONE, job("j", 1, constraint=constraint))
    plugin = HostConstraint()
    assert plugin.applies(state, group) and plugin.static
    assert [int(x > 0) for x in got(plugin.filter(state, group, ALL))] == expected


HOSTS_WITH_TASKS = [host("a"), host("b", tasks={"peloton.job_id=web": 1}),
                    host("c", tasks={"peloton.job_id=web": 2, "tier=db": 1}), host("d")]
TASK_CONSTRAINT_EXAMPLES = [
    # the group's own job is "web": its tasks carry peloton.job_id=web
    ("one per host (carried label)",
     LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, "peloton.job_id", "web", 1),
     [1, 0, 0, 1]),
    ("at most two per host", MaxPerHostConstraint(2), [2, 1, 0, 2]),
    ("equal on carried label allows one step",
     LabelConstraint(LabelKind.TASK, Condition.EQUAL, "peloton.job_id", "web", 1),
     [0, 1, 0, 0]),
    ("greater than on carried label holds for ever",
     LabelConstraint(LabelKind.TASK, Condition.GREATER_THAN, "peloton.job_id", "web", 0),
     [0, BIG, BIG, 0]),
    ("affinity to another label (not carried)",
     LabelConstraint(LabelKind.TASK, Condition.GREATER_THAN, "tier", "db", 0), [0, 0, BIG, 0]),
    ("anti-affinity to another label (not carried)",
     LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, "tier", "db", 1), [BIG, BIG, 0, BIG]),
]


@pytest.mark.parametrize(("name", "constraint", "expected"), TASK_CONSTRAINT_EXAMPLES,
                         ids=[e[0] for e in TASK_CONSTRAINT_EXAMPLES])
def test_task_constraint(name, constraint, expected) -> None:  # type: ignore[no-untyped-def]
    state, (group,) = cycle(HOSTS_WITH_TASKS, job("web", 5, constraint=constraint))
    plugin = TaskConstraint()
    assert plugin.applies(state, group) and not plugin.static
    assert got(plugin.filter(state, group, ALL)) == expected


def test_task_labels_reserve_is_seen_by_later_groups() -> None:
    tasks = job("web", 2) + job("db", 1, constraint=LabelConstraint(
        LabelKind.TASK, Condition.LESS_THAN, "peloton.job_id", "web", 1))
    state, groups = cycle(n_hosts(4), tasks)
    web = next(g for g in groups if g.job_id == "web")
    db = next(g for g in groups if g.job_id == "db")
    TaskLabels().reserve(state, web, np.array([0, 2]), np.array([1, 1]))
    assert got(TaskConstraint().filter(state, db, ALL)) == [0, BIG, 0, BIG]
    TaskLabels().unreserve(state, web, np.array([0, 2]), np.array([1, 1]))
    assert got(TaskConstraint().filter(state, db, ALL)) == [BIG] * 4


# --------------------------------------------------------------------------- gpu

def test_gpu_hosts_are_a_later_tier_for_cpu_tasks() -> None:
    hosts = [host("a"), host("g", gpu=4)]
    state, (cpu_group,) = cycle(hosts, job("j", 1))
    assert got(GpuScarcity().tier(state, cpu_group, np.arange(2))) == [0, 1]
    assert not GpuScarcity().applies(state, cpu_group)
    state, (gpu_group,) = cycle(hosts, job("j", 1, gpu=1))
    assert GpuScarcity().tier(state, gpu_group, np.arange(2)) is None


def test_gpu_hosts_exclusive_filters_them_out() -> None:
    state, (group,) = cycle([host("a"), host("g", gpu=4)], job("j", 1), gpu_hosts_exclusive=True)
    plugin = GpuScarcity()
    assert plugin.applies(state, group)
    assert got(plugin.filter(state, group, np.arange(2))) == [BIG, 0]


# --------------------------------------------------------------------------- scores

def test_most_and_least_allocated_mirror_each_other() -> None:
    hosts = [host("a", cpu=8, free=Resources(2, 131072, 10**6)), host("b", cpu=8)]
    state, (pack,) = cycle(hosts, job("j", 1, cpu=1, memory=0))
    assert got(MostAllocated().score(state, pack, np.arange(2))) == [0.75, 0.0]
    assert LeastAllocated().score(state, pack, np.arange(2)) is None  # PACK group
    state, (spread,) = cycle(hosts, job("j", 1, cpu=1, memory=0, strategy=Strategy.SPREAD))
    assert got(LeastAllocated().score(state, spread, np.arange(2))) == [0.25, 1.0]


def test_preference_scores_weighted_share_of_preferences_met() -> None:
    c = parse_constraint([{"prefer": {"hostLabel": {"key": "zone", "equals": "x"}}, "weight": 3},
                          {"prefer": {"hostLabel": {"key": "ssd", "exists": True}}}])
    state, (group,) = cycle(HOSTS_BY_ZONE, job("j", 1, constraint=c))
    assert got(Preference().score(state, group, ALL)) == [0.75, 0.0, 0.25, 0.0]


# --------------------------------------------------------------------------- assign

def test_pack_fills_best_scored_hosts_first() -> None:
    state, (group,) = cycle(n_hosts(4), job("j", 5))
    counts = Pack().assign(state, group, ALL, np.array([2, 2, 2, 2]),
                           np.array([0.1, 0.9, 0.5, 0.9]), 5)
    assert counts.tolist() == [0, 2, 1, 2]  # ties by host position


def test_spread_balances_zones_then_hosts() -> None:
    hosts = [host(f"h{i}", labels={"zone": "ab"[i % 2]}) for i in range(6)]
    state, (group,) = cycle(hosts, job("svc", 4, strategy=Strategy.SPREAD))
    counts = Spread().assign(state, group, np.arange(6), np.full(6, 4), np.zeros(6), 4)
    assert counts.tolist() == [1, 1, 1, 1, 0, 0]


def test_spread_counts_tasks_already_running() -> None:
    hosts = [host("a", tasks={"peloton.job_id=svc": 2}), host("b"), host("c")]
    state, (group,) = cycle(hosts, job("svc", 4, strategy=Strategy.SPREAD),
                            failure_domain_key=None)
    counts = Spread().assign(state, group, np.arange(3), np.full(3, 4), np.zeros(3), 4)
    assert counts.tolist() == [0, 2, 2]


# --------------------------------------------------------------------------- gang / bind

def test_gang_prefilter_and_permit() -> None:
    state, groups = cycle(n_hosts(2), job("mpi", 3, gang=True)[:2])
    unit = Unit("mpi", 3, groups)
    status = Gang().prefilter(state, unit)
    assert status.code is Code.REJECTED and "2 of 3 tasks" in status.reason
    state, groups = cycle(n_hosts(2), job("mpi", 3, gang=True))
    unit = Unit("mpi", 3, groups)
    assert Gang().prefilter(state, unit).ok
    short = Attempt(groups[0], np.array([0]), np.array([2]))
    status = Gang().permit(state, unit, [short])
    assert status.code is Code.REJECTED and "needs 3 tasks, 2 fit" in status.reason
    assert Gang().permit(state, unit, [Attempt(groups[0], np.array([0, 1]),
                                               np.array([2, 1]))]).ok


def test_bind_hands_out_task_ids_in_order_with_ports() -> None:
    state, (group,) = cycle(n_hosts(2), job("web", 3, ports=("http",)))
    hosts, counts = np.array([0, 1]), np.array([2, 1])
    Ports().reserve(state, group, hosts, counts)
    placements = DefaultBind().bind(state, Attempt(group, hosts, counts))
    assert [(p.task_id, p.host, p.ports) for p in placements] == [
        ("web-0", "h0", {"http": 31000}), ("web-1", "h0", {"http": 31001}),
        ("web-2", "h1", {"http": 31000})]
