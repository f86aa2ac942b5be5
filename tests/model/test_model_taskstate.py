"""`task_state`: the member `TaskState(value)` gives, by a table."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.model.taskstate import TaskState, is_terminal, stage, task_state


@pytest.mark.parametrize("state", list(TaskState))
def test_every_name_gives_its_member(state: TaskState) -> None:
    assert task_state(state.value) is state
    assert task_state(state) is state  # a member is its own name


@given(st.one_of(st.text(max_size=12), st.integers(), st.none(), st.lists(st.text(), max_size=2)))
def test_anything_else_fails_as_the_enum_call_does(value: object) -> None:
    if isinstance(value, str) and value in {s.value for s in TaskState}:
        return
    with pytest.raises(ValueError):
        TaskState(value)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        task_state(value)  # type: ignore[arg-type]


def test_the_helpers_take_names() -> None:
    assert is_terminal("KILLED") and not is_terminal("RUNNING")
    assert stage("PENDING") < stage("RUNNING") < stage("FAILED")
    with pytest.raises(ValueError):
        stage("RUNING")
