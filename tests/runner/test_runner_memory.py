"""The runner itself: the log, the shell it models, restarts, determinism, bad input."""

from __future__ import annotations

import hashlib

import pytest
from aiokafka.partitioner import DefaultPartitioner
from runner_scenarios import log_digest

from peloton.bus.catalog import INTERNAL_TOPICS, TOPICS
from peloton.bus.codec import EncodeError
from peloton.model.event import Event
from peloton.runner import HandlerFailed, MemoryRunner, batch_job, cluster, footprint, partition_for
from peloton.runner.watch import TaskView


def run_small(seed: int, **options: object) -> MemoryRunner:
    runner = cluster(seed=seed, hosts=3, **options)  # type: ignore[arg-type]
    runner.submit([batch_job(f"job-{i}", 1 + i % 3, duration_s=0.3) for i in range(12)])
    assert runner.run_until(runner.watch.all_terminal, max_ms=30_000), runner.watch.states()
    return runner


def test_partitions_are_kafkas_default_partitioner() -> None:
    choose = DefaultPartitioner()
    for key in (b"job-1", b"host-7", b"/default", b"offers", b""):
        for n in (1, 4, 12):
            assert partition_for(key, n) == choose(key, list(range(n)), list(range(n)))


def test_the_log_has_every_catalog_topic_and_partition() -> None:
    runner = MemoryRunner()
    assert set(runner.logs) == {(t.name, p) for t in (*TOPICS, *INTERNAL_TOPICS)
                                for p in range(t.partitions)}


def test_a_body_that_does_not_match_its_schema_fails_at_publish() -> None:
    runner = MemoryRunner()
    with pytest.raises(EncodeError):
        runner.publish([Event("JobSubmitted", "job-1", {"job_id": "job-1"})])


def test_small_jobs_all_succeed_and_the_watch_sees_every_run_end() -> None:
    runner = run_small(seed=3)
    assert runner.watch.states() == {"SUCCEEDED": 12}
    assert runner.watch.violations == [] and runner.watch.alive == {}
    assert runner.errors == [] and runner.dead_letters() == 0


def test_the_same_seed_gives_the_same_log_and_another_seed_another_order() -> None:
    assert log_digest(run_small(seed=5)) == log_digest(run_small(seed=5))
    assert log_digest(run_small(seed=5)) != log_digest(run_small(seed=6))


def test_run_until_gives_up_after_max_ms() -> None:
    runner = MemoryRunner(step_ms=10)
    start = runner.now
    assert runner.run_until(lambda: False, max_ms=200) is False
    assert runner.now == start + 200


def test_a_killed_service_restarts_from_the_log_and_the_work_still_finishes() -> None:
    runner = cluster(seed=2, hosts=3)
    runner.submit([batch_job(f"job-{i}", 2, duration_s=0.5) for i in range(10)])
    runner.run_for(300)
    runner.kill("jobmgr")
    handled_before = runner.nodes["jobmgr"].handled
    runner.run_for(700)  # records pile up while it is down
    assert runner.backlog().get("jobmgr") is None and "jobmgr" not in runner.cores()
    runner.start("jobmgr")
    assert runner.nodes["jobmgr"].starts == 2
    assert runner.run_until(runner.watch.all_terminal, max_ms=30_000), runner.watch.states()
    assert runner.watch.states() == {"SUCCEEDED": 10}
    assert runner.nodes["jobmgr"].handled > handled_before
    assert runner.watch.violations == []


def test_a_restart_skips_what_replay_folded_and_redelivers_what_was_not_committed() -> None:
    runner = cluster(seed=4, hosts=2, commit_interval_ms=10_000, snapshot_interval_ms=None)
    runner.submit([batch_job(f"job-{i}", 1, duration_s=0.2) for i in range(5)])
    runner.run_for(100)  # jobmgr has read job-submitted, nothing committed yet
    node = runner.nodes["jobmgr"]
    submitted = [(t, p) for (t, p) in node.inputs if t == "job-submitted"]
    assert sum(node.fetch[tp] for tp in submitted) == 5
    assert node.committed == {}
    runner.restart("jobmgr")
    # job-submitted is a replay topic: folded, so its records are skipped, not handled
    assert all(node.positions[tp] == len(runner.logs[tp]) for tp in submitted)
    assert all(node.fetch[tp] == 0 for tp in node.inputs)  # from the (empty) commit
    assert runner.run_until(runner.watch.all_terminal, max_ms=30_000)
    assert runner.watch.states() == {"SUCCEEDED": 5}


