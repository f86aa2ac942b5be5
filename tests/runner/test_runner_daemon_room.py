"""A daemon arriving on full hosts preempts batch work there (production cores, in-memory
runner): hosts packed with preemptible batch tasks each get their daemon instance; the
preempted batch tasks are retried (not failed) and no task runs twice at once."""

from __future__ import annotations

from peloton.model.jobfile import parse_job_file
from peloton.runner import batch_job, cluster

DAEMON = """\
name: node
type: DAEMON
defaultConfig:
  resource: {cpuLimit: 0.2, memLimitMb: 16}
  command: {value: sleep 100000}
"""


def test_a_daemon_makes_room_on_full_hosts() -> None:
    runner = cluster(seed=5, hosts=3, cpu=2.0, memory=4096.0)
    runner.submit([batch_job("fill", 4, cpu=1.0, duration_s=600.0)])  # packs host 1 and 2
    book = runner.core("jobmgr").book
    assert runner.run_until(lambda: sum(t.state.value == "RUNNING"
                                        for t in book.jobs["fill"].tasks) == 4, 30_000)
    full = {t.host for t in book.jobs["fill"].tasks}
    assert len(full) == 2
    runner.submit([parse_job_file(DAEMON, "node", runner.now)])
    assert runner.run_until(lambda: "node" in book.jobs and sum(
        t.state.value == "RUNNING" for t in book.jobs["node"].tasks) == 3, 60_000)
    taken = [t for t in book.jobs["fill"].tasks if t.run > 1]
    assert len(taken) == len(full)  # one batch task per full host made the room
    history = [c for rec, etype, body in runner.records("job-events")
               if etype == "TaskStateChanged" and body["job_id"] == "fill"
               for c in body["changes"] if c["state"] == "PREEMPTING"]
    assert {c["host"] for c in history} == full
    assert all("DAEMON: daemon node/" in c["reason"] for c in history)
    assert all(t.failures == 0 for t in book.jobs["fill"].tasks)  # preempted, not failed
    assert runner.watch.violations == []
