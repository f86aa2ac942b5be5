"""`peloton bench backlog` (peloton.resmgr.backlogbench) runs the real core on a queued
backlog: what it admits is bounded by the capacity, every other run stays pending, and
later ticks still admit nothing beyond it (figures only, no timing asserted)."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from peloton.cli import bench_cmd
from peloton.resmgr.backlogbench import backlog_tick_bench


def test_a_backlog_beyond_capacity_is_admitted_up_to_it() -> None:
    r = backlog_tick_bench(jobs=300, hosts=2, task_cpu=1.0, ticks=2, seed=3, ends=0)
    assert r["admitted"] == 2 * 64  # 64 one-cpu runs per host, not one more
    assert r["admitted"] + r["pending"] == r["runs"]
    assert r["first_tick_s"] >= 0 and r["later_tick_max_s"] >= r["later_tick_median_s"]


def test_a_draining_backlog_admits_what_ends_and_is_explained_once() -> None:
    """Runs end before every later tick: each tick admits as many again (the freed cpus,
    not more), and a pending run's reason is published again only when what it says
    changes (once, when the oldest blocked run starts reserving the budget), not at
    every admission."""
    r = backlog_tick_bench(jobs=300, hosts=2, task_cpu=1.0, ticks=8, seed=3, ends=5)
    assert r["admitted"] == 2 * 64 + 8 * 5
    assert r["admitted"] - 8 * 5 + r["pending"] == r["runs"]
    # later ticks: the queue once (held back), and at most the runs each tick admitted,
    # ended or brought (2 new) besides; every reason again at each admission would be
    # about 8 times the queue
    assert r["reasons_first_tick"] > 1000
    assert r["reasons_later_ticks"] <= r["reasons_first_tick"] + 8 * (5 + 2)


def test_a_backlog_within_capacity_is_admitted_whole() -> None:
    r = backlog_tick_bench(jobs=100, hosts=4, task_cpu=0.1, ticks=1, seed=3, ends=0)
    assert r["pending"] == 0 and r["admitted"] == r["runs"]


def test_a_negative_number_of_ends_is_refused_by_name() -> None:
    root = typer.Typer()

    @root.callback()
    def main() -> None:
        """peloton"""

    bench_cmd.register(root)
    result = CliRunner().invoke(root, ["bench", "backlog", "--ends", "-1"])
    assert result.exit_code == 2 and "--ends" in result.output


def test_unconfirmed_admissions_stay_provisional_and_are_not_admitted_again() -> None:
    """No decision comes back: every admission of the burst stays provisional, and the
    later ticks admit only the runs that arrived since (never one of the burst again)."""
    r = backlog_tick_bench(jobs=200, hosts=4, task_cpu=0.1, ticks=3, seed=3, ends=5,
                           unconfirmed=True)
    assert r["pending"] == r["runs"] == r["admitted"] == r["provisional"]
    assert r["unconfirmed"] and r["runs"] > 200
