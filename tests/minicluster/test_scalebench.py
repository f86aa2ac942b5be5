"""`peloton bench scale`'s pure parts: the waves it submits, the figures it computes from
the job manager's timestamps, its CPU accounting and goal summary (the bench itself runs
a minicluster for minutes: not a test)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from peloton.bus.catalog import INTERNAL_TOPICS, TOPICS
from peloton.bus.partitions import ENV, configured, parse
from peloton.cli.main import app
from peloton.hostmgr.shard import HOST_ROUTE
from peloton.jobmgr.shard import JOB_ROUTE
from peloton.minicluster.burst import BurstOutcome, burst_figures
from peloton.minicluster.load import JobFollower, RunHistory
from peloton.minicluster.scalebench import (
    CONFIGS,
    LARGE,
    SMALL,
    ScaleConfig,
    Wave,
    bus_floor,
    cpu_per_thousand,
    cpu_sample,
    goal_verdicts,
    jobs_per_s,
    partitions_env,
    partitions_text,
    plan_waves,
    plot,
    service_of,
    stat_cpu_s,
    summarize,
    tables,
    wave_sizes,
)
from peloton.minicluster.stuckreport import CLASSES


def test_the_plan_has_small_and_large_waves_at_once_then_paced_ones_the_largest_last() -> None:
    waves = plan_waves(100_000, paced=(0.25, 0.5))
    assert [(w.name, w.job_tasks, w.tasks, w.fraction) for w in waves] == [
        ("small 10%", SMALL, 10_000, 0.0), ("large", LARGE, 20_000, 0.0),
        ("paced 25%", SMALL, 0, 0.25), ("paced 50%", SMALL, 0, 0.5),
        ("small 100%", SMALL, 100_000, 0.0)]
    assert sum(w.tasks for w in waves) >= 100_000
    assert [w.paced for w in waves] == [False, False, True, True, False]


def test_the_goal_s_wave_is_offered_at_its_own_rate_whatever_the_reference() -> None:
    waves = plan_waves(100_000, paced=(0.5,), goal_rate=1_000.0)
    assert [w.name for w in waves] == ["small 10%", "large", "paced 1,000/s (goal)",
                                       "paced 50%", "small 100%"]
    goal, half = waves[2], waves[3]
    assert goal.paced and goal.offered(3_400.0) == goal.offered(1_200.0) == 1_000.0
    assert half.offered(3_400.0) == 1_700.0
    assert waves[0].offered(3_400.0) == 0.0  # at once


@settings(max_examples=60, deadline=None)
@given(tasks=st.integers(1, 30_000), lo=st.integers(1, 300), span=st.integers(0, 2_000),
       seed=st.integers(0, 10**6))
def test_a_wave_s_job_sizes_sum_to_its_tasks_within_the_size_range_and_repeat_per_seed(
        tasks: int, lo: int, span: int, seed: int) -> None:
    wave = Wave("w", (lo, lo + span), tasks)
    sizes = wave_sizes(wave, seed)
    assert sum(sizes) == tasks
    assert all(lo <= n <= lo + span for n in sizes[:-1])
    assert 1 <= sizes[-1] <= lo + span  # the last takes what is left
    assert wave_sizes(wave, seed) == sizes


def test_a_paced_wave_has_rate_times_duration_tasks_and_is_offered_at_that_task_rate() -> None:
    wave = Wave("paced 50%", SMALL, fraction=0.5)
    sizes = wave_sizes(wave, seed=3, rate=400.0, paced_s=20.0)
    assert sum(sizes) == 8_000
    per_job_s = jobs_per_s(sizes, 400.0)
    # submit_jobs sends job i at i / per_job_s: the whole wave in about paced_s
    assert len(sizes) / per_job_s == pytest.approx(20.0)
    assert jobs_per_s(sizes, 0.0) == 0.0  # at once
    assert wave_sizes(wave, seed=3, rate=0.01, paced_s=1.0) == [1]  # never an empty wave


STAT = ("4242 (tansu broker) x) S 1 4242 4242 0 -1 4194560 9105 0 0 0 "
        "1234 567 8 9 20 0 5 0 123456 1000000 2000 18446744073709551615")


def test_cpu_seconds_are_utime_plus_stime_counted_after_the_last_parenthesis() -> None:
    assert stat_cpu_s(STAT, 100) == pytest.approx((1234 + 567) / 100)


def test_a_sample_reads_live_processes_and_leaves_out_gone_ones_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    sample = cpu_sample({"me": os.getpid(), "gone": 2**22 + 12345})
    assert set(sample) == {"me"} and sample["me"] > 0
    assert "no CPU figure for gone" in caplog.text


def test_cpu_per_thousand_tasks_sums_instances_per_service_over_processes_in_both_samples(
) -> None:
    before = {"broker": 10.0, "resmgr-1": 1.0, "resmgr-2": 2.0, "agent-fleet-1": 0.0,
              "agent-fleet-2": 0.5, "jobmgr": 4.0, "died": 1.0}
    after = {"broker": 12.0, "resmgr-1": 1.5, "resmgr-2": 2.5, "agent-fleet-1": 1.0,
             "agent-fleet-2": 1.5, "jobmgr": 8.0, "born": 9.0}
    assert cpu_per_thousand(before, after, 2_000) == {
        "agent-fleet": 1.0, "broker": 1.0, "jobmgr": 2.0, "resmgr": 0.5, "total": 4.5}
    assert service_of("bench client") == "bench client"
    assert service_of("hostmgr") == "hostmgr"


def _follower(runs: dict[tuple[str, int, int], list[tuple[int, str]]]) -> JobFollower:
    follower = JobFollower("127.0.0.1:1")  # never started: its history is set here
    follower.want({"j1": 2, "j2": 1})
    follower.runs = {k: RunHistory([(at, s, "host-1") for at, s in v])
                     for k, v in runs.items()}
    follower.job_state = {"j1": "SUCCEEDED", "j2": "SUCCEEDED"}
    return follower


def test_wave_figures_come_from_submitted_at_and_the_job_manager_s_task_timestamps() -> None:
    follower = _follower({
        ("j1", 0, 1): [(1_100, "LAUNCHED"), (1_200, "RUNNING"), (1_400, "SUCCEEDED")],
        ("j1", 1, 1): [(1_300, "RUNNING"), (1_350, "FAILED")],
        ("j1", 1, 2): [(1_500, "RUNNING"), (2_000, "SUCCEEDED")],  # a retry: its end counts
        ("j2", 0, 1): [(3_000, "RUNNING"), (3_000, "SUCCEEDED")]})
    out = BurstOutcome({"j1": 2, "j2": 1}, {"j1": 1_000, "j2": 2_000}, follower, 0.1, 3.0,
                       "all jobs terminal")
    fig = burst_figures(out)
    # first RUNNING per task: 200 and 300 ms (j1), 1,000 ms (j2)
    assert fig["p50_submit_to_running_ms"] == 300.0
    assert fig["p99_submit_to_running_ms"] == 1_000.0
    # 3 tasks ended, from the first submission (1,000) to the last end (3,000): 2 s
    assert fig["tasks_per_s"] == 1.5
    assert fig["jobs_not_terminal"] == 0
    # where the time went: the first LAUNCHED and RUNNING per task (retries count once)
    assert fig["p50_p99_ms_to_each_state"] == "LAUNCHED 100/100, RUNNING 300/1000"


def test_the_partitioned_configuration_gives_its_processes_a_10_s_session() -> None:
    partitioned = next(c for c in CONFIGS if "partitioned" in c.name)
    assert partitioned.layout["env"] == {"PELOTON_KAFKA_SESSION_TIMEOUT_S": "10"}


def test_each_configuration_has_as_many_partitions_per_topic_as_instances() -> None:
    assert {c.name: c.partitions for c in CONFIGS} == {
        "1 of each service": 1, "2 of each partitioned service": 2}
    lone = ScaleConfig("x", {"resmgr_instances": 3, "hostmgr_instances": 0})
    assert lone.partitions == 1  # resource managers are standbys, not partitions


def test_the_partition_setting_names_every_topic_of_more_than_one_partition() -> None:
    names = {t.name for t in (*TOPICS, *INTERNAL_TOPICS)}
    counts = parse(partitions_env(2, {})[ENV], names)
    many = {t.name for t in (*TOPICS, *INTERNAL_TOPICS) if t.partitions > 1}
    assert set(counts) == many and set(counts.values()) == {2}
    assert "job-events" in many and "jobmgr-inbox" in many and "task-launch-requested" in many
    assert "entitlement-updated" not in counts  # one partition: it stays as it is


def test_the_caller_s_partition_setting_wins_and_none_sets_nothing() -> None:
    assert partitions_env(None, {}) == {}
    assert partitions_env(1, {ENV: "job-events=8"}) == {}
    partitioned = next(c for c in CONFIGS if "partitioned" in c.name)
    mine = partitioned.layout_keywords({ENV: "job-events=8"})
    assert mine == partitioned.layout  # the caller's processes' environment has it already


def test_a_configuration_s_processes_get_its_partitions_beside_its_own_environment() -> None:
    partitioned = next(c for c in CONFIGS if "partitioned" in c.name)
    env = partitioned.layout_keywords({})["env"]
    assert env["PELOTON_KAFKA_SESSION_TIMEOUT_S"] == "10"
    assert "job-events=2" in env[ENV].split(",")
    assert partitioned.layout["env"] == {"PELOTON_KAFKA_SESSION_TIMEOUT_S": "10"}  # unchanged
    # the partitioned services accept it: each one's own topics and inbox share one count
    topics, internal = configured((TOPICS, INTERNAL_TOPICS), env)
    count = {t.name: t.partitions for t in (*topics, *internal)}
    for route in (JOB_ROUTE, HOST_ROUTE):
        assert {count[name] for name in route.sharded} == {2}, route.service


def test_partition_counts_read_as_the_most_common_then_the_others_by_name() -> None:
    assert partitions_text({"a": 4, "b": 4}) == "4"
    assert partitions_text({"a": 4, "b": 1, "c": 4, "d": 1, "e": 4}) == "4 (b, d: 1)"
    assert partitions_text({"a": 1, "b": 2, "c": 3, "d": 3}) == "3 (a: 1; b: 2)"
    assert partitions_text({}) == "-"


def _row(wave: str, tasks: int, total: float, **kw: Any) -> dict[str, Any]:
    return {"wave": wave, "tasks": tasks, "fraction": 0.0, "tasks_per_s": 1_000.0,
            "offered_tasks_per_s": "at once", "p50_submit_to_running_ms": 100.0,
            "p99_submit_to_running_ms": 900.0, "wall_s": 10.0, "records_per_task": 2.0,
            "jobs_not_terminal": 0, "bus_floor_tasks_per_s": 5_000.0, "ratio_to_bus": 0.2,
            "bus_cpu_s_per_1000_tasks": 0.1,
            "cpu_s_per_1000_tasks": {"jobmgr": total / 2, "hostmgr": total / 4,
                                     "bench client": total / 4, "total": total}, **kw}


def _result() -> dict[str, Any]:
    rows = [_row("small 10%", 10_000, 2.0), _row("large", 20_000, 1.0),
            _row("small 100%", 100_000, 2.5, jobs_not_terminal=3,
                 stuck_task_states="PENDING=12"),
            _row("paced 25%", 5_000, 4.0, fraction=0.25, offered_tasks_per_s=250.0,
                 jobs_not_terminal=2, stuck_task_states="RUNNING=9",
                 stuck_diagnosis={"stuck_runs": 9, "by_class": {CLASSES[1]: 9}, "hosts": 1,
                                  "top_hosts": {"host-7": 9},
                                  "samples": {CLASSES[1]: ["b/0 run 1 on host-7: job "
                                                           "manager RUNNING, agent "
                                                           "SUCCEEDED"]}}),
            _row("paced 50%", 10_000, 3.0, fraction=0.5, offered_tasks_per_s=500.0,
                 p99_submit_to_running_ms=800.0,
                 drift={"first quarter": {"p50_ms": 310, "p99_ms": 480, "tasks": 2_500,
                                          "broker_cores": 0.37, "machine_cores": 1.8},
                        "last quarter": {"p50_ms": 570, "p99_ms": 807, "tasks": 2_500,
                                         "broker_cores": 0.65, "machine_cores": 1.9}})]
    cfg = {"config": CONFIGS[0].name, "hosts": 1_000, "hosts_offered_s": 2.0,
           "partitions_per_topic": "1",
           "raw_bus_events_per_s": 30_000.0, "idle_cores": {"jobmgr": 0.1, "total": 0.5},
           "waves": rows, "summary": summarize(rows)}
    return {"tasks": 100_000, "hosts": 1_000, "seed": 7, "python": "CPython 3.11.2 (/v/bin/py)",
            "configs": [cfg, {"config": "broken", "hosts": 1_000, "error": "hosts not offered"}]}


def test_the_summary_names_max_rate_p99_at_half_of_it_cost_flatness_and_busiest_service(
) -> None:
    s = _result()["configs"][0]["summary"]
    assert s["tasks_per_s, 100,000 small-job tasks at once"] == 1_000.0
    assert s["jobs not terminal (small 100%)"] == "3: PENDING=12"
    # a paced wave that did not finish is named too, with where its runs were lost
    assert s["jobs not terminal (paced 25%)"] == (
        "2: RUNNING=9; lost: {'end reported, not recorded': 9}")
    assert s["p99_submit_to_running_ms at paced 50%"] == 800.0
    assert s["cpu_s_per_1000_tasks at 10,000 tasks"] == 2.0
    assert s["cpu_s_per_1000_tasks at 100,000 tasks"] == 2.5
    assert s["cost_ratio (largest / first small wave; flat = 1)"] == 1.25
    assert s["busiest service (small 100%)"].startswith("jobmgr ")  # the client is not one
    # jobmgr and hostmgr are 3/4 of every row: their own cost grew as the total did
    assert s[SERVICES_RATIO] == 1.25


SERVICES_RATIO = "cost_ratio, scheduling services only (jobmgr, resmgr, placement, hostmgr)"


def test_the_scheduling_services_cost_ratio_leaves_out_the_broker_agents_and_client() -> None:
    def cpu(services: float, broker: float, agents: float, client: float) -> dict[str, float]:
        each = services / 4
        parts = {"jobmgr": each, "resmgr": each, "placement": each, "hostmgr": each,
                 "broker": broker, "agent-fleet": agents, "bench client": client}
        return {**parts, "total": sum(parts.values())}

    rows = [_row("small 10%", 10_000, 1.0, cpu_s_per_1000_tasks=cpu(0.4, 0.06, 0.04, 0.04)),
            _row("small 100%", 100_000, 1.0, cpu_s_per_1000_tasks=cpu(0.4, 0.14, 0.06, 0.06))]
    s = summarize(rows)
    assert s["cost_ratio (largest / first small wave; flat = 1)"] == round(0.66 / 0.54, 2)
    assert s[SERVICES_RATIO] == 1.0
    rows[1]["cpu_s_per_1000_tasks"] = cpu(0.5, 0.06, 0.04, 0.04)
    assert summarize(rows)[SERVICES_RATIO] == 1.25


def test_the_goals_are_judged_on_every_small_wave_and_the_least_loaded_paced_wave_at_half(
) -> None:
    fast = [_row("small 10%", 10_000, 1.0, tasks_per_s=3_400.0),
            _row("large", 20_000, 1.0, tasks_per_s=900.0),  # large jobs: not the goal's
            _row("paced 25%", 17_000, 1.0, fraction=0.25, offered_tasks_per_s=850.0,
                 p99_submit_to_running_ms=300.0),  # below half of 2,000: not judged
            _row("paced 1,000/s (goal)", 20_000, 1.0, offered_tasks_per_s=1_000.0,
                 p99_submit_to_running_ms=700.0),
            _row("paced 50%", 34_000, 1.0, fraction=0.5, offered_tasks_per_s=1_700.0,
                 p99_submit_to_running_ms=1_300.0),
            _row("small 100%", 100_000, 1.0, tasks_per_s=2_600.0)]
    assert goal_verdicts(fast) == {
        "goal >= 2,000 tasks/s, small jobs at once": "met (3,400, 2,600)",
        "goal p99 < 1 s at 1,000 tasks/s or more": "met (0.70 s at 1,000/s, "
                                                   "paced 1,000/s (goal))"}
    slow = [fast[0], fast[1], fast[2], fast[4],
            _row("small 100%", 100_000, 1.0, tasks_per_s=2_600.0, jobs_not_terminal=1)]
    assert goal_verdicts(slow) == {
        # a wave that did not finish misses, whatever its rate
        "goal >= 2,000 tasks/s, small jobs at once": "missed (3,400, 2,600)",
        # without the goal's wave, the least loaded paced wave at 1,000/s or more
        "goal p99 < 1 s at 1,000 tasks/s or more": "missed (1.30 s at 1,700/s, paced 50%)"}
    assert goal_verdicts(fast[:3])["goal p99 < 1 s at 1,000 tasks/s or more"] == (
        "not measured (no paced wave offered 1,000/s or more)")


def test_the_bus_floor_is_the_raw_rate_divided_by_records_per_task() -> None:
    assert bus_floor(30_000.0, records=20_000, tasks=10_000) == 15_000.0
    assert bus_floor(30_000.0, records=0, tasks=10_000) == 0.0


def test_tables_and_plot_render_every_configuration_a_failed_one_by_its_error(
        tmp_path: Path) -> None:
    from rich.console import Console

    console = Console(record=True, width=240)
    for table in tables(_result()):
        console.print(table)
    text = console.export_text()
    assert "paced 50%" in text and "hosts not offered" in text and "jobmgr" in text
    assert "on CPython 3.11.2 (/v/bin/py)" in text
    assert "partitions per topic 1," in text
    assert "where the runs of the jobs that did not end were lost" in text
    assert "b/0 run 1 on host-7: job manager RUNNING, agent SUCCEEDED" in text
    # a paced wave's first quarter beside its last
    assert "paced waves, first quarter against last" in text
    assert "570 / 807" in text and "0.650" in text
    path = plot(_result(), tmp_path / "scale.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_unknown_configuration_is_refused_before_anything_starts() -> None:
    res = CliRunner().invoke(app, ["bench", "scale", "--config", "no such thing"])
    assert res.exit_code == 2
    assert "no such configuration" in res.output


def test_ends_learned_from_a_reconciliation_are_counted_and_named_in_the_summary() -> None:
    follower = JobFollower("unused:0")
    follower.want({"j": 2})
    follower._fold("TaskStateChanged", {"job_id": "j", "at": 5, "changes": [
        {"instance": 0, "run": 1, "state": "SUCCEEDED", "host": "h1",
         "reason": "exit code 0 (reported again: reconciliation)"},
        {"instance": 1, "run": 1, "state": "RUNNING", "host": "h1",
         "reason": "running (reconciliation)"},  # not an end
        {"instance": 1, "run": 1, "state": "SUCCEEDED", "host": "h1",
         "reason": "exit code 0"}]})
    assert follower.recovered_runs == {("j", 0, 1)} and follower.recovered == 1
    trail = {"by_step": {"routed, not recorded": 1}, "inbox_offsets": {}, "samples": {}}
    rows = [_row("small 10%", 10_000, 1.0, ends_recovered_by_reconciliation=1,
                 recovered_ends_trail=trail),
            _row("small 100%", 100_000, 1.0, ends_recovered_by_reconciliation=0)]
    summary = summarize(rows)
    assert summary["ends recovered by reconciliation (small 10%)"] == (
        "1; first reports: {'routed, not recorded': 1}")
    assert "ends recovered by reconciliation (small 100%)" not in summary
