"""The runner hands a launch or kill only to the agent of its host (the record's key), in
the order of its partition, and an agent with nothing keyed to it is not visited."""

from __future__ import annotations

from collections import Counter

from peloton.model.event import Event
from peloton.runner import batch_job, cluster


def test_each_agent_handles_only_the_launches_and_kills_of_its_host() -> None:
    runner = cluster(seed=3, hosts=6, cpu=2.0, trace=True)
    runner.submit([batch_job(f"j{i}", instances=4, cpu=0.5, duration_s=2.0)
                   for i in range(6)])
    assert runner.run_until(runner.watch.all_terminal, max_ms=60_000)
    assert runner.watch.states() == {"SUCCEEDED": 6} and not runner.watch.violations
    assert runner.trace is not None
    by_agent: Counter[str] = Counter()
    for d in runner.trace:
        if d.topic in ("task-launch-requested", "task-kill-requested") and (
                d.service.startswith("agent-")):
            rec = runner.logs[(d.topic, d.partition)][d.offset]
            assert d.service == f"agent-{rec.key.decode()}"  # its own host's record only
            by_agent[d.service] += 1
    launches = sum(len(runner.logs[("task-launch-requested", p)]) for p in range(4))
    assert sum(by_agent.values()) == launches + sum(
        len(runner.logs[("task-kill-requested", p)]) for p in range(4))
    assert runner.errors == [] and runner.dead_letters() == 0


def test_a_launch_for_a_host_no_agent_serves_is_noted_and_reaches_it_when_it_comes() -> None:
    runner = cluster(seed=1, hosts=2)
    body = {"host": "host-9", "incarnation": "gone", "at": runner.now, "launches": []}
    runner.publish([Event("TaskLaunchRequested", "host-9", body)])
    assert any("no agent serves host b'host-9'" in n for n in runner.notes)
    handled = {n: runner.nodes[n].handled for n in ("agent-host-1", "agent-host-2")}
    runner.run_for(500)
    assert {n: runner.nodes[n].handled for n in handled} == handled  # not theirs
    runner.add_agent("host-9")  # the host's agent starts later: it reads what is its own
    runner.run_for(500)
    assert runner.nodes["agent-host-9"].handled == 1
    assert runner.backlog()["agent-host-9"] == 0 and runner.dead_letters() == 0
