"""Smoke tests of the benchmark harness (small sizes; the figures are not asserted)."""

from __future__ import annotations

from peloton.resmgr.bench import admission_bench, entitlement_cycle_bench, three_level_tree
from peloton.resmgr.domain.pooltree import validate_tree


def test_bench_tree_is_valid_and_three_levels_deep() -> None:
    tree, usage = three_level_tree(300, seed=3)
    assert len(tree) == 301
    assert validate_tree(tree) == []
    assert max(p.count("/") for p in tree.preorder) == 3
    assert set(usage) == set(tree.leaves())


def test_entitlement_cycle_bench_reports_figures() -> None:
    figures = entitlement_cycle_bench(200, seed=1, runs=1)
    assert figures["pools"] == 200
    assert figures["cycle_ms"] > 0 and figures["cold_cycle_ms"] > 0


def test_admission_bench_reports_throughput() -> None:
    figures = admission_bench(500, seed=1, n_pools=10, runs=1)
    assert figures["gangs"] == 500 and figures["gangs_per_s"] > 0
