"""The rolling-update planner: named examples, then properties over a simulated job."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from peloton.updates.domain.rolling import (
    Action,
    ActionKind,
    Health,
    InstanceView,
    Plan,
    Update,
    UpdateSettings,
    UpdateSpecError,
    command,
    plan,
)
from peloton.updates.domain.states import (
    IllegalUpdateTransition,
    Trigger,
    UpdateState,
    UpdateStatus,
)

H, K, U = Health, ActionKind, UpdateState
PROPERTY = settings(max_examples=120, deadline=None, derandomize=True)


def healthy(n: int, version: int = 1) -> dict[int, InstanceView]:
    return {i: InstanceView(version, H.HEALTHY) for i in range(n)}


def acts(p: Plan) -> list[tuple[str, int]]:
    return [(a.kind.value, a.instance) for a in p.actions]


def update(old: int = 4, new: int = 4, **kw: Any) -> Update:
    return Update(UpdateSettings(**kw), old, 1, new, 2)


# ----------------------------------------------------------------------- examples


def test_the_docstring_example() -> None:
    view = healthy(4)
    view[3] = InstanceView(1, H.NOT_RUNNING)
    p = plan(update(batch_size=2, max_unavailable=1), view)
    assert acts(p) == [("update", 3)] and p.update.status.state is U.ROLLING_FORWARD
    assert "max-unavailable 1 reached (down or in flight: 3): instance(s) 0, 1, 2 wait" \
        in p.reason
    view[3] = InstanceView(2, H.HEALTHY)
    p = plan(p.update, view)
    assert acts(p) == [("update", 0)]
    view[0] = InstanceView(2, H.NOT_RUNNING)
    p = plan(p.update, view)
    assert acts(p) == [] and "waiting for instance(s) 0 to run version 2 healthily" in p.reason
    view[0] = InstanceView(2, H.HEALTHY)
    assert acts(plan(p.update, view)) == [("update", 1)]


def test_adds_then_updates_then_removes_unavailable_first() -> None:
    view = healthy(3)
    view[1] = InstanceView(1, H.UNHEALTHY)
    view[2] = InstanceView(1, H.NOT_RUNNING)
    grow = plan(update(old=3, new=5), view)
    assert acts(grow) == [("add", 3), ("add", 4), ("update", 2), ("update", 1), ("update", 0)]
    assert all(a.version == 2 for a in grow.actions)
    view = healthy(5)
    view[4] = InstanceView(1, H.NOT_RUNNING)
    shrink = plan(update(old=5, new=2), view)
    assert acts(shrink) == [("update", 0), ("update", 1), ("remove", 4), ("remove", 2),
                            ("remove", 3)]
    assert str(shrink.actions[-1]) == "remove instance 3"


def test_a_stopped_instance_is_updated_without_running_and_costs_no_availability() -> None:
    view = healthy(3)
    view[1] = InstanceView(1, H.STOPPED)
    p = plan(update(old=3, new=3, batch_size=2, max_unavailable=1), view)
    # the stopped one first (it is not serving), and it does not count as down
    assert acts(p) == [("update", 1), ("update", 0)]
    view[1] = InstanceView(2, H.STOPPED)  # it took the version; it still runs nothing
    p = plan(p.update, view)
    assert 1 in p.update.progress.done and acts(p) == []
    view[0] = InstanceView(2, H.HEALTHY)
    p = plan(p.update, view)
    assert acts(p) == [("update", 2)]
    view[2] = InstanceView(2, H.HEALTHY)
    assert plan(p.update, view).update.status.state is U.SUCCEEDED


def test_batch_size_bounds_the_instances_in_flight() -> None:
    view = healthy(5)
    p = plan(update(old=5, new=5, batch_size=2), view)
    assert acts(p) == [("update", 0), ("update", 1)]
    assert "3 more instance(s) wait for room in the batch (batch size 2)" in p.reason
    view[0] = InstanceView(2, H.HEALTHY)
    p = plan(p.update, view)
    assert acts(p) == [("update", 2)] and p.update.progress.done == {0}


def test_removes_go_even_when_max_unavailable_holds_updates() -> None:
    view = healthy(3)
    view[0] = InstanceView(1, H.NOT_RUNNING)
    p = plan(update(old=3, new=2, max_unavailable=1), view)
    assert acts(p) == [("update", 0), ("remove", 2)]
    assert "instance(s) 1 wait" in p.reason


def test_all_done_succeeds() -> None:
    p = plan(update(old=2, new=2), healthy(2))
    done = plan(p.update, healthy(2, version=2))
    assert done.actions == () and done.update.status.state is U.SUCCEEDED
    assert done.reason == "SUCCEEDED: 2 instance(s) at version 2"
    again = plan(done.update, healthy(2, version=2))
    assert again.update == done.update and again.actions == ()


def test_start_paused_waits_for_resume() -> None:
    p = plan(update(start_paused=True), healthy(4))
    assert p.actions == () and p.update.status == UpdateStatus(U.PAUSED, U.ROLLING_FORWARD)
    assert p.reason == "started paused: resume to begin"
    assert plan(p.update, healthy(4)).actions == ()
    resumed = command(p.update, Trigger.RESUME)
    assert len(plan(resumed, healthy(4)).actions) == 4


def test_a_user_pause_stops_new_work() -> None:
    p = plan(update(batch_size=1), healthy(4))
    paused = command(p.update, Trigger.PAUSE)
    view = healthy(4)
    view[0] = InstanceView(2, H.HEALTHY)
    q = plan(paused, view)
    assert q.actions == () and q.reason == "paused by a user; resume to continue"
    with pytest.raises(IllegalUpdateTransition, match="already paused"):
        command(paused, Trigger.PAUSE)
    assert acts(plan(command(paused, Trigger.RESUME), view)) == [("update", 1)]


def test_canary_pauses_after_n_instances_then_resume_continues() -> None:
    view = healthy(6)
    p = plan(update(old=6, new=6, canary=2), view)
    assert acts(p) == [("update", 0), ("update", 1)]
    assert "4 more instance(s) wait for room in the canary" in p.reason
    view[0] = InstanceView(2, H.HEALTHY)
    p = plan(p.update, view)
    assert p.actions == () and p.reason == "canary: waiting for 1 to run version 2 healthily"
    view[1] = InstanceView(2, H.HEALTHY)
    p = plan(p.update, view)
    assert p.update.status.state is U.PAUSED and p.actions == ()
    assert p.reason.startswith("canary: 2 instance(s) updated to version 2; paused")
    p = plan(command(p.update, Trigger.RESUME), view)
    assert acts(p) == [("update", 2), ("update", 3), ("update", 4), ("update", 5)]


def test_a_canary_larger_than_the_work_never_pauses() -> None:
    p = plan(update(old=2, new=2, canary=5), healthy(2))
    assert len(p.actions) == 2
    assert plan(p.update, healthy(2, version=2)).update.status.state is U.SUCCEEDED


def failing(n: int, failures: int) -> dict[int, InstanceView]:
    return {i: InstanceView(2, H.NOT_RUNNING, 2, failures) for i in range(n)}


def test_failures_beyond_tolerance_fail_the_update_without_rollback() -> None:
    p = plan(update(old=2, new=2, max_instance_retries=3, max_tolerable_instance_failures=1),
             healthy(2))
    q = plan(p.update, failing(2, 2))
    assert q.actions == () and q.update.status.state is U.ROLLING_FORWARD
    q = plan(p.update, failing(2, 3))
    assert q.update.status.state is U.FAILED
    assert q.reason == "FAILED: 2 instance(s) failed (tolerance 1): 0, 1"


def test_failures_with_rollback_on_failure_roll_back_to_the_old_version() -> None:
    u = update(old=2, new=3, max_instance_retries=1, max_tolerable_instance_failures=2,
               rollback_on_failure=True)
    p = plan(u, healthy(2))
    assert acts(p) == [("add", 2), ("update", 0), ("update", 1)]
    q = plan(p.update, failing(3, 1))
    assert q.update.status.state is U.ROLLING_BACKWARD
    assert acts(q) == [("update", 0), ("update", 1), ("remove", 2)]
    assert all(a.version == 1 for a in q.actions if a.kind is K.UPDATE)
    assert q.reason.startswith("rolling back after failures: 3 instance(s) failed")
    back = plan(q.update, healthy(2))
    assert back.update.status.state is U.ROLLED_BACK


def test_no_retry_limit_means_an_instance_never_fails() -> None:
    p = plan(update(old=1, new=1, max_tolerable_instance_failures=1), healthy(1))
    q = plan(p.update, failing(1, 1000))
    assert q.update.status.state is U.ROLLING_FORWARD and q.update.progress.failed == set()


def test_settled_with_failures_and_no_tolerance_still_ends() -> None:
    p = plan(update(old=1, new=1, max_instance_retries=1), healthy(1))
    assert plan(p.update, failing(1, 1)).update.status.state is U.FAILED


def test_a_user_rollback_resets_progress_and_resetting_a_goal_costs_nothing() -> None:
    p = plan(update(old=3, new=3, max_unavailable=1), healthy(3))
    assert acts(p) == [("update", 0)]
    back = command(p.update, Trigger.ROLLBACK)
    assert back.status.state is U.ROLLING_BACKWARD and back.progress.touched == {}
    # instance 0's goal is v2 but it still runs v1 healthily; 1 is down at v2
    view = {0: InstanceView(1, H.HEALTHY, 2), 1: InstanceView(2, H.NOT_RUNNING),
            2: InstanceView(1, H.HEALTHY)}
    q = plan(back, view)
    assert acts(q) == [("update", 1), ("update", 0)]
    assert q.update.status.state is U.ROLLING_BACKWARD


def test_terminal_updates_do_nothing() -> None:
    u = replace(update(), status=UpdateStatus(U.ABORTED))
    p = plan(u, healthy(4))
    assert p.actions == () and p.update == u
    assert p.reason == "the update is ABORTED: nothing to do"


def test_snapshot_round_trip() -> None:
    u = update(old=3, new=5, batch_size=2, max_unavailable=1, canary=1, start_paused=False)
    p = plan(u, healthy(3))
    for x in (u, p.update, command(p.update, Trigger.PAUSE)):
        assert Update.from_dict(x.to_dict()) == x


@pytest.mark.parametrize(("body", "message"), [
    ({"batchSize": -1}, "batchSize: must be >= 0"),
    ({"batchSize": "2"}, "batchSize: must be an integer"),
    ({"maxUnavailable": 0}, "maxUnavailable: must be >= 1 (leave it out for no limit)"),
    ({"rollbackOnFailure": "yes"}, "rollbackOnFailure: must be true or false"),
    ({"maxSurge": 1}, "maxSurge: unknown update setting"),
    ({"canary": True}, "canary: must be an integer"),
])
def test_bad_update_specs_name_the_field(body: dict[str, Any], message: str) -> None:
    with pytest.raises(UpdateSpecError, match="^" + message.replace("(", r"\(")
                       .replace(")", r"\)") + "$"):
        UpdateSettings.from_body(body)


def test_update_spec_body_and_peloton_aliases() -> None:
    s = UpdateSettings.from_body({"batchSize": 2, "maxInstanceAttempts": 3,
                                  "maxFailureInstances": 1, "rollbackOnFailure": True,
                                  "maxUnavailable": 2, "canary": 1, "startPaused": True})
    assert (s.batch_size, s.max_instance_retries, s.max_tolerable_instance_failures) == (2, 3, 1)
    assert UpdateSettings.from_body(s.to_body()) == s
    assert UpdateSettings.from_body({}) == UpdateSettings()


# ----------------------------------------------------------------------- properties


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    old = draw(st.integers(0, 6))
    new = draw(st.integers(0 if old else 1, 6))
    return {
        "old": old, "new": new,
        "settings": UpdateSettings(
            batch_size=draw(st.integers(0, 3)),
            max_unavailable=draw(st.none() | st.integers(1, 3)),
            max_instance_retries=draw(st.integers(1, 3)),
            max_tolerable_instance_failures=draw(st.integers(0, 2)),
            rollback_on_failure=draw(st.booleans()),
            start_paused=draw(st.booleans()),
            canary=draw(st.integers(0, 3))),
        "down": draw(st.sets(st.integers(0, max(old - 1, 0)), max_size=old)),
        "bad": draw(st.booleans()),
        "delays": draw(st.lists(st.integers(0, 2), min_size=1, max_size=7)),
    }


def simulate(sc: dict[str, Any]) -> tuple[Update, dict[int, InstanceView]]:
    """Run the planner against a toy job until the update ends. Instances started at a
    version become healthy after a delay, unless the version is bad (then every step is
    one more failed run). After every step, no more stable instances (below both counts)
    are down than max-unavailable allows (or than were down at the start). Returns the
    last update and the instances."""
    old, new, cap = sc["old"], sc["new"], sc["settings"].max_unavailable
    u = Update(sc["settings"], old, 1, new, 2)
    view = {i: InstanceView(1, H.NOT_RUNNING if i in sc["down"] else H.HEALTHY)
            for i in range(old)}
    ready_at = {i: 1 for i in sc["down"]}
    stable = range(min(old, new))
    d0 = sum(1 for i in stable if i in sc["down"])
    for step in range(400):
        p = plan(u, view)
        assert p == plan(u, dict(reversed(view.items()))), "order of the input matters"
        if u.settings.batch_size:
            assert len(p.update.progress.in_flight) <= u.settings.batch_size
        for a in p.actions:
            apply_action(view, a, ready_at, step + sc["delays"][a.instance % len(sc["delays"])])
        down = sum(1 for i in stable if view[i].health is not H.HEALTHY)
        assert cap is None or down <= max(cap, d0), (step, p.reason)
        u = p.update
        if u.status.terminal:
            return u, view
        if u.status.state is U.PAUSED:
            u = command(u, Trigger.RESUME)
        for i, v in view.items():
            if v.health is H.HEALTHY:
                continue
            if sc["bad"] and v.version == 2:
                view[i] = replace(v, failures=v.failures + 1)
            elif step >= ready_at.get(i, 0):
                view[i] = replace(v, health=H.HEALTHY)
    raise AssertionError(f"the update did not end: {u}")


def apply_action(view: dict[int, InstanceView], a: Action, ready_at: dict[int, int],
                 at: int) -> None:
    if a.kind is K.REMOVE:
        del view[a.instance]
        return
    assert a.version is not None
    current = view.get(a.instance)
    if current is not None and current.version == a.version:
        view[a.instance] = replace(current, goal_version=a.version)
        return
    view[a.instance] = InstanceView(a.version, H.NOT_RUNNING, a.version, 0)
    ready_at[a.instance] = at


@PROPERTY
@given(scenarios())
def test_an_update_ends_where_it_should_and_never_exceeds_max_unavailable(
        sc: dict[str, Any]) -> None:
    u, view = simulate(sc)
    failed = sc["bad"] and sc["new"] > 0
    if not failed:
        assert u.status.state is U.SUCCEEDED
        assert all(v.version == 2 and v.health is H.HEALTHY for v in view.values())
        assert sorted(view) == list(range(sc["new"]))
    elif sc["settings"].rollback_on_failure:
        assert u.status.state is U.ROLLED_BACK
        assert sorted(view) == list(range(sc["old"]))
        assert all(v.version == 1 and v.health is H.HEALTHY for v in view.values())
    else:
        assert u.status.state is U.FAILED


@PROPERTY
@given(scenarios())
def test_the_planner_is_deterministic(sc: dict[str, Any]) -> None:
    a, b = simulate(sc), simulate(sc)
    assert a == b
