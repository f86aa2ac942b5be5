"""Hypothesis properties of the entitlement core and its water-filling."""

from __future__ import annotations

from dataclasses import dataclass

import hypothesis.strategies as st
import numpy as np
from hypothesis import given, settings

from peloton.model.resources import KINDS, Resources
from peloton.resmgr.domain.entitlement import (
    PoolEntitlement,
    PoolUsage,
    compute_entitlements,
    divide,
    waterfill,
    waterfill_batch,
)
from peloton.resmgr.domain.poolconfig import PoolConfig, ReservationType, ResourceSpec
from peloton.resmgr.domain.pooltree import ROOT, PoolTree, build_tree, child_path

TOL = 1e-6
EXAMPLES = settings(max_examples=60, deadline=None)

amounts = st.one_of(st.sampled_from([0.0, 5.0, 10.0, 20.0, 50.0, 100.0]), st.floats(0, 200))
shares = st.one_of(st.sampled_from([1.0, 2.0, 3.0]), st.floats(0.1, 5))


# --------------------------------------------------------------- water-filling oracle


def reference_waterfill(amount: float, weights: list[float], caps: list[float]) -> list[float]:
    """Textbook progressive filling: raise the level, retire members as they hit caps."""
    out = [0.0] * len(caps)
    active = [i for i, c in enumerate(caps) if c > 0]
    remaining = max(amount, 0.0)
    while active and remaining > 1e-12:
        level = remaining / sum(weights[i] for i in active)
        capped = [i for i in active if caps[i] - out[i] <= weights[i] * level]
        if not capped:
            for i in active:
                out[i] += weights[i] * level
            break
        for i in capped:
            remaining -= caps[i] - out[i]
            out[i] = caps[i]
        active = [i for i in active if i not in capped]
    return out


@EXAMPLES
@given(st.data())
def test_waterfill_matches_progressive_filling(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 8))
    caps = data.draw(st.lists(amounts, min_size=n, max_size=n))
    weights = data.draw(st.lists(shares, min_size=n, max_size=n))
    amount = data.draw(amounts)
    got = waterfill(amount, weights, caps)
    want = reference_waterfill(amount, weights, caps)
    assert np.allclose(got, want, atol=1e-6)
    assert sum(got) <= amount + TOL
    assert abs(sum(got) - min(amount, sum(caps))) <= 1e-6 * max(1.0, amount)
    assert all(0 <= g <= c + TOL for g, c in zip(got, caps, strict=True))


def test_waterfill_batch_columns_and_groups_are_independent() -> None:
    amount = np.array([[10.0, 0.0], [100.0, 5.0]])
    w = np.ones((2, 3, 2))
    caps = np.array([[[1, 9], [20, 9], [20, 9]], [[50, 0], [60, 1], [0, 9]]], dtype=float)
    out = waterfill_batch(amount, w, caps)
    assert np.allclose(out[0, :, 0], [1, 4.5, 4.5])
    assert np.allclose(out[0, :, 1], [0, 0, 0])
    assert np.allclose(out[1, :, 0], [50, 50, 0])
    assert np.allclose(out[1, :, 1], [0, 1, 4])


def test_divide_phases() -> None:
    # floors fit: 10 + 20, then wants (15, 40) by share, then caps
    assert np.allclose(divide(100, [10, 20], [15, 40], [15, 1000], [1, 1]), [15, 85])
    # floors exceed: scaled, nothing else
    assert np.allclose(divide(15, [10, 20], [50, 50], [100, 100], [1, 1]), [5, 10])


# ------------------------------------------------------------------ random scenarios


@dataclass(frozen=True)
class Scenario:
    tree: PoolTree
    capacity: Resources
    usage: dict[str, PoolUsage]
    slack_capacity: Resources


@st.composite
def scenarios(draw: st.DrawFn, max_pools: int = 9) -> Scenario:
    n = draw(st.integers(0, max_pools))
    paths: list[str] = []
    entries = []
    for i in range(n):
        parent = ROOT if i == 0 else draw(st.sampled_from([ROOT, *paths]))
        specs = {}
        for kind in KINDS:
            reservation = draw(amounts)
            limit = draw(st.one_of(amounts, st.just(reservation + draw(amounts))))
            rtype = draw(st.sampled_from([ReservationType.ELASTIC, ReservationType.STATIC]))
            specs[kind] = ResourceSpec(reservation, limit, draw(shares), rtype)
        config = PoolConfig.create(
            f"p{i}", specs, slack_limit_percent=draw(st.sampled_from([0, 20, 50]))
        )
        entries.append((parent, config))
        paths.append(child_path(parent, f"p{i}"))
    vectors = st.builds(Resources, amounts, amounts, amounts, amounts)
    usage = {
        p: PoolUsage(draw(vectors), draw(vectors), draw(vectors), draw(vectors))
        for p in paths
        if draw(st.booleans())
    }
    tree, _ = build_tree(entries)
    return Scenario(tree, draw(vectors), usage, Resources(cpu=draw(amounts)))


def run(s: Scenario) -> dict[str, PoolEntitlement]:
    return compute_entitlements(s.tree, s.capacity, s.usage, s.slack_capacity)


