"""Pure parts of confinement: limit values, OOM evidence, and which sandboxes to collect."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.agent.domain.limits import (
    CPU_PERIOD_US,
    MIB,
    MIN_CPU_QUOTA_US,
    TaskLimits,
    cpu_max,
    memory_bytes,
    oom_kills,
    oom_message,
    rlimit_oom_evidence,
)
from peloton.agent.domain.sandboxgc import SandboxEntry, expired

VOLUMES = "volumes"

# ------------------------------------------------------------------------------ limits


@given(st.floats(min_value=0.001, max_value=512, allow_nan=False))
def test_cpu_max_is_proportional_with_the_kernel_minimum(cpu: float) -> None:
    quota, period = cpu_max(cpu).split()
    assert int(period) == CPU_PERIOD_US
    assert int(quota) == max(MIN_CPU_QUOTA_US, round(cpu * CPU_PERIOD_US))


@pytest.mark.parametrize("cpu", [None, 0.0, -1.0])
def test_no_cpu_is_no_quota(cpu: float | None) -> None:
    assert cpu_max(cpu) == f"max {CPU_PERIOD_US}"


@given(st.floats(min_value=-10, max_value=1e6, allow_nan=False))
def test_memory_limit_in_bytes(mb: float) -> None:
    got = memory_bytes(mb)
    if mb <= 0:
        assert got is None
    else:
        assert got is not None and got >= 1 and abs(got - mb * MIB) <= 1
    assert TaskLimits.of(0.0, mb).memory_bytes == got


@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=0, max_value=99))
def test_oom_kill_count_is_read_from_memory_events(kills: int, ooms: int) -> None:
    text = f"low 0\nhigh 0\nmax 7\noom {ooms}\noom_kill {kills}\noom_group_kill 0\n"
    assert oom_kills(text) == kills
    assert oom_kills("low 0\n") == 0


@pytest.mark.parametrize(("returncode", "stderr", "expected"), [
    (1, b"Traceback ...\nMemoryError\n", ("the task reported MemoryError", True)),
    (134, b"terminate called after throwing an instance of 'std::bad_alloc'",
     ("the task reported std::bad_alloc", True)),
    (2, b"fatal error: runtime: out of memory", ("the task reported out of memory", True)),
    (1, b"head: Cannot allocate memory", ("the task reported Cannot allocate memory", True)),
    (-11, b"", ("signal 11 after a failed allocation is likely", False)),
    (-6, b"", ("signal 6 after a failed allocation is likely", False)),
    (1, b"ValueError: nope", None),
    (-9, b"", None),
    (0, b"MemoryError", None),  # it survived: not a death
])
def test_rlimit_oom_evidence(returncode: int, stderr: bytes,
                             expected: tuple[str, bool] | None) -> None:
    assert rlimit_oom_evidence(returncode, stderr) == expected


def test_oom_messages() -> None:
    assert oom_message(64 * MIB, "cgroup memory.max", "killed by signal 9 (SIGKILL)") == (
        "out of memory: exceeded 64 MiB limit (cgroup memory.max); "
        "killed by signal 9 (SIGKILL)")
    assert oom_message(64 * MIB, "RLIMIT_DATA", "killed by signal 11 (SIGSEGV)",
                       "signal 11 after a failed allocation is likely", certain=False) == (
        "possibly out of memory: 64 MiB limit (RLIMIT_DATA; signal 11 after a failed "
        "allocation is likely); killed by signal 11 (SIGSEGV)")


# -------------------------------------------------------------------------- sandbox GC

names = st.sampled_from(["a-0-1", "a-0-2", "b-1-1", "c-2-3", VOLUMES, "d-0-1"])
entries = st.lists(st.builds(SandboxEntry, names, st.integers(0, 10_000)), max_size=8)


@given(entries, st.sets(names), st.integers(0, 20_000), st.integers(0, 5_000))
def test_gc_removes_exactly_the_expired_unknown_sandboxes(
        found: list[SandboxEntry], keep: set[str], now: int, retention: int) -> None:
    doomed = expired(found, keep, now, retention, VOLUMES)
    assert doomed == sorted(set(doomed))
    assert VOLUMES not in doomed
    assert not keep & set(doomed)
    for e in found:
        if e.name not in doomed:
            assert e.name == VOLUMES or e.name in keep or now < e.ended_at_ms + retention
    for name in doomed:
        assert any(e.name == name and now >= e.ended_at_ms + retention for e in found)


@given(entries, st.sets(names), st.integers(0, 20_000), st.integers(0, 5_000),
       st.integers(0, 5_000))
def test_gc_later_removes_at_least_as_much(found: list[SandboxEntry], keep: set[str],
                                           now: int, retention: int, later: int) -> None:
    first = set(expired(found, keep, now, retention, VOLUMES))
    assert first <= set(expired(found, keep, now + later, retention, VOLUMES))


def test_gc_keeps_logs_for_the_whole_retention() -> None:
    e = [SandboxEntry("a-0-1", 1_000)]
    assert expired(e, set(), 1_000 + 499, 500, VOLUMES) == []
    assert expired(e, set(), 1_000 + 500, 500, VOLUMES) == ["a-0-1"]
    assert expired(e, {"a-0-1"}, 10**9, 500, VOLUMES) == []
    assert expired([SandboxEntry(VOLUMES, 0)], set(), 10**9, 0, VOLUMES) == []