def test_a_killed_agent_loses_its_runs_and_comes_back_as_a_new_incarnation() -> None:
    runner = cluster(seed=1, hosts=1)
    runner.submit([batch_job("long", 2, duration_s=5.0)])
    assert runner.run_until(lambda: len(runner.watch.alive) == 2, max_ms=5_000)
    runner.kill("agent-host-1")
    assert runner.watch.alive == {}
    runner.start("agent-host-1")
    assert runner.core("agent-host-1").config.incarnation.endswith("-2")
    assert runner.run_until(runner.watch.all_terminal, max_ms=60_000), runner.watch.states()
    assert runner.watch.states() == {"SUCCEEDED": 1}
    assert {v.run for v in runner.watch.tasks.values()} == {2}  # LOST, then run 2
    assert runner.watch.violations == []


def test_redelivered_records_change_nothing() -> None:
    runner = run_small(seed=7, redeliver=0.2)
    assert runner.watch.states() == {"SUCCEEDED": 12}
    assert runner.watch.violations == [] and runner.errors == []


def test_an_undecodable_record_is_dead_lettered_and_strict_mode_says_so() -> None:
    runner = cluster(seed=1, hosts=1)
    runner.append_raw("job-submitted", 0, b"junk", b"not avro")
    with pytest.raises(HandlerFailed, match="marker"):
        runner.run_for(100)
    lenient = cluster(seed=1, hosts=1, strict=False)
    lenient.append_raw("job-submitted", 0, b"junk", b"not avro")
    lenient.submit([batch_job("after-junk", 1, duration_s=0.1)])
    assert lenient.run_until(lenient.watch.all_terminal, max_ms=10_000)
    assert lenient.dead_letters() == 1 and len(lenient.errors) == 1


def test_a_misplaced_event_is_dead_lettered() -> None:
    runner = cluster(seed=1, hosts=1, strict=False)
    value = runner.codec.encode("JobKillRequested", {"job_id": "x", "at": 0, "instances": []})
    runner.append_raw("job-submitted", 0, b"x", value)
    runner.run_for(100)
    assert runner.dead_letters() == 1
    assert "does not belong on topic job-submitted" in runner.errors[0]


def test_a_core_that_raises_stops_a_strict_run_and_is_dead_lettered_otherwise() -> None:
    class Broken:
        inputs = ("job-submitted",)
        replay: tuple[str, ...] = ()
        tick_interval = None

        def fold(self, etype: str, body: dict[str, object]) -> None: ...

        def handle(self, etype: str, body: dict[str, object], now: int) -> list[Event]:
            raise RuntimeError("boom")

        def tick(self, now: int) -> list[Event]:
            return []

        def after_replay(self, now: int) -> list[Event]:
            return []

    runner = MemoryRunner()
    runner.add_service("broken", Broken)
    runner.submit([batch_job("j", 1)])
    with pytest.raises(HandlerFailed, match="boom"):
        runner.run_for(50)
    lenient = MemoryRunner(strict=False)
    lenient.add_service("broken", Broken)
    lenient.submit([batch_job("j1", 1), batch_job("j2", 1)])
    lenient.run_for(50)
    assert lenient.dead_letters() == 2 and lenient.nodes["broken"].starts == 1
    dead = [body for _, _, body in lenient.records("dead-letters")]
    assert {d["service"] for d in dead} == {"broken"}
    assert all("boom" in d["reason"] for d in dead)


def test_reload_swaps_a_core_for_its_restored_snapshot_and_refuses_one_without() -> None:
    runner = cluster(seed=1, hosts=1)
    runner.submit([batch_job("j", 2, duration_s=0.5)])
    runner.run_for(200)
    before = runner.core("jobmgr")
    runner.reload("jobmgr")
    assert runner.core("jobmgr") is not before
    assert runner.core("jobmgr").snapshot() == before.snapshot()
    with pytest.raises(TypeError, match="no snapshots"):
        runner.reload("agent-host-1")
    assert runner.run_until(runner.watch.all_terminal, max_ms=10_000)


def test_footprint_counts_container_entries_once_and_only_inside_peloton() -> None:
    shared = [1, 2, 3]
    view = TaskView(1, "RUNNING", "host-1", "")  # a peloton object: walked, no entries
    assert footprint({"a": shared, "b": shared}) == 2 + 3  # two keys, the list once
    assert footprint([view, (1, 2)]) == 2 + 2
    assert footprint(MemoryRunner()) > 0  # walks the runner's own dicts
    assert footprint({"x": hashlib.sha256()}) == 1  # not ours: not walked
