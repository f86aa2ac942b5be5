"""A paced wave's drift (`peloton.minicluster.pacedrift`): its tasks' latency and the
processes' cores in its first quarter against its last."""

from __future__ import annotations

import os
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.minicluster.load import JobFollower, RunHistory, percentile
from peloton.minicluster.pacedrift import CpuTimeline, cores_between, drift, quarters
from peloton.minicluster.scalebench import cpu_sample, cpu_seconds

tasks_st = st.lists(st.tuples(st.integers(0, 100_000), st.integers(0, 60_000)), max_size=300)


@settings(max_examples=150, deadline=None)
@given(tasks=tasks_st)
def test_each_quarter_holds_the_tasks_submitted_in_it_and_its_p50_is_at_most_its_p99(
        tasks: list[tuple[int, int]]) -> None:
    q = quarters(tasks)
    if not tasks or len({t for t, _ in tasks}) == 1:
        assert q == {"first": None, "last": None}
        return
    t0, t1 = min(t for t, _ in tasks), max(t for t, _ in tasks)
    first = [ms for t, ms in tasks if t < t0 + (t1 - t0) / 4]
    last = [ms for t, ms in tasks if t >= t1 - (t1 - t0) / 4]
    for name, ms in (("first", first), ("last", last)):
        figs = q[name]
        assert figs is not None  # the first and the last submission are in them
        p50, p99, n = figs
        assert n == len(ms) and p50 <= p99
        assert p99 == percentile(ms, 99) and p50 == percentile(ms, 50)


def test_a_wave_whose_latency_climbs_shows_it_in_its_last_quarter() -> None:
    # 1,000 tasks submitted over 20 s; latency 300 ms at the start, 700 ms at the end
    tasks = [(i * 20, 300 + i * 400 // 999) for i in range(1_000)]
    q = quarters(tasks)
    assert q["first"] is not None and q["last"] is not None
    assert q["first"][0] < 360 and q["last"][0] > 640
    assert q["first"][2] == q["last"][2] == 250


def _samples() -> list[tuple[float, dict[str, float]]]:
    # the broker's CPU grows: 0.3 core in the first 10 s, 0.7 in the next; two job managers
    # at 0.25 core each throughout
    out = []
    for s in range(21):
        broker = 0.3 * min(s, 10) + 0.7 * max(0, s - 10)
        out.append((100.0 + s, {"broker": broker, "jobmgr-1": 0.25 * s, "jobmgr-2": 0.25 * s}))
    return out


def test_cores_are_cpu_seconds_over_the_samples_around_the_span_instances_summed() -> None:
    early = cores_between(_samples(), 100.0, 105.0, cpu_seconds)
    assert early == {"broker": 0.3, "jobmgr": 0.5, "total": 0.8}
    # a span between samples widens to the samples around it
    late = cores_between(_samples(), 112.5, 117.5, cpu_seconds)
    assert late == {"broker": 0.7, "jobmgr": 0.5, "total": 1.2}
    assert cores_between(_samples(), 90.0, 105.0, cpu_seconds) == {}  # not covered
    assert cores_between(_samples(), 110.0, 130.0, cpu_seconds) == {}


def test_drift_puts_the_first_quarter_beside_the_last() -> None:
    # jobs submitted from t=100 s to t=120 s, slower at the end, while the broker grew
    tasks = [(100_000 + i * 20, 300 if i < 500 else 700) for i in range(1_001)]
    d = drift(tasks, _samples(), cpu_seconds)
    assert d["first quarter"] == {"p50_ms": 300, "p99_ms": 300, "tasks": 250,
                                  "broker_cores": 0.3, "machine_cores": 0.8}
    assert d["last quarter"] == {"p50_ms": 700, "p99_ms": 700, "tasks": 251,
                                 "broker_cores": 0.7, "machine_cores": 1.2}
    assert drift([], _samples(), cpu_seconds) == {}


def test_the_timeline_samples_a_live_process_from_entry_to_exit() -> None:
    with CpuTimeline(lambda: cpu_sample({"me": os.getpid()}), interval_s=0.05) as tl:
        end = time.monotonic() + 0.4
        while time.monotonic() < end:  # busy: this process's CPU grows
            pass
    times = [t for t, _ in tl.samples]
    assert len(times) >= 4 and times == sorted(times)
    cores = cores_between(tl.samples, times[0], times[-1], cpu_seconds)
    assert 0.3 < cores["me"] <= 1.5


def test_the_follower_gives_each_task_s_submission_and_its_first_running() -> None:
    follower = JobFollower("unused:9092")
    follower.runs = {
        ("j1", 0, 1): RunHistory([(1_100, "READY", None), (1_200, "RUNNING", "h")]),
        ("j1", 1, 1): RunHistory([(1_300, "RUNNING", "h"), (1_350, "FAILED", "h")]),
        ("j1", 1, 2): RunHistory([(1_500, "RUNNING", "h")]),  # a retry: the first counts
        ("j2", 0, 1): RunHistory([(2_400, "PENDING", None)]),  # not running yet
        ("x", 0, 1): RunHistory([(9_000, "RUNNING", "h")])}  # not submitted in this wave
    got = sorted(follower.running_by_submit({"j1": 1_000, "j2": 2_000}))
    assert got == [(1_000, 200), (1_000, 300)]
