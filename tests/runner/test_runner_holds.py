"""A stateful instance's room is held on its volume's host between its runs (hostmgr
holds, OfferReceived v3 `holds`): batch work submitted while the instance waits out its
restart backoff does not take that room, so its next run lands on its host again (on the
production cores: in-memory runner, simulated agents and time). The cluster has room for
all the work (the resource manager's admission counts capacity, not holds: with less, an
admitted batch run that cannot be placed could keep the stateful run from admission)."""

from __future__ import annotations

from typing import Any

import pytest

from peloton.model.jobfile import parse_job_file
from peloton.runner import MemoryRunner, batch_job, cluster

STATEFUL = """\
name: db
type: STATEFUL
instanceCount: 1
defaultConfig:
  resource: {cpuLimit: 1, memLimitMb: 64}
  command: {value: sleep 2}
  volume: {containerPath: /data}
"""


def tasks(runner: MemoryRunner, job_id: str) -> Any:
    return runner.core("jobmgr").book.jobs[job_id].tasks


@pytest.mark.timeout(60)
def test_batch_work_does_not_take_a_stateful_instances_room_between_its_runs() -> None:
    runner = cluster(seed=1, hosts=2, cpu=2.0)
    runner.submit([parse_job_file(STATEFUL, "db", runner.now)])
    # run 1 ran and ended: run 2 waits out its backoff, pinned to host-1
    assert runner.run_until(lambda: tasks(runner, "db")[0].run == 2, max_ms=30_000)
    held = runner.core("hostmgr").book.hosts["host-1"].holds
    assert [(key, h.run) for key, h in held.items()] == [(("db", 0), 1)]
    runner.submit([batch_job("fill", 3, cpu=1.0, duration_s=1000.0)])
    assert runner.run_until(lambda: all(t.state.value == "RUNNING"
                                        for t in tasks(runner, "fill")), max_ms=20_000)
    assert sorted(t.host for t in tasks(runner, "fill")) == ["host-1", "host-2", "host-2"]
    # the backoff passes: run 2 is placed in its held room on its volume's host
    assert runner.run_until(lambda: tasks(runner, "db")[0].run >= 3, max_ms=60_000), (
        tasks(runner, "db")[0].reason)
    assert tasks(runner, "db")[0].volume_host == "host-1"
    assert runner.watch.violations == []
