"""Restart backoff: Peloton's delay table, the healthy-run reset, and properties."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from peloton.model.backoff import (
    BASE_DELAY_MS,
    MAX_DELAY_MS,
    RESET_AFTER_MS,
    RestartBackoff,
    restart_delay_ms,
)

PROPERTY = settings(max_examples=60, deadline=None, derandomize=True)
MIN = 60_000


@pytest.mark.parametrize(("failures", "delay"), [
    (-1, 0), (0, 0), (1, 30_000), (2, MIN), (3, 2 * MIN), (4, 4 * MIN), (5, 8 * MIN),
    (6, 16 * MIN), (7, 32 * MIN), (8, 60 * MIN), (9, 60 * MIN), (50, 60 * MIN),
    (10**9, 60 * MIN),
])
def test_delay_table(failures: int, delay: int) -> None:
    assert restart_delay_ms(failures) == delay


def test_a_crash_loop_backs_off_and_a_long_healthy_run_resets_it() -> None:
    b = RestartBackoff()
    t = 0
    for expected in (30_000, MIN, 2 * MIN):
        b = b.became_healthy(t).exited(t + 1_000)     # healthy for 1 s only
        assert b.delay_ms() == expected
        t = b.restart_at_ms(t + 1_000)
    b = b.became_healthy(t).exited(t + RESET_AFTER_MS)   # healthy for the whole window
    assert b.failures == 1 and b.delay_ms() == BASE_DELAY_MS


def test_a_run_that_never_became_healthy_extends_the_streak() -> None:
    b = RestartBackoff(failures=3).exited(10 * RESET_AFTER_MS)
    assert b.failures == 4


def test_became_healthy_is_idempotent_and_settled_forgets_the_streak() -> None:
    b = RestartBackoff(failures=5).became_healthy(100)
    assert b.became_healthy(900) == b
    assert b.settled(100 + RESET_AFTER_MS - 1).failures == 5
    assert b.settled(100 + RESET_AFTER_MS).failures == 0


def test_snapshot_round_trip() -> None:
    for b in (RestartBackoff(), RestartBackoff(3, 1234, 5)):
        assert RestartBackoff.from_dict(b.to_dict()) == b


@PROPERTY
@given(st.integers(min_value=1, max_value=200))
def test_delay_is_monotone_and_capped(n: int) -> None:
    assert BASE_DELAY_MS <= restart_delay_ms(n) <= MAX_DELAY_MS
    assert restart_delay_ms(n) <= restart_delay_ms(n + 1)


@PROPERTY
@given(st.lists(st.tuples(st.integers(0, 2 * RESET_AFTER_MS), st.booleans()), max_size=30))
def test_the_streak_counts_exits_since_the_last_long_healthy_run(
        runs: list[tuple[int, bool]]) -> None:
    """Each run: how long it lasted, and whether it became healthy at its start."""
    b, t, expected = RestartBackoff(), 0, 0
    for length, healthy in runs:
        if healthy:
            b = b.became_healthy(t)
        t += length
        b = b.exited(t)
        expected = 1 if healthy and length >= RESET_AFTER_MS else expected + 1
        assert b.failures == expected and b.healthy_since_ms is None
        t = b.restart_at_ms(t)
