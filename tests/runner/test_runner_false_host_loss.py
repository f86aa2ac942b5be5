"""A host declared lost that was only slow (a stalled agent, an overloaded host manager):
its runs were replaced elsewhere, so once it answers again the runs it still has, or
starts from launches it reads late, must not run on: the job manager kills each lost run
on its host (as Mesos shuts down the tasks of a returning agent). Found in
`bench burst --jobs 22000`: hosts lost under load, their runs replaced, and the agents
then ran both. While the host does not answer, both runs may be alive (the scheduler
cannot tell a slow host from a dead one); after it answers, never."""

from __future__ import annotations

import random

import pytest
from runner_scenarios import small_jobs

from peloton.runner import cluster


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("launched", ["before the stall", "during the stall"])
def test_the_runs_of_a_lost_host_that_answers_again_are_killed(seed: int,
                                                               launched: str) -> None:
    runner = cluster(seed=seed, hosts=4, cpu=4.0)
    runner.run_for(3_000)
    jobs = small_jobs(random.Random(seed), "svc", 20, durations=(60.0,))
    frozen = runner.nodes["agent-host-1"]
    if launched == "before the stall":
        runner.submit(jobs)
        assert runner.run_until(lambda: sum(t.state == "RUNNING" and t.host == "host-1"
                                            for t in runner.watch.tasks.values()) >= 2,
                                max_ms=20_000)
    frozen.next_tick_ms = runner.now + 8_000  # no heartbeat, no report for 8 s
    if launched == "during the stall":
        runner.submit(jobs)
    runner.run_for(12_000)  # lost after 5 s; answers again after 8 s; 4 s to settle
    lost = [b for _, e, b in runner.records("offer-received")
            if e == "HostLost" and b["host"] == "host-1"]
    assert lost and lost[0]["runs"]
    assert {k: r for k, r in runner.watch.alive.items() if len(r) > 1} == {}
    killed = {f"{k['job_id']}-{k['instance']}-{k['run']}"
              for _, e, b in runner.records("task-kill-requested")
              if e == "TaskKillRequested" and b["host"] == "host-1" for k in b["kills"]
              if "was declared lost with its host" in k["reason"]}
    assert killed == set(lost[0]["runs"])
    # and it counts in the capacity again (the resource manager once ignored it for good)
    assert runner.core("resmgr").manager.ledger.hosts["host-1"][0] is True
    assert runner.run_until(runner.watch.all_terminal, max_ms=200_000)
    assert runner.watch.states() == {"SUCCEEDED": 20}
