"""The hang of issue 8, reproduced on the real cores: a burst of small jobs must all finish.

300 jobs of 1-8 tasks of 0.1 cpu (about 1,350 tasks) are submitted at once to 20 hosts
of 64 cpus: everything fits at once, so every job must succeed within seconds. Each
service reads 500 records per simulated second, so the burst backs every service up for
seconds, as a 2,000-job burst does on the dev broker; facts about one run then reach a
service in any order across topics. Before the fix every seed left 5-15% of the jobs
hanging forever (tasks stuck READY or PLACED on an idle cluster):
- the job manager read an agent's report (or the host manager's launch) before the
  placement, dropped it as an illegal transition, and the run stayed PLACED;
- it read TasksAdmitted after PlacementMade (or after the launch) and moved the run back
  to READY, where every later report was dropped;
- placement read its own PlacementMade back after the host manager's rejection of that
  round (the host manager, behind on job-events, refused "unknown job"), so the run stayed
  "in flight" on its board and was never placed again.
"""

from __future__ import annotations

import random

import pytest
from runner_scenarios import small_jobs, stuck_summary

from peloton.runner import cluster

SEEDS = [1, 2, 3, 4]
JOBS = 300
BOUND_MS = 60_000


@pytest.mark.parametrize("seed", SEEDS)
def test_a_burst_of_small_jobs_all_succeed_and_no_task_runs_twice(seed: int) -> None:
    runner = cluster(seed=seed, hosts=20, cpu=64.0, rate_per_s=500)
    jobs = small_jobs(random.Random(seed), f"burst{seed}", JOBS)
    runner.submit(jobs)

    finished = runner.run_until(runner.watch.all_terminal, max_ms=BOUND_MS)

    assert finished, f"seed {seed}: not all jobs terminal after {BOUND_MS} ms: " \
                     f"{stuck_summary(runner)}"
    assert runner.watch.states() == {"SUCCEEDED": JOBS}
    assert runner.watch.violations == []
    assert runner.errors == [] and runner.dead_letters() == 0
