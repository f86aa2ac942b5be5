"""A host manager that stops reading for longer than the heartbeat timeout while its ticks
go on (its intake behind a burst, the broker unreachable for reads) must not declare the
whole cluster lost: every host looks silent at once, which says more about the host manager
than about the hosts (peloton.hostmgr.domain.silence). With the guard off it does lose them
all, and every run with them: the scenario is the failure the guard prevents."""

from __future__ import annotations

import random

import pytest
from runner_scenarios import small_jobs

from peloton.hostmgr.domain.silence import SilenceGuard
from peloton.hostmgr.service import HostManagerCore
from peloton.runner import SERVICES, cluster


@pytest.mark.parametrize("guard", [True, False])
def test_a_host_manager_that_stops_reading_for_a_while_loses_no_host(guard: bool) -> None:
    hostmgr = (HostManagerCore if guard
               else lambda: HostManagerCore(silence_guard=SilenceGuard(fraction=1.0)))
    runner = cluster(seed=3, hosts=12, cpu=4.0, services={**SERVICES, "hostmgr": hostmgr})
    runner.run_for(3_000)
    runner.submit(small_jobs(random.Random(3), "lag", 30, durations=(20.0,)))
    assert runner.run_until(lambda: sum(t.state == "RUNNING"
                                        for t in runner.watch.tasks.values()) >= 20,
                            max_ms=20_000)
    node = runner.nodes["hostmgr"]
    budget, node.budget = node.budget, 0  # reads nothing for 8 s; ticks go on
    runner.run_for(8_000)
    if guard:
        assert runner.core("hostmgr").book.silence_held == (12, 12)
    node.budget = budget
    runner.run_for(5_000)
    lost = {b["host"] for _, e, b in runner.records("offer-received") if e == "HostLost"}
    if not guard:
        assert len(lost) == 12
        return
    assert lost == set()
    assert runner.run_until(runner.watch.all_terminal, max_ms=120_000)
    states = runner.watch.states()
    assert set(states) == {"SUCCEEDED"}, states
    assert {k: r for k, r in runner.watch.alive.items() if len(r) > 1} == {}
