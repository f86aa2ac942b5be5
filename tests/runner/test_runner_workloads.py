"""All four job types at once on the production cores (in-memory runner, simulated
agents, simulated time): a service with a health check, a daemon, a stateful job whose
instance keeps exiting, and batch jobs; then a rolling update of the service and a
maintenance of one host. The runner's watch checks all along that no task runs twice at
once; this test checks that the service never has more instances down than its SLA
allows once it is up."""

from __future__ import annotations

from typing import Any

import pytest
from test_runner_holds import STATEFUL

from peloton.model.event import Event
from peloton.model.jobfile import parse_job_file
from peloton.runner import MemoryRunner, batch_job, cluster

SERVICE = """\
name: web
type: SERVICE
instanceCount: 3
sla: {maximumUnavailableInstances: 1}
placementStrategy: SPREAD_JOB
defaultConfig:
  resource: {cpuLimit: 1, memLimitMb: 64}
  command: {value: sleep 100000}
  healthCheck: {type: COMMAND, commandCheck: {command: check}, initialIntervalSecs: 1,
                intervalSecs: 1}
"""
DAEMON = """\
name: node
type: DAEMON
defaultConfig:
  resource: {cpuLimit: 0.5, memLimitMb: 16}
  command: {value: sleep 100000}
"""


def jobs(runner: MemoryRunner) -> Any:
    return runner.core("jobmgr").book.jobs


def running(runner: MemoryRunner, job_id: str) -> list[Any]:
    return [t for t in jobs(runner)[job_id].tasks if t.state.value == "RUNNING"]


def healthy(runner: MemoryRunner, job_id: str) -> int:
    return sum(1 for t in running(runner, job_id) if t.health == "HEALTHY")


def maintenance(runner: MemoryRunner, host: str, command: str) -> None:
    runner.publish([Event("HostMaintenanceRequested", host, {
        "host": host, "command": command, "deadline_ms": None, "requested_by": "test",
        "at": runner.now})])


@pytest.mark.timeout(120)
def test_every_workload_type_update_and_maintenance_on_the_real_cores() -> None:
    runner = cluster(seed=3, hosts=4, cpu=4.0)
    web = parse_job_file(SERVICE, "web", runner.now)
    runner.submit([web, parse_job_file(DAEMON, "node", runner.now),
                   parse_job_file(STATEFUL, "db", runner.now),
                   batch_job("etl", 6, cpu=0.5, duration_s=3.0)])
    assert runner.run_until(lambda: healthy(runner, "web") == 3 and len(
        running(runner, "node")) == 4 and runner.watch.states().get("SUCCEEDED") == 1,
        max_ms=60_000), runner.watch.states()
    assert len({t.host for t in running(runner, "node")}) == 4  # one per host
    # the stateful instance exits every 2 s and comes back on its volume's host
    assert runner.run_until(lambda: jobs(runner)["db"].tasks[0].run >= 3, max_ms=120_000)
    db = jobs(runner)["db"].tasks[0]
    assert db.pinned_host == db.volume_host is not None

    def web_within_sla() -> bool:
        down = 3 - healthy(runner, "web")
        assert down <= 1, [(t.instance, t.state, t.health) for t in jobs(runner)["web"].tasks]
        return False

    # rolling update, checked at every step of simulated time; in place: same hosts
    hosts_before = [t.host for t in jobs(runner)["web"].tasks]
    config = dict(web, default_config={**web["default_config"], "command": "sleep 99999"})
    runner.publish([Event("JobUpdateRequested", "web", {
        "job_id": "web", "update_id": "u1", "at": runner.now, "requested_by": "test",
        "config": config, "settings": {"batch_size": 1}})])
    done = False
    for _ in range(600):
        runner.run_for(100)
        web_within_sla()
        rec = runner.core("jobmgr").book.updates.get("web")
        if rec is not None and rec.update.status.state.value == "SUCCEEDED":
            done = True
            break
    assert done, runner.core("jobmgr").book.updates.get("web")
    assert [t.config_version for t in jobs(runner)["web"].tasks] == [2, 2, 2]
    assert [t.host for t in jobs(runner)["web"].tasks] == hosts_before
    assert {t.state.value for t in jobs(runner)["web"].tasks} == {"RUNNING"}

    # maintenance of a host that runs web (not db's host): drained within web's SLA
    target = next(t.host for t in running(runner, "web") if t.host != db.volume_host)
    maintenance(runner, target, "start_maintenance")

    def host_state() -> str:  # as the host manager announced it (HostStateChanged)
        return str(runner.core("jobmgr").book.hosts.views[target].state.value)

    for _ in range(600):
        runner.run_for(100)
        web_within_sla() if healthy(runner, "web") else None
        if host_state() == "DOWN":
            break
    assert host_state() == "DOWN"
    on_target = [(j, t.instance) for j, job in jobs(runner).items() for t in job.tasks
                 if t.host == target and t.state.value in ("RUNNING", "LAUNCHED", "STARTING")]
    assert on_target == []
    assert runner.run_until(lambda: healthy(runner, "web") == 3, max_ms=30_000)
    # web's runs there were replaced first: each new run started while the old one served
    assert runner.watch.handovers >= 1
    assert len(running(runner, "node")) == 3  # the daemon left the host last
    maintenance(runner, target, "complete_maintenance")
    assert runner.run_until(lambda: len(running(runner, "node")) == 4, max_ms=30_000)
    assert runner.watch.violations == []
    assert runner.dead_letters() == 0