def eff_reservation(tree: PoolTree, path: str, kind: str) -> float:
    spec = tree.config(path).spec(kind)
    return min(max(0.0, spec.reservation), max(0.0, spec.limit))


def floor_of(tree: PoolTree, result: dict[str, PoolEntitlement], path: str, kind: str) -> float:
    spec = tree.config(path).spec(kind)
    res = eff_reservation(tree, path, kind)
    if spec.type is ReservationType.STATIC:
        return res
    return min(res, result[path].requirement.get(kind))


def check_entitlement_never_above_limit(s: Scenario, result: dict[str, PoolEntitlement]) -> None:
    for path in s.tree.preorder[1:]:
        limit = s.tree.config(path).limit
        for kind in KINDS:
            assert result[path].entitlement.get(kind) <= max(0.0, limit.get(kind)) + TOL


def check_children_never_sum_above_parent_and_leftover_only_when_all_at_limit(
    s: Scenario, result: dict[str, PoolEntitlement]
) -> None:
    assert result[ROOT].entitlement == s.capacity.clamp_non_negative()
    for path in s.tree.preorder:
        kids = s.tree.children(path)
        if not kids:
            continue
        for kind in KINDS:
            parent = result[path].entitlement.get(kind)
            total = sum(result[k].entitlement.get(kind) for k in kids)
            assert total <= parent + TOL
            if parent - total > 1e-6:
                for k in kids:
                    limit = max(0.0, s.tree.config(k).spec(kind).limit)
                    assert result[k].entitlement.get(kind) >= limit - 1e-6, (path, kind, k)


def check_reservations_honoured_when_they_fit(
    s: Scenario, result: dict[str, PoolEntitlement]
) -> None:
    """ELASTIC children get min(reservation, requirement), STATIC their reservation."""
    for path in s.tree.preorder:
        kids = s.tree.children(path)
        for kind in KINDS:
            floors = {k: floor_of(s.tree, result, k, kind) for k in kids}
            if sum(floors.values()) > result[path].entitlement.get(kind):
                continue  # reservations do not fit: scaled down instead
            for k in kids:
                assert result[k].entitlement.get(kind) >= floors[k] - TOL, (k, kind)


def check_no_idle_lending_while_a_sibling_is_short(
    s: Scenario, result: dict[str, PoolEntitlement]
) -> None:
    """Capacity beyond a pool's requirement is only lent once every sibling is satisfied."""
    for path in s.tree.preorder:
        kids = s.tree.children(path)
        for kind in KINDS:
            short = [
                k
                for k in kids
                if result[k].entitlement.get(kind) < result[k].requirement.get(kind) - 1e-6
            ]
            if not short:
                continue
            for k in kids:
                ceiling = max(floor_of(s.tree, result, k, kind), result[k].requirement.get(kind))
                assert result[k].entitlement.get(kind) <= ceiling + TOL, (k, kind, short)


def check_same_input_same_output(s: Scenario, result: dict[str, PoolEntitlement]) -> None:
    rebuilt, _ = build_tree(
        [(s.tree.node(p).parent or ROOT, s.tree.config(p)) for p in s.tree.preorder[1:]]
    )
    again = compute_entitlements(
        rebuilt, s.capacity, dict(reversed(s.usage.items())), s.slack_capacity
    )
    assert result == again == run(s)
    assert list(result) == list(s.tree.preorder)


def check_slack_is_carved_inside_the_entitlement(
    s: Scenario, result: dict[str, PoolEntitlement]
) -> None:
    for path, e in result.items():
        assert e.nonslack_entitlement.cpu == e.entitlement.cpu
        for kind in ("memory", "disk", "gpu"):
            slack = e.slack_entitlement.get(kind)
            assert -TOL <= slack <= e.entitlement.get(kind) + TOL
            assert abs(e.nonslack_entitlement.get(kind) + slack - e.entitlement.get(kind)) <= TOL
        if path != ROOT:
            limit = s.tree.config(path).slack_limit()
            for kind in ("memory", "disk", "gpu"):
                assert e.slack_entitlement.get(kind) <= max(0.0, limit.get(kind)) + TOL


def check_revocable_cpus_are_divided_not_invented(
    s: Scenario, result: dict[str, PoolEntitlement]
) -> None:
    assert result[ROOT].slack_entitlement.cpu == s.slack_capacity.cpu
    for path in s.tree.preorder:
        kids = s.tree.children(path)
        if kids:
            total = sum(result[k].slack_entitlement.cpu for k in kids)
            assert abs(total - result[path].slack_entitlement.cpu) <= 1e-6  # all of it, no more


@settings(max_examples=120, deadline=None)
@given(scenarios())
def test_entitlement_invariants(s: Scenario) -> None:
    """All entitlement properties, checked on each random tree (one draw, one run)."""
    result = run(s)
    check_entitlement_never_above_limit(s, result)
    check_children_never_sum_above_parent_and_leftover_only_when_all_at_limit(s, result)
    check_reservations_honoured_when_they_fit(s, result)
    check_no_idle_lending_while_a_sibling_is_short(s, result)
    check_same_input_same_output(s, result)
    check_slack_is_carved_inside_the_entitlement(s, result)
    check_revocable_cpus_are_divided_not_invented(s, result)
