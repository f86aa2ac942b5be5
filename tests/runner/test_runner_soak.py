"""A soak on the real cores: waves of small jobs, a service killed in every wave, and the
cores' state flat from wave to wave.

Eight waves of 30 jobs (1-8 tasks each) on 8 hosts, every core with a retention window of
2 s. In each wave one scheduling service (drawn from the seed) is killed -9 while the wave
is in flight and started again, from its newest snapshot in two waves out of three and by
a full replay in the third. After each wave the cluster idles past the retention window,
then each core's size is read twice:
- its snapshot's entries (`footprint(core.snapshot())`: the state a restart carries):
  never above what it was after the first wave; the job manager's forgotten-id
  fingerprints (8 bytes per job that left, by design, see jobmgr.domain.retention) are a
  blob in the snapshot and are checked apart: one per job submitted so far;
- its live entries (`footprint(core)`, caches included, fingerprints excluded), the
  smallest of ten readings 100 ms apart: at most twice what it was after the first two
  waves (placement's host caches come and go with offers; one entry kept per task would
  add over 100 a wave).
Every job succeeds, no task runs twice at once, nothing is dead-lettered.
(Agents are not checked: the simulated agent keeps every run it ever accepted.)
"""

from __future__ import annotations

import random
from typing import Any

from runner_scenarios import small_jobs, stuck_summary, with_retention

from peloton.runner import SERVICES, MemoryRunner, cluster
from peloton.runner.footprint import footprint

WAVES = 8
JOBS = 30
RETENTION_MS = 2_000


def forgotten(runner: MemoryRunner) -> int:
    return len(runner.core("jobmgr").book.forgotten)


def live_sizes(runner: MemoryRunner) -> dict[str, int]:
    """The smallest of ten readings 100 ms apart of each core's live footprint."""
    out: dict[str, int] = {}
    for _ in range(10):
        runner.run_for(100)
        for name, core in runner.cores().items():
            size = footprint(core) - (forgotten(runner) if name == "jobmgr" else 0)
            out[name] = min(out.get(name, size), size)
    return out


def snapshot_sizes(runner: MemoryRunner) -> dict[str, int]:
    return {name: footprint(core.snapshot()) for name, core in runner.cores().items()}


def test_waves_with_kills_all_finish_and_the_cores_stay_flat() -> None:
    rng = random.Random(11)
    runner = cluster(seed=11, hosts=8, rate_per_s=500, services=with_retention(RETENTION_MS),
                     snapshot_interval_ms=1_000)
    live: list[dict[str, int]] = []
    snaps: list[dict[str, int]] = []
    killed: list[str] = []
    for wave in range(WAVES):
        runner.submit(small_jobs(rng, f"wave{wave}", JOBS))
        runner.run_for(rng.randrange(200, 800))
        assert not runner.watch.all_terminal()
        victim = rng.choice(sorted(SERVICES))
        runner.restart(victim, use_snapshot=wave % 3 != 2)
        killed.append(victim)
        assert runner.run_until(runner.watch.all_terminal, max_ms=30_000), \
            f"wave {wave}: {stuck_summary(runner)}"
        runner.run_for(2 * RETENTION_MS)
        assert forgotten(runner) == JOBS * (wave + 1)  # every job so far left the book
        live.append(live_sizes(runner))
        snaps.append(snapshot_sizes(runner))

    assert runner.watch.states() == {"SUCCEEDED": WAVES * JOBS}
    assert runner.watch.violations == []
    assert runner.errors == [] and runner.dead_letters() == 0 and runner.notes == []
    assert len(set(killed)) >= 3 and sum(n.restored for n in runner.nodes.values()) >= 2
    assert_flat("snapshot entries", snaps, lambda first: first)
    early = {n: max(s[n] for s in live[:2]) for n in live[0]}
    assert_flat("live entries", live, lambda _: early, factor=2)


def assert_flat(what: str, sizes: list[dict[str, int]], base: Any, factor: int = 1) -> None:
    ceiling = {n: factor * v for n, v in base(sizes[0]).items()}
    grown = {(wave, n): v for wave, s in enumerate(sizes) for n, v in s.items()
             if v > ceiling[n]}
    assert not grown, f"{what} above {ceiling} (by wave, service): {grown}; all: {sizes}"
