"""Named entitlement examples: each table row is a scenario a person can check by hand."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Mapping

import pytest

from peloton.model.resources import Resources
from peloton.resmgr.domain.entitlement import PoolEntitlement, PoolUsage, compute_entitlements
from peloton.resmgr.domain.poolconfig import PoolConfig, ReservationType, ResourceSpec
from peloton.resmgr.domain.pooltree import PoolTree, build_tree

STATIC = ReservationType.STATIC


def cpu_pools(
    capacity: float,
    pools: Mapping[str, tuple[float, float, float] | tuple[float, float, float, ReservationType]],
) -> PoolTree:
    """Pools given as {"/a/b": (reservation, limit, share[, type])}, cpu only."""
    entries = []
    for path, spec in pools.items():
        parent, _, name = path.rpartition("/")
        rtype = spec[3] if len(spec) == 4 else ReservationType.ELASTIC  # type: ignore[misc]
        entries.append(
            (
                parent or "/",
                PoolConfig.create(name, {"cpu": ResourceSpec(spec[0], spec[1], spec[2], rtype)}),
            )
        )
    tree, _ = build_tree(entries, Resources(cpu=capacity))
    return tree


def cpu_of(result: Mapping[str, PoolEntitlement]) -> dict[str, float]:
    return {p: round(e.entitlement.cpu, 3) for p, e in result.items()}


def demand(**by_pool: float) -> dict[str, PoolUsage]:
    return {
        "/" + k.replace("__", "/"): PoolUsage(demand=Resources(cpu=v)) for k, v in by_pool.items()
    }


THREE_EQUAL = {"/RP1": (20, 100, 1), "/RP2": (20, 100, 1), "/RP3": (20, 100, 1)}
NESTED = {
    "/respool1": (10, 1000, 1),
    "/respool1/respool11": (10, 1000, 1),
    "/respool1/respool12": (10, 1000, 1),
    "/respool2": (10, 1000, 1),
    "/respool2/respool21": (10, 1000, 1),
    "/respool2/respool22": (10, 1000, 1),
    "/respool3": (10, 1000, 1),
}

# (name, capacity, pools, usage, expected cpu entitlement per path)
EXAMPLES = [
    (
        "user guide step 1: idle reservation goes to the busy pools",
        100,
        THREE_EQUAL,
        demand(RP1=10, RP2=80, RP3=80),
        {"/": 100, "/RP1": 10, "/RP2": 45, "/RP3": 45},
    ),
    (
        "user guide step 2: equal demand, equal split",
        100,
        THREE_EQUAL,
        demand(RP1=50, RP2=80, RP3=80),
        {"/": 100, "/RP1": 33.333, "/RP2": 33.333, "/RP3": 33.333},
    ),
    (
        "two pools, equal share, one idle: the busy one gets everything up to its limit",
        100,
        {"/a": (0, 70, 1), "/b": (0, 100, 1)},
        demand(a=500),
        {"/": 100, "/a": 70, "/b": 30},
    ),
    (
        "shares weigh the split of what is left after reservations",
        90,
        {"/a": (0, 100, 1), "/b": (0, 100, 2)},
        demand(a=100, b=100),
        {"/": 90, "/a": 30, "/b": 60},
    ),
    (
        "a satisfied pool's unused share is water-filled to the others exactly",
        100,
        {"/a": (0, 100, 1), "/b": (0, 100, 1), "/c": (0, 100, 1)},
        demand(a=10, b=100, c=100),
        {"/": 100, "/a": 10, "/b": 45, "/c": 45},
    ),
    (
        "idle capacity is lent by share but capped at limits, the cut redistributed",
        100,
        {"/a": (0, 20, 1), "/b": (0, 100, 1)},
        {},
        {"/": 100, "/a": 20, "/b": 80},
    ),
    (
        "everything at its limit: the parent keeps the remainder",
        100,
        {"/a": (0, 20, 1), "/b": (0, 30, 1)},
        demand(a=100, b=100),
        {"/": 100, "/a": 20, "/b": 30},
    ),
    (
        "STATIC holds its reservation without demand; ELASTIC gives it away",
        100,
        {"/s": (40, 40, 1, STATIC), "/e": (40, 40, 1), "/busy": (0, 100, 1)},
        demand(busy=100),
        {"/": 100, "/s": 40, "/e": 0, "/busy": 60},
    ),
    (
        "hosts lost: reservations scaled down proportionally",
        30,
        {"/a": (40, 100, 1, STATIC), "/b": (20, 100, 1, STATIC)},
        {},
        {"/": 30, "/a": 20, "/b": 10},
    ),
    (
        "no capacity at all",
        0,
        {"/a": (10, 100, 1)},
        demand(a=5),
        {"/": 0, "/a": 0},
    ),
    (
        "Peloton nested step 1 (demand on respool11): same as Peloton's 33.3 / 13.3",
        100,
        NESTED,
        demand(respool1__respool11=20),
        {
            "/": 100,
            "/respool1": 46.667,
            "/respool1/respool11": 33.333,
            "/respool1/respool12": 13.333,
            "/respool2": 26.667,
            "/respool2/respool21": 13.333,
            "/respool2/respool22": 13.333,
            "/respool3": 26.667,
        },
    ),
    (
        "Peloton nested step 2 (+ respool21): 30/10/30 as in Peloton",
        100,
        NESTED,
        demand(respool1__respool11=20, respool2__respool21=20),
        {
            "/": 100,
            "/respool1": 40,
            "/respool1/respool11": 30,
            "/respool1/respool12": 10,
            "/respool2": 40,
            "/respool2/respool21": 30,
            "/respool2/respool22": 10,
            "/respool3": 20,
        },
    ),
    (
        "Peloton nested step 3 (+ respool22): 26.7 each, respool2 53.3, respool3 13.3",
        100,
        NESTED,
        demand(respool1__respool11=20, respool2__respool21=20, respool2__respool22=20),
        {
            "/": 100,
            "/respool1": 33.333,
            "/respool1/respool11": 26.667,
            "/respool1/respool12": 6.667,
            "/respool2": 53.333,
            "/respool2/respool21": 26.667,
            "/respool2/respool22": 26.667,
            "/respool3": 13.333,
        },
    ),
]


@pytest.mark.parametrize(
    ("capacity", "pools", "usage", "expected"),
    [pytest.param(*row[1:], id=str(row[0])) for row in EXAMPLES],
)
def test_entitlement_examples(
    capacity: float,
    pools: Mapping[str, tuple[float, float, float]],
    usage: dict[str, PoolUsage],
    expected: dict[str, float],
) -> None:
    result = compute_entitlements(cpu_pools(capacity, pools), Resources(cpu=capacity), usage)
    assert cpu_of(result) == pytest.approx(expected, abs=1e-3)


def test_allocation_counts_like_demand() -> None:
    tree = cpu_pools(100, THREE_EQUAL)
    usage = {
        "/RP1": PoolUsage(allocation=Resources(cpu=6), demand=Resources(cpu=4)),
        "/RP2": PoolUsage(allocation=Resources(cpu=80)),
        "/RP3": PoolUsage(demand=Resources(cpu=80)),
    }
    assert cpu_of(compute_entitlements(tree, Resources(cpu=100), usage)) == {
        "/": 100,
        "/RP1": 10,
        "/RP2": 45,
        "/RP3": 45,
    }


def test_requirement_is_reported_and_capped_at_limit() -> None:
    tree = cpu_pools(100, {"/a": (0, 30, 1), "/a/x": (0, 30, 1), "/a/y": (0, 30, 1)})
    result = compute_entitlements(tree, Resources(cpu=100), demand(a__x=25, a__y=25))
    assert result["/a/x"].requirement.cpu == 25
    assert result["/a"].requirement.cpu == 30  # min(limit, 25 + 25)
    assert result["/a"].entitlement.cpu == 30
    assert result["/a/x"].entitlement.cpu == pytest.approx(15)


def test_static_child_is_asked_for_by_its_elastic_parent() -> None:
    """A STATIC grandchild's reservation counts in its ancestors' requirement."""
    tree = cpu_pools(
        100,
        {"/p": (50, 100, 1), "/p/s": (30, 100, 1, STATIC), "/busy": (0, 100, 1)},
    )
    result = cpu_of(compute_entitlements(tree, Resources(cpu=100), demand(busy=100)))
    assert result["/p/s"] == 30
    assert result["/busy"] == 70


def test_usage_on_unknown_or_inner_pools_is_ignored() -> None:
    tree = cpu_pools(100, {"/a": (0, 100, 1), "/a/x": (0, 100, 1), "/b": (0, 100, 1)})
    usage = {
        "/a": PoolUsage(demand=Resources(cpu=90)),
        "/ghost": PoolUsage(demand=Resources(cpu=90)),
    }
    result = cpu_of(compute_entitlements(tree, Resources(cpu=100), usage))
    assert result == {"/": 100, "/a": 50, "/a/x": 50, "/b": 50}


def test_empty_tree_has_only_the_root() -> None:
    result = compute_entitlements(PoolTree.empty(), Resources(cpu=8, memory=16), {})
    assert list(result) == ["/"]
    assert result["/"].entitlement == Resources(cpu=8, memory=16)


def test_negative_inputs_count_as_zero() -> None:
    tree = cpu_pools(100, {"/a": (0, 100, 1), "/b": (0, 100, 1)})
    usage = {"/a": PoolUsage(demand=Resources(cpu=-50)), "/b": PoolUsage(demand=Resources(cpu=60))}
    assert cpu_of(compute_entitlements(tree, Resources(cpu=-1), usage)) == {
        "/": 0,
        "/a": 0,
        "/b": 0,
    }
    # b gets its 60; the idle 40 is lent out by share (20 each)
    assert cpu_of(compute_entitlements(tree, Resources(cpu=100), usage)) == {
        "/": 100,
        "/a": 20,
        "/b": 80,
    }


# ----------------------------------------------------------------------------- slack

ALL_KINDS = {
    "cpu": ResourceSpec(10, 1000, 1),
    "memory": ResourceSpec(100, 1000, 1),
    "disk": ResourceSpec(1000, 1000, 1),
    "gpu": ResourceSpec(1, 4, 1),
}


def nested_all_kinds() -> PoolTree:
    entries = [
        (parent, PoolConfig.create(name, ALL_KINDS))
        for parent, name in [
            ("/", "respool1"),
            ("/", "respool2"),
            ("/", "respool3"),
            ("/respool1", "respool11"),
            ("/respool1", "respool12"),
            ("/respool2", "respool21"),
            ("/respool2", "respool22"),
        ]
    ]
    tree, _ = build_tree(entries)
    return tree


CAPACITY = Resources(cpu=100, memory=1000, disk=6000, gpu=0)


def test_peloton_nested_all_kinds() -> None:
    usage = {"/respool1/respool11": PoolUsage(demand=Resources(cpu=20, memory=200, disk=2000))}
    result = compute_entitlements(nested_all_kinds(), CAPACITY, usage)
    r11 = result["/respool1/respool11"].entitlement
    r12 = result["/respool1/respool12"].entitlement
    assert r11.as_dict() == pytest.approx(
        {"cpu": 33.333, "memory": 333.333, "disk": 1000, "gpu": 0}, abs=1e-3
    )
    assert r12.as_dict() == pytest.approx(
        {"cpu": 13.333, "memory": 133.333, "disk": 0, "gpu": 0}, abs=1e-3
    )


def test_slack_carve_out_and_revocable_cpu_split_match_peloton() -> None:
    """Peloton's slack test: 80 revocable cpus; memory/disk carved at 20% of reservation."""
    usage = {
        "/respool1/respool11": PoolUsage(slack_demand=Resources(cpu=20, memory=200, disk=2000)),
        "/respool2/respool21": PoolUsage(
            slack_demand=Resources(cpu=20, memory=10, disk=50),
            slack_allocation=Resources(cpu=5, memory=5, disk=25),
        ),
        "/respool3": PoolUsage(slack_demand=Resources(cpu=20, memory=10, disk=100)),
    }
    result = compute_entitlements(nested_all_kinds(), CAPACITY, usage, Resources(cpu=80))
    slack = {p: e.slack_entitlement for p, e in result.items()}
    assert (slack["/respool1/respool11"].memory, slack["/respool1/respool11"].disk) == (20, 200)
    assert (slack["/respool2/respool21"].memory, slack["/respool2/respool21"].disk) == (15, 75)
    assert (slack["/respool3"].memory, slack["/respool3"].disk) == (10, 100)
    cpus = {p: round(s.cpu, 6) for p, s in slack.items()}
    assert cpus["/respool1/respool11"] == 22.5
    assert cpus["/respool1/respool12"] == 2.5
    assert cpus["/respool2/respool21"] == 27.5
    assert cpus["/respool2/respool22"] == 2.5
    assert cpus["/respool3"] == 25
    for path, e in result.items():
        assert e.nonslack_entitlement.cpu == e.entitlement.cpu
        for kind in ("memory", "disk", "gpu"):
            total = e.nonslack_entitlement.get(kind) + e.slack_entitlement.get(kind)
            assert total == pytest.approx(e.entitlement.get(kind)), path

    # respool12 now asks for 30 revocable cpus: more than the 80 can satisfy
    usage["/respool1/respool12"] = PoolUsage(slack_demand=Resources(cpu=30, memory=20, disk=20))
    result = compute_entitlements(nested_all_kinds(), CAPACITY, usage, Resources(cpu=80))
    cpus = {p: round(e.slack_entitlement.cpu, 6) for p, e in result.items()}
    assert cpus["/respool1"] == 35 and cpus["/respool2"] == 25 and cpus["/respool3"] == 20
    assert cpus["/respool1/respool11"] == 17.5 and cpus["/respool1/respool12"] == 17.5
    assert cpus["/respool2/respool21"] == 25 and cpus["/respool2/respool22"] == 0


