"""Snapshots of the real cores in the middle of a burst.

- `restore(snapshot())` is exact: swapping every scheduling core for a new one restored
  from the JSON round trip of its snapshot, every 250 ms of a burst, leaves the log the
  same, record for record, as the run without swaps (same seed). A restore that forgets
  anything a core still needs changes what it publishes (the control test shows the
  check notices a core that forgets).
- A restart from a snapshot (kill -9, restore the newest snapshot, replay the tail) of
  each service in the middle of a burst loses no job and runs no task twice.
- A snapshot the core cannot read, or of an older version, falls back to a full replay
  with a note (the shell's warning), and the rebuilt core is the one that runs.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
from runner_scenarios import log_digest, small_jobs, stuck_summary

from peloton.placement.service import PlacementCore
from peloton.runner import SERVICES, MemoryRunner, cluster

START_MS = 1_700_000_000_000


def burst(seed: int, reload: bool, services: dict[str, Any] | None = None,
          max_ms: int = 30_000) -> tuple[MemoryRunner, int]:
    """A burst of 60 jobs run in slices of 250 ms until all are terminal (or `max_ms`);
    after each slice (if `reload`) every scheduling core is replaced by
    `restore(snapshot())`. Returns the runner and how many swaps it made."""
    runner = cluster(seed=seed, hosts=6, rate_per_s=200, services=services)
    runner.submit(small_jobs(random.Random(seed), f"burst{seed}", 60))
    swaps = 0
    while not runner.watch.all_terminal() and runner.now - START_MS < max_ms:
        runner.run_for(250)
        if reload:
            for name in SERVICES:
                before = runner.core(name)
                runner.reload(name)
                assert runner.core(name) is not before
                swaps += 1
    return runner, swaps


@pytest.mark.parametrize("seed", [1, 2])
def test_restoring_every_core_from_its_snapshot_mid_burst_changes_nothing(seed: int) -> None:
    plain, _ = burst(seed, reload=False)
    swapped, swaps = burst(seed, reload=True)
    assert swaps >= 4 * 8  # at least 8 rounds of swaps, all while work was in flight
    assert swapped.watch.states() == {"SUCCEEDED": 60}, stuck_summary(swapped)
    assert log_digest(swapped) == log_digest(plain)
    assert swapped.now == plain.now


def test_the_check_notices_a_core_that_forgets_on_restore() -> None:
    class Forgetful(PlacementCore):
        """Restores an empty board: it forgets the runs waiting to be placed."""

        def restore(self, state: dict[str, Any]) -> None:
            super().restore(PlacementCore().snapshot())

    plain, _ = burst(3, reload=False, max_ms=1_000)
    forgetful, _ = burst(3, reload=True, services={**SERVICES, "placement": Forgetful},
                         max_ms=1_000)
    assert log_digest(forgetful) != log_digest(plain)


def test_each_service_restarts_from_a_snapshot_mid_burst_and_every_job_finishes() -> None:
    runner = cluster(seed=4, hosts=6, rate_per_s=200, snapshot_interval_ms=None)
    runner.submit(small_jobs(random.Random(4), "burst4", 60))
    for name in SERVICES:
        runner.run_for(200)
        assert runner.take_snapshot(name)
        runner.run_for(150)  # a tail to replay after the snapshot
        runner.restart(name)
        assert runner.nodes[name].restored == 1, runner.notes
    assert not runner.watch.all_terminal()  # the restarts happened with work in flight
    assert runner.run_until(runner.watch.all_terminal, max_ms=30_000), stuck_summary(runner)
    assert runner.watch.states() == {"SUCCEEDED": 60}
    assert runner.watch.violations == []
    assert runner.errors == [] and runner.dead_letters() == 0 and runner.notes == []


@pytest.mark.parametrize("spoil", ["unreadable", "older version"])
def test_a_snapshot_the_core_cannot_use_falls_back_to_a_full_replay(spoil: str) -> None:
    runner = cluster(seed=5, hosts=3, snapshot_interval_ms=None)
    runner.submit(small_jobs(random.Random(5), "burst5", 20))
    runner.run_for(300)
    assert runner.take_snapshot("jobmgr")
    node = runner.nodes["jobmgr"]
    assert node.snapshot is not None
    node.snapshot = (replace(node.snapshot, state='{"jobs": 7}') if spoil == "unreadable"
                     else replace(node.snapshot, version=node.snapshot.version - 1))
    before = runner.core("jobmgr").snapshot()
    runner.restart("jobmgr")
    assert node.restored == 0 and len(runner.notes) == 1
    assert ("unusable" if spoil == "unreadable" else "full replay") in runner.notes[0]
    assert runner.core("jobmgr").snapshot() == before  # the replay rebuilt the same book
    assert runner.run_until(runner.watch.all_terminal, max_ms=30_000), stuck_summary(runner)
    assert runner.watch.states() == {"SUCCEEDED": 20} and runner.watch.violations == []
