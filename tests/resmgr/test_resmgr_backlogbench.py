"""`peloton bench backlog` (peloton.resmgr.backlogbench) runs the real core on a queued
backlog: what it admits is bounded by the capacity, every other run stays pending, and
later ticks still admit nothing beyond it (figures only, no timing asserted)."""

from __future__ import annotations

from peloton.resmgr.backlogbench import backlog_tick_bench


def test_a_backlog_beyond_capacity_is_admitted_up_to_it() -> None:
    r = backlog_tick_bench(jobs=300, hosts=2, task_cpu=1.0, ticks=2, seed=3)
    assert r["admitted"] == 2 * 64  # 64 one-cpu runs per host, not one more
    assert r["admitted"] + r["pending"] == r["runs"]
    assert r["first_tick_s"] >= 0 and r["later_tick_max_s"] >= r["later_tick_median_s"]


def test_a_backlog_within_capacity_is_admitted_whole() -> None:
    r = backlog_tick_bench(jobs=100, hosts=4, task_cpu=0.1, ticks=1, seed=3)
    assert r["pending"] == 0 and r["admitted"] == r["runs"]
