"""The task state machine as data, and Peloton's job state rules as a named table."""

from __future__ import annotations

import itertools

import pytest

from peloton.jobmgr.domain.states import (
    ACTIVE,
    TERMINAL,
    TRANSITIONS,
    IllegalTransition,
    JobState,
    TaskState,
    can_transition,
    derive_job_state,
    is_on_host,
    transition,
)

S = TaskState
ALL_PAIRS = list(itertools.product(TaskState, TaskState))
ILLEGAL = [(a, b) for a, b in ALL_PAIRS if b not in TRANSITIONS[a]]
LEGAL = [(a, b) for a, b in ALL_PAIRS if b in TRANSITIONS[a]]


def test_the_table_covers_every_state_and_only_states() -> None:
    assert set(TRANSITIONS) == set(TaskState)
    for targets in TRANSITIONS.values():
        assert targets <= set(TaskState)


@pytest.mark.parametrize(("current", "target"), ILLEGAL, ids=lambda s: s.value)
def test_every_pair_not_in_the_table_raises(current: TaskState, target: TaskState) -> None:
    with pytest.raises(IllegalTransition) as info:
        transition(current, target)
    assert info.value.current is current and info.value.target is target
    assert str(info.value) == f"illegal task transition {current.value} -> {target.value}"
    assert not can_transition(current, target)


@pytest.mark.parametrize(("current", "target"), LEGAL, ids=lambda s: s.value)
def test_every_pair_in_the_table_is_applied(current: TaskState, target: TaskState) -> None:
    assert transition(current, target) is target
    assert can_transition(current, target)


def test_illegal_transition_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        transition(S.SUCCEEDED, S.RUNNING)


@pytest.mark.parametrize("state", sorted(TERMINAL), ids=lambda s: s.value)
def test_terminal_states_have_no_exits(state: TaskState) -> None:
    assert TRANSITIONS[state] == frozenset()
    for target in TaskState:
        with pytest.raises(IllegalTransition):
            transition(state, target)


def test_no_state_moves_to_itself() -> None:
    # duplicate deliveries are filtered before the table; the table itself has no loops
    assert all(s not in TRANSITIONS[s] for s in TaskState)


def test_terminal_and_active_partition_the_states() -> None:
    assert TERMINAL == {S.SUCCEEDED, S.FAILED, S.LOST, S.KILLED}
    assert TERMINAL | ACTIVE == set(TaskState) and not TERMINAL & ACTIVE


@pytest.mark.parametrize("state", sorted(ACTIVE), ids=lambda s: s.value)
def test_a_kill_is_possible_from_every_active_state(state: TaskState) -> None:
    assert S.KILLED in TRANSITIONS[state] or S.KILLING in TRANSITIONS[state]


