"""Host maintenance states: the table, readable rejections, and random command sequences."""

from __future__ import annotations

import itertools

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from peloton.model.hoststate import (
    IN_MAINTENANCE,
    REASONS,
    TRANSITIONS,
    HostCommand,
    HostState,
    HostStateError,
    accepts_work,
    apply,
    can_apply,
)

H, C = HostState, HostCommand
PAIRS = list(itertools.product(HostState, HostCommand))
PROPERTY = settings(max_examples=80, deadline=None, derandomize=True)


def test_the_maintenance_cycle() -> None:
    state = H.UP
    for command, expected in [(C.START_MAINTENANCE, H.DRAINING), (C.DRAINED, H.DRAINED),
                              (C.DOWN, H.DOWN), (C.COMPLETE_MAINTENANCE, H.UP)]:
        state = apply(state, command)
        assert state is expected


@pytest.mark.parametrize(("state", "command", "reason"), [
    (H.DOWN, C.START_MAINTENANCE,
     "the host is already DOWN for maintenance; complete that maintenance first"),
    (H.DRAINING, C.START_MAINTENANCE, "maintenance already started: the host is DRAINING"),
    (H.UP, C.COMPLETE_MAINTENANCE, "the host is UP: it is not in maintenance"),
    (H.UP, C.CANCEL_MAINTENANCE, "the host is UP: there is no maintenance to cancel"),
    (H.DOWN, C.DRAINED, "drained is not allowed when the host is DOWN"),
])
def test_bad_commands_are_rejected_with_a_reason(
        state: HostState, command: HostCommand, reason: str) -> None:
    with pytest.raises(HostStateError) as info:
        apply(state, command)
    assert str(info.value) == reason == info.value.reason
    assert info.value.state is state and info.value.command is command


@pytest.mark.parametrize(("state", "command"), PAIRS, ids=str)
def test_every_pair_is_applied_or_rejected(state: HostState, command: HostCommand) -> None:
    if can_apply(state, command):
        assert apply(state, command) is TRANSITIONS[(state, command)]
    else:
        with pytest.raises(HostStateError):
            apply(state, command)


def test_reasons_only_name_rejected_pairs() -> None:
    assert not set(REASONS) & set(TRANSITIONS)


def test_cancel_brings_a_draining_or_drained_host_back() -> None:
    assert apply(H.DRAINING, C.CANCEL_MAINTENANCE) is H.UP
    assert apply(H.DRAINED, C.CANCEL_MAINTENANCE) is H.UP


def test_only_up_hosts_accept_work() -> None:
    assert [s for s in HostState if accepts_work(s)] == [H.UP]
    assert IN_MAINTENANCE == set(HostState) - {H.UP}


@PROPERTY
@given(st.lists(st.sampled_from(list(HostCommand)), max_size=40))
def test_random_commands_never_leave_the_machine(commands: list[HostCommand]) -> None:
    """Rejected commands change nothing; every state reached is a row of the table;
    maintenance is never completed without having gone DOWN."""
    state, went_down = H.UP, False
    for command in commands:
        try:
            new = apply(state, command)
        except HostStateError:
            assert not can_apply(state, command)
            continue
        assert (state, command) in TRANSITIONS
        if command is C.COMPLETE_MAINTENANCE:
            assert went_down
        went_down = new is H.DOWN or (went_down and new is not H.UP)
        state = new
        assert any(s is state for s, _ in TRANSITIONS)
