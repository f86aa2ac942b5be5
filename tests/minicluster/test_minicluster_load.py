"""The load-test plumbing's pure parts: overlap check, percentiles, history copies, the
simulated-agent fleet's routing; and reading topics to their end, over a fake consumer."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import TopicPartition

from peloton.agent.app import AgentConfig
from peloton.minicluster import load
from peloton.minicluster.burst import job_sizes
from peloton.minicluster.fleet import AgentFleetCore
from peloton.minicluster.load import (
    JobFollower,
    RunHistory,
    on_host_overlaps,
    percentile,
    read_to_end,
)
from peloton.minicluster.restartbench import Captured, copy_record, rebuild_figures
from peloton.model.resources import Resources


def runs(**spans: list[tuple[int, str]]) -> dict[tuple[str, int, int], RunHistory]:
    """runs(r1=[(at, state), ...], r2=...) for job "j", instance 0."""
    return {("j", 0, int(k[1:])): RunHistory([(at, s, "h") for at, s in v])
            for k, v in spans.items()}


def test_runs_one_after_the_other_do_not_overlap() -> None:
    assert on_host_overlaps(runs(r1=[(1, "LAUNCHING"), (5, "RUNNING"), (9, "LOST")],
                                 r2=[(9, "READY"), (12, "LAUNCHING"), (20, "SUCCEEDED")])) == []


def test_a_second_run_on_host_before_the_first_ended_is_reported() -> None:
    bad = on_host_overlaps(runs(r1=[(1, "RUNNING"), (10, "SUCCEEDED")],
                                r2=[(5, "LAUNCHING"), (8, "RUNNING")]))
    assert len(bad) == 1 and "run 1" in bad[0] and "run 2" in bad[0]


def test_a_run_that_never_ended_overlaps_every_later_run_on_host() -> None:
    bad = on_host_overlaps(runs(r1=[(1, "RUNNING")], r2=[(5, "RUNNING"), (6, "FAILED")],
                                r3=[(7, "RUNNING")]))
    assert len(bad) == 2


def test_runs_never_on_host_are_ignored() -> None:
    assert on_host_overlaps(runs(r1=[(1, "READY"), (2, "KILLED")],
                                 r2=[(1, "PLACED"), (3, "KILLED")])) == []


def test_percentile_is_nearest_rank() -> None:
    values = list(range(1, 101))
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([7], 99) == 7.0
    assert percentile([], 50) is None


def test_job_sizes_are_seeded_and_in_range() -> None:
    sizes = job_sizes(500, 1, 8, seed=7)
    assert sizes == job_sizes(500, 1, 8, seed=7) != job_sizes(500, 1, 8, seed=8)
    assert min(sizes) == 1 and max(sizes) == 8


def test_follower_counts_stuck_tasks_of_unfinished_jobs_only() -> None:
    f = JobFollower("unused:0")
    f.want({"a": 2, "b": 1})
    f._fold("TaskStateChanged", {"job_id": "a", "at": 5, "changes": [
        {"instance": 0, "run": 1, "state": "PLACED", "host": None},
        {"instance": 1, "run": 1, "state": "SUCCEEDED", "host": "h"}]})
    f._fold("JobStateChanged", {"job_id": "b", "at": 6, "state": "SUCCEEDED"})
    assert f.pending_jobs() == {"a"}
    assert f.stuck_task_states() == {"PLACED": 1, "SUCCEEDED": 1}
    to_run, to_end = f.task_latencies({"a": 1})
    assert to_run == [] and to_end == [4]


def test_copy_record_renames_the_job_moves_times_and_rounds() -> None:
    rec = Captured("task-launch-requested", "host-1", 1_000, "TaskLaunchRequested", {
        "host": "host-1", "at": 1_000, "launches": [
            {"job_id": "tmpl", "instance": 3, "run": 1, "round": 2, "command": "sleep 1",
             "env": {"PELOTON_TASK_ID": "tmpl-3-1"}, "ports": {"http": 31000}}]})
    key, body = copy_record(rec, "tmpl", "hist-9", shift_ms=-500, round_add=10)
    assert key == "host-1"
    launch = body["launches"][0]
    assert body["at"] == 500 and launch["round"] == 12 and launch["job_id"] == "hist-9"
    assert launch["env"] == {"PELOTON_TASK_ID": "hist-9-3-1"}
    assert launch["ports"] == {"http": 31000} and launch["instance"] == 3
    assert rec.body["launches"][0]["job_id"] == "tmpl"  # the template is left alone


def test_copy_record_keeps_no_round_and_renames_job_keys() -> None:
    made = Captured("placement-made", "t", 0, "PlacementMade", {"at": 0, "round": 4,
                                                                "placements": []})
    assert copy_record(made, "t", "u", 0, 100) == ("u", {"at": 0, "round": 104,
                                                         "placements": []})
    changed = Captured("job-events", "t", 0, "TaskStateChanged", {"job_id": "t", "at": 0,
                       "changes": [{"instance": 0, "run": 1, "round": -1}]})
    key, body = copy_record(changed, "t", "u", 0, 100)
    assert key == "u" and body["changes"][0]["round"] == -1


def fleet(*hosts: str) -> AgentFleetCore:
    return AgentFleetCore([AgentConfig(host=h, incarnation=f"inc-{h}",
                                       capacity=Resources(8, 1024, 1024, 0),
                                       sandbox_root=Path("/tmp"), simulated=True)
                           for h in hosts])


def test_fleet_registers_every_host_with_its_own_incarnation() -> None:
    regs = fleet("h1", "h2", "h3").after_replay(0)
    assert [(e.type, e.key, e.body["incarnation"]) for e in regs] == [
        ("HostRegistered", "h1", "inc-h1"), ("HostRegistered", "h2", "inc-h2"),
        ("HostRegistered", "h3", "inc-h3")]


def test_fleet_routes_a_request_to_the_host_it_names_only() -> None:
    core = fleet("h1", "h2")
    kill = {"host": "h2", "at": 0, "kills": [
        {"job_id": "j", "instance": 0, "run": 1, "grace_period_s": 1.0}]}
    assert core.handle("TaskKillRequested", kill, 0) == []
    assert core.handle("TaskKillRequested", {**kill, "host": "elsewhere"}, 0) == []
    statuses = [e for e in core.tick(10) if e.type == "TaskStatusReported"]
    assert [(e.key, [s["state"] for s in e.body["statuses"]]) for e in statuses] == [
        ("h2", ["KILLED"])]


def test_rebuild_figures_read_the_shells_start_up_line() -> None:
    log = ("2026-11-23 16:35:50,276 jobmgr INFO peloton.bus.driver: jobmgr: state rebuilt in "
           "0.43s (full replay, 1012 records folded)\n"
           "2026-11-23 16:36:10,302 jobmgr INFO peloton.bus.driver: jobmgr: state rebuilt in "
           "0.09s (snapshot 1-1795451765604-3046c07f + tail, 13 records folded)\n"
           "2026-11-23 16:36:11,000 jobmgr INFO peloton.bus.driver: jobmgr: snapshot "
           "1-1795451771-ab written (900 bytes)\n")
    assert rebuild_figures(log) == {"rebuild_s": 0.09, "rebuild_from": "snapshot + tail",
                                    "folded": 13}
    assert rebuild_figures(log.splitlines()[0]) == {"rebuild_s": 0.43,
                                                    "rebuild_from": "full replay",
                                                    "folded": 1012}
    assert rebuild_figures("no start-up here") == {}


def test_fleet_sends_again_what_did_not_reach_the_log() -> None:
    core = fleet("h1", "h2")
    kill = {"host": "h1", "at": 0, "kills": [
        {"job_id": "j", "instance": 0, "run": 1, "grace_period_s": 1.0}]}
    core.handle("TaskKillRequested", kill, 0)

    def reports(now: int) -> list[tuple[str, list[str]]]:
        return [(e.key, [s["state"] for s in e.body["statuses"]])
                for e in core.tick(now) if e.type == "TaskStatusReported"]

    assert reports(10) == [("h1", ["KILLED"])]
    core.discard_unpublished()  # that tick's events were not published
    assert reports(20) == [("h1", ["KILLED"])]
    assert reports(30) == []  # published this time: not repeated


class _Log:
    """A fake consumer over fixed partitions: `ends` is each partition's end when reading
    begins; its log holds `extra` more records after that (produced meanwhile)."""

    def __init__(self, ends: dict[tuple[str, int], int], extra: int = 2) -> None:
        self.ends = {TopicPartition(t, p): n for (t, p), n in ends.items()}
        self.log = {tp: [SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=o,
                                         value=f"{tp.topic}/{tp.partition}/{o}".encode())
                         for o in range(n + extra)] for tp, n in self.ends.items()}
        self.pos: dict[TopicPartition, int] = {}
        self.assigned: set[TopicPartition] = set()
        self.polled: set[TopicPartition] = set()
        self.stopped = False

    def __call__(self, **_kw: Any) -> _Log:  # stands in for AIOKafkaConsumer(...)
        return self

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        self.stopped = True

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {tp.partition for tp in self.ends if tp.topic == topic}

    def assign(self, parts: list[TopicPartition]) -> None:
        self.assigned = set(parts)

    async def seek_to_beginning(self, *parts: TopicPartition) -> None:
        self.pos.update(dict.fromkeys(parts, 0))

    async def getmany(self, *parts: TopicPartition, timeout_ms: int,
                      max_records: int) -> dict[TopicPartition, list[Any]]:
        assert set(parts) <= self.assigned
        self.polled |= set(parts)
        out = {}
        for tp in parts:  # two records a fetch, so a partition takes several
            out[tp] = self.log[tp][self.pos[tp]:self.pos[tp] + 2]
            self.pos[tp] += len(out[tp])
        return out


def fake_log(monkeypatch: pytest.MonkeyPatch, ends: dict[tuple[str, int], int]) -> _Log:
    log = _Log(ends)

    async def log_end_offsets(_c: Any, parts: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: log.ends[tp] for tp in parts}

    monkeypatch.setattr(load, "AIOKafkaConsumer", log)
    monkeypatch.setattr(load, "log_end_offsets", log_end_offsets)
    return log


async def test_read_to_end_reads_each_partition_to_its_end_when_reading_began(
        monkeypatch: pytest.MonkeyPatch) -> None:
    log = fake_log(monkeypatch, {("a", 0): 5, ("a", 1): 0, ("b", 0): 3, ("c", 0): 4})
    got = [rec.value.decode() async for rec in read_to_end("broker", ["a", "b"])]
    assert sorted(got) == sorted([f"a/0/{o}" for o in range(5)] + ["b/0/0", "b/0/1", "b/0/2"])
    for tp in (TopicPartition("a", 0), TopicPartition("b", 0)):  # each in offset order
        mine = [v for v in got if v.startswith(f"{tp.topic}/{tp.partition}/")]
        assert mine == sorted(mine, key=lambda v: int(v.rsplit("/", 1)[1]))
    assert log.assigned == {TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)}
    assert TopicPartition("a", 1) not in log.polled and log.stopped  # empty: never fetched


async def test_read_to_end_stops_its_consumer_when_the_reader_stops_early(
        monkeypatch: pytest.MonkeyPatch) -> None:
    log = fake_log(monkeypatch, {("a", 0): 9})
    async with aclosing(read_to_end("broker", ["a"])) as records:
        async for _rec in records:
            break
    assert log.stopped