def test_every_active_state_can_still_end() -> None:
    """From every active state some terminal state is reachable (no dead ends)."""
    for start in ACTIVE:
        seen, frontier = {start}, [start]
        while frontier:
            for nxt in TRANSITIONS[frontier.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        assert seen & TERMINAL, start


def test_a_retry_is_a_new_run_not_a_way_back() -> None:
    assert all(S.PENDING not in TRANSITIONS[t] for t in TERMINAL)
    assert S.PENDING in TRANSITIONS[S.INITIALIZED]


@pytest.mark.parametrize(
    ("state", "on_host"),
    [(S.INITIALIZED, False), (S.PENDING, False), (S.READY, False), (S.PLACING, False),
     (S.PLACED, False), (S.LAUNCHING, True), (S.LAUNCHED, True), (S.STARTING, True),
     (S.RUNNING, True), (S.PREEMPTING, True), (S.KILLING, True), (S.SUCCEEDED, False),
     (S.FAILED, False), (S.LOST, False), (S.KILLED, False)],
    ids=lambda v: v.value if isinstance(v, TaskState) else str(v),
)
def test_which_states_need_the_agent_for_a_kill(state: TaskState, on_host: bool) -> None:
    assert is_on_host(state) is on_host


# --------------------------------------------------------------- derive_job_state
# Peloton's rule order, first match wins:
# 1. SUCCEEDED >= N -> SUCCEEDED; 2. SUCCEEDED+FAILED+LOST >= N -> FAILED;
# 3. some KILLED and all terminal -> KILLED; 4. a kill in progress -> KILLING;
# 5. any RUNNING -> RUNNING; 6. otherwise PENDING.

J = JobState
JOB_RULES = [
    # (name, counts, instance_count, killing, expected)
    ("all succeeded", {S.SUCCEEDED: 3}, 3, False, J.SUCCEEDED),
    ("all succeeded beats a late kill", {S.SUCCEEDED: 3}, 3, True, J.SUCCEEDED),
    ("one failed among succeeded", {S.SUCCEEDED: 2, S.FAILED: 1}, 3, False, J.FAILED),
    ("lost counts as failed", {S.SUCCEEDED: 1, S.LOST: 2}, 3, False, J.FAILED),
    ("all failed", {S.FAILED: 3}, 3, False, J.FAILED),
    ("failed beats a kill in progress", {S.SUCCEEDED: 1, S.FAILED: 2}, 3, True, J.FAILED),
    ("all killed", {S.KILLED: 3}, 3, True, J.KILLED),
    ("all killed, kill flag gone", {S.KILLED: 3}, 3, False, J.KILLED),
    ("killed with succeeded and failed", {S.SUCCEEDED: 1, S.FAILED: 1, S.KILLED: 1}, 3, True,
     J.KILLED),
    ("one killed instance ends a finished job", {S.SUCCEEDED: 2, S.KILLED: 1}, 3, False,
     J.KILLED),
    ("kill in progress, some still running", {S.KILLED: 1, S.RUNNING: 2}, 3, True, J.KILLING),
    ("kill in progress beats running", {S.RUNNING: 3}, 3, True, J.KILLING),
    ("kill in progress, tasks killing", {S.KILLING: 2, S.KILLED: 1}, 3, True, J.KILLING),
    ("kill in progress, nothing started", {S.PENDING: 3}, 3, True, J.KILLING),
    ("some running", {S.RUNNING: 1, S.PENDING: 2}, 3, False, J.RUNNING),
    ("running with one killed instance", {S.RUNNING: 1, S.KILLED: 1}, 2, False, J.RUNNING),
    ("running with one failed", {S.RUNNING: 1, S.FAILED: 1}, 2, False, J.RUNNING),
    ("nothing started", {S.PENDING: 3}, 3, False, J.PENDING),
    ("just created", {S.INITIALIZED: 2}, 2, False, J.PENDING),
    ("starting is not running yet", {S.STARTING: 1, S.LAUNCHED: 1}, 2, False, J.PENDING),
    ("killed instance, rest pending", {S.KILLED: 1, S.PENDING: 1}, 2, False, J.PENDING),
    ("placed and ready", {S.PLACED: 1, S.READY: 1}, 2, False, J.PENDING),
    ("succeeded and pending retry", {S.SUCCEEDED: 1, S.PENDING: 1}, 2, False, J.PENDING),
    ("zero counts are ignored", {S.SUCCEEDED: 2, S.RUNNING: 0}, 2, False, J.SUCCEEDED),
]


@pytest.mark.parametrize(("name", "counts", "n", "killing", "expected"), JOB_RULES,
                         ids=[r[0] for r in JOB_RULES])
def test_derive_job_state(name: str, counts: dict[TaskState, int], n: int, killing: bool,
                          expected: JobState) -> None:
    assert derive_job_state(counts, n, killing) is expected


LONG_RUNNING_RULES = [
    # (name, counts, instance_count, killing, stopped, expected)
    ("a service never succeeds", {S.SUCCEEDED: 2}, 2, False, False, J.PENDING),
    ("a service runs", {S.RUNNING: 1, S.PENDING: 1}, 2, False, False, J.RUNNING),
    ("every instance stopped, none runs", {S.KILLED: 2}, 2, False, True, J.STOPPED),
    ("every instance stopping", {S.KILLED: 1, S.KILLING: 1}, 2, False, True, J.KILLING),
    ("a job kill ends it", {S.KILLED: 2}, 2, True, True, J.KILLED),
    ("killed by the job's kill", {S.KILLED: 2}, 2, True, False, J.KILLED),
]


@pytest.mark.parametrize(("name", "counts", "n", "killing", "stopped", "expected"),
                         LONG_RUNNING_RULES, ids=[r[0] for r in LONG_RUNNING_RULES])
def test_derive_long_running_job_state(name: str, counts: dict[TaskState, int], n: int,
                                       killing: bool, stopped: bool,
                                       expected: JobState) -> None:
    assert derive_job_state(counts, n, killing, long_running=True,
                            stopped=stopped) is expected


def test_every_job_state_is_reachable_from_the_tables() -> None:
    assert {row[4] for row in JOB_RULES} | {row[5] for row in LONG_RUNNING_RULES} == set(
        JobState)
