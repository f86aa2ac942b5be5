"""The update state machine as data: the table, readable rejections, random sequences."""

from __future__ import annotations

import itertools
import re

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from peloton.updates.domain.states import (
    INITIAL,
    STATUSES,
    TERMINAL_UPDATE,
    TRANSITIONS,
    USER_TRIGGERS,
    IllegalUpdateTransition,
    Trigger,
    UpdateState,
    UpdateStatus,
    apply,
    can_apply,
)

U, T = UpdateState, Trigger
FWD, BWD = UpdateStatus(U.ROLLING_FORWARD), UpdateStatus(U.ROLLING_BACKWARD)
P_FWD, P_BWD = UpdateStatus(U.PAUSED, U.ROLLING_FORWARD), UpdateStatus(U.PAUSED, U.ROLLING_BACKWARD)
PAIRS = list(itertools.product(STATUSES, Trigger))
PROPERTY = settings(max_examples=100, deadline=None, derandomize=True)


def test_the_table_only_names_known_statuses() -> None:
    for (source, _), target in TRANSITIONS.items():
        assert source in STATUSES and target in STATUSES
    assert {s.state for s in STATUSES} == set(UpdateState)
    assert len(set(STATUSES)) == len(STATUSES) == 9


@pytest.mark.parametrize(("status", "trigger"), PAIRS, ids=str)
def test_every_pair_is_applied_or_rejected(status: UpdateStatus, trigger: Trigger) -> None:
    if can_apply(status, trigger):
        assert apply(status, trigger) == TRANSITIONS[(status, trigger)]
    else:
        with pytest.raises(IllegalUpdateTransition) as info:
            apply(status, trigger)
        assert info.value.status == status and info.value.trigger is trigger
        assert str(info.value) == info.value.reason != ""


@pytest.mark.parametrize(("path", "end"), [
    ([T.START, T.COMPLETE], U.SUCCEEDED),
    ([T.START_PAUSED, T.RESUME, T.COMPLETE], U.SUCCEEDED),
    ([T.START, T.PAUSE, T.RESUME, T.PAUSE, T.ROLLBACK, T.COMPLETE], U.ROLLED_BACK),
    ([T.START, T.ROLLBACK, T.PAUSE, T.RESUME, T.FAIL], U.FAILED),
    ([T.START, T.FAIL], U.FAILED),
    ([T.START, T.ROLLBACK, T.PAUSE, T.ABORT], U.ABORTED),
    ([T.ABORT], U.ABORTED),
])
def test_named_paths(path: list[Trigger], end: UpdateState) -> None:
    status = INITIAL
    for trigger in path:
        status = apply(status, trigger)
    assert status.state is end and status.terminal


def test_pause_remembers_the_direction_and_resume_restores_it() -> None:
    assert apply(FWD, T.PAUSE) == P_FWD and apply(P_FWD, T.RESUME) == FWD
    assert apply(BWD, T.PAUSE) == P_BWD and apply(P_BWD, T.RESUME) == BWD
    assert P_BWD.backward and not P_FWD.backward and BWD.backward
    assert str(P_BWD) == "PAUSED (resumes ROLLING_BACKWARD)"


@pytest.mark.parametrize(("status", "trigger", "reason"), [
    (P_FWD, T.PAUSE, "the update is already paused"),
    (FWD, T.RESUME, "the update is ROLLING_FORWARD, not paused: nothing to resume"),
    (BWD, T.ROLLBACK, "the update is already rolling back"),
    (P_BWD, T.ROLLBACK, "the update is already rolling back"),
    (INITIAL, T.ROLLBACK, "the update has not started: nothing to roll back (abort it instead)"),
    (UpdateStatus(U.SUCCEEDED), T.ROLLBACK, "the update is SUCCEEDED, which is final: it "
     "accepts no rollback; start a new update instead"),
    (P_FWD, T.COMPLETE, "complete is not allowed when the update is PAUSED (resumes "
     "ROLLING_FORWARD)"),
])
def test_readable_rejections(status: UpdateStatus, trigger: Trigger, reason: str) -> None:
    with pytest.raises(IllegalUpdateTransition, match="^" + re.escape(reason) + "$"):
        apply(status, trigger)


def test_status_invariant_and_round_trip() -> None:
    with pytest.raises(ValueError):
        UpdateStatus(U.PAUSED)
    with pytest.raises(ValueError):
        UpdateStatus(U.ROLLING_FORWARD, U.ROLLING_FORWARD)
    with pytest.raises(ValueError):
        UpdateStatus(U.PAUSED, U.SUCCEEDED)
    for s in STATUSES:
        assert UpdateStatus.from_dict(s.to_dict()) == s


def test_terminal_statuses_have_no_exits_and_every_other_can_end() -> None:
    for s in STATUSES:
        exits = [t for t in Trigger if can_apply(s, t)]
        assert (exits == []) == (s.state in TERMINAL_UPDATE)
        if not s.terminal:
            assert apply(s, T.ABORT).state is U.ABORTED


def test_every_status_is_reachable() -> None:
    seen, frontier = {INITIAL}, [INITIAL]
    while frontier:
        s = frontier.pop()
        for t in Trigger:
            if can_apply(s, t) and (n := apply(s, t)) not in seen:
                seen.add(n)
                frontier.append(n)
    assert seen == set(STATUSES)


@PROPERTY
@given(st.lists(st.sampled_from(list(Trigger)), max_size=40))
def test_no_sequence_of_commands_reaches_an_undefined_pair(triggers: list[Trigger]) -> None:
    """Any sequence from INITIALIZED: each step is a pair of the table or is rejected
    without effect, and the status reached is always one the table knows."""
    status = INITIAL
    for trigger in triggers:
        assert status in STATUSES
        try:
            new = apply(status, trigger)
        except IllegalUpdateTransition:
            assert (status, trigger) not in TRANSITIONS
            continue
        assert TRANSITIONS[(status, trigger)] == new
        status = new
    assert status in STATUSES


@PROPERTY
@given(st.lists(st.sampled_from(sorted(USER_TRIGGERS)), max_size=30))
def test_user_commands_alone_never_finish_an_update_but_by_abort(
        triggers: list[Trigger]) -> None:
    status = apply(INITIAL, T.START)
    for trigger in triggers:
        if can_apply(status, trigger):
            status = apply(status, trigger)
    assert status.state in {U.ROLLING_FORWARD, U.ROLLING_BACKWARD, U.PAUSED, U.ABORTED}