def test_slack_never_eats_non_slack_requirement() -> None:
    tree, _ = build_tree([("/", PoolConfig.create("a", {"memory": ResourceSpec(100, 100, 1)}))])
    usage = {"/a": PoolUsage(demand=Resources(memory=90), slack_demand=Resources(memory=50))}
    e = compute_entitlements(tree, Resources(memory=100), usage)["/a"]
    assert e.entitlement.memory == 100
    assert e.slack_entitlement.memory == pytest.approx(10)  # min(100 - 90, min(20, 50))
    assert e.nonslack_entitlement.memory == pytest.approx(90)


def test_revocable_cpus_shrinking_below_allocations_scale_down() -> None:
    tree = cpu_pools(100, {"/a": (0, 100, 1), "/b": (0, 100, 1)})
    usage = {
        "/a": PoolUsage(slack_allocation=Resources(cpu=30)),
        "/b": PoolUsage(slack_allocation=Resources(cpu=10)),
    }
    result = compute_entitlements(tree, Resources(cpu=100), usage, Resources(cpu=20))
    assert result["/a"].slack_entitlement.cpu == pytest.approx(15)
    assert result["/b"].slack_entitlement.cpu == pytest.approx(5)


def test_pool_entitlement_is_an_immutable_value() -> None:
    e = PoolEntitlement(Resources(cpu=2), Resources(cpu=1), Resources(cpu=2), Resources(cpu=3))
    assert e.entitlement == Resources(cpu=2) and e.requirement == Resources(cpu=3)
    assert pickle.loads(pickle.dumps(e)) == e == copy.deepcopy(e)
    assert hash(e) == hash(copy.copy(e))
    assert "slack_entitlement=Resources(cpu=1.0, memory=0.0" in repr(e)
    with pytest.raises(AttributeError):
        e.entitlement = Resources()  # type: ignore[misc]
