"""The job manager's TaskStateChanged of many jobs travel joined (peloton.bus.coalesce) in
the in-memory runner as on the real bus, and every reader (resource manager, placement,
host manager, the runner's own watch) still sees each job's facts: every job ends once."""

from __future__ import annotations

from collections import Counter

from runner_scenarios import assert_all_succeed_once, busy_cluster

from peloton.bus.catalog import topic
from peloton.bus.routing import partition_for


def test_a_burst_writes_joined_records_and_every_job_still_runs_once() -> None:
    runner = busy_cluster(5, 12, "join", 60, 1.0, 10)
    assert_all_succeed_once(runner)
    count = topic("job-events").partitions
    facts_per_record: Counter[tuple[int, int]] = Counter()
    for rec, etype, body in runner.records("job-events"):
        if etype == "TaskStateChanged":
            facts_per_record[(rec.partition, rec.offset)] += 1
            assert partition_for(body["job_id"].encode(), count) == rec.partition
    joined = [n for n in facts_per_record.values() if n > 1]
    assert joined, "no record joined several jobs' changes"
    # fewer records than per-job facts: what the readers no longer pay for
    assert len(facts_per_record) < sum(facts_per_record.values())
