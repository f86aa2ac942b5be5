"""The services' garbage-collection policy (`peloton.bus.gcpolicy`): survivors are frozen
at each step, and cycles that die after being frozen are reclaimed at the next thaw."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from peloton.bus.gcpolicy import FREEZE_S, GEN0_THRESHOLD, GcPolicy, configure, install, keep


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    yield
    gc.unfreeze()  # the rest of the test session scans everything again


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_a_step_freezes_what_survives_and_the_thaw_reclaims_frozen_cycles() -> None:
    now = [0.0]
    policy = GcPolicy(thaw_s=60.0, clock=lambda: now[0])
    young = _cycle()  # garbage before the step: collected by it, never frozen
    policy.step()
    assert young() is None
    assert gc.get_freeze_count() > 0

    a, b = _Node(), _Node()
    a.other, b.other = b, a
    frozen = weakref.ref(a)
    policy.step()  # the cycle is alive: frozen with the rest
    del a, b  # it dies while frozen: only a thaw can reclaim it
    now[0] = 30.0
    policy.step()
    assert frozen() is not None and policy.full_collections == 0
    now[0] = 61.0
    policy.step()
    assert frozen() is None and policy.full_collections == 1


def test_the_policy_can_be_turned_off() -> None:
    class _App:
        def timer(self, *_a: object, **_k: object) -> object:
            raise AssertionError("no timer when turned off")

    assert install(_App(), {"PELOTON_GC_FREEZE": "0"}) is None


class _RecordingApp:
    """What `install` uses of a Faust app: it records what was registered."""

    def __init__(self) -> None:
        self.registered: list[tuple[str, float | None]] = []

    def task(self, fn: object) -> object:
        self.registered.append(("task", None))
        return fn

    def timer(self, interval: float, **_k: object) -> object:
        self.registered.append(("timer", interval))
        return lambda fn: fn


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_installed_it_steps_as_the_worker_starts_and_then_on_a_timer(
        thresholds: tuple[int, int, int]) -> None:
    app = _RecordingApp()
    assert install(app, {}) is not None
    assert app.registered == [("task", None), ("timer", FREEZE_S)]


def test_installed_it_collects_the_young_generation_less_often(
        thresholds: tuple[int, int, int]) -> None:
    install(_RecordingApp(), {})
    assert gc.get_threshold() == (GEN0_THRESHOLD, *thresholds[1:])
    install(_RecordingApp(), {"PELOTON_GC_THRESHOLD0": "5000"})
    assert gc.get_threshold()[0] == 5000
    gc.set_threshold(*thresholds)
    install(_RecordingApp(), {"PELOTON_GC_FREEZE": "0"})
    assert gc.get_threshold() == thresholds


@pytest.mark.parametrize("raw", ["abc", "0", "-5", "1.5"])
def test_a_threshold_that_is_not_a_positive_integer_is_refused_by_name(
        raw: str, thresholds: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError, match="PELOTON_GC_THRESHOLD0"):
        install(_RecordingApp(), {"PELOTON_GC_THRESHOLD0": raw})
    assert gc.get_threshold() == thresholds


def test_configured_outside_faust_it_sets_the_threshold_or_nothing_when_off(
        thresholds: tuple[int, int, int]) -> None:
    assert configure({"PELOTON_GC_FREEZE": "0"}) is None
    assert gc.get_threshold() == thresholds
    assert isinstance(configure({}), GcPolicy)
    assert gc.get_threshold() == (GEN0_THRESHOLD, *thresholds[1:])


class _Counting(GcPolicy):
    steps = 0

    def step(self) -> None:
        self.steps += 1


def _kept(interval_s: float, now: bool, until: int) -> tuple[int, int]:
    """The steps `keep` took before the loop first ran, and once `until` were taken (or 2 s
    passed: a loaded machine)."""
    async def run() -> tuple[int, int]:
        policy = _Counting()
        task = asyncio.ensure_future(keep(policy, interval_s=interval_s, now=now))
        await asyncio.sleep(0)
        first = policy.steps
        for _ in range(200):
            if policy.steps >= until:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return first, policy.steps

    return asyncio.run(run())


def test_kept_as_a_task_it_steps_at_once_and_then_every_interval() -> None:
    first, later = _kept(0.01, now=True, until=3)
    assert first == 1  # the first step does not wait for the interval
    assert later >= 3  # then it repeats


def test_kept_with_now_false_it_waits_one_interval_before_the_first_step() -> None:
    first, later = _kept(0.05, now=False, until=1)
    assert first == 0
    assert later >= 1


def test_the_benchmark_client_has_one_policy_stepped_at_its_first_call(
        thresholds: tuple[int, int, int]) -> None:
    from peloton.minicluster.burst import client_gc

    client_gc.cache_clear()
    gc.unfreeze()
    try:
        policy = client_gc()
        assert policy is not None and gc.get_freeze_count() > 0  # stepped at once
        assert client_gc() is policy  # one for the process: its thaw clock carries on
        assert gc.get_threshold()[0] == GEN0_THRESHOLD
    finally:
        client_gc.cache_clear()

