"""Preemption between pools and within a pool: victim order, counters, properties."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from peloton.model.resources import KINDS, Resources
from peloton.resmgr.domain.admission import Gang, PoolAdmissionView, PoolAllocation
from peloton.resmgr.domain.preemption import (
    HIGHER_PRIORITY_IN_POOL,
    POOL_OVER_ENTITLEMENT,
    PreemptionState,
    TaskView,
    plan_in_pool_preemption,
    plan_pool_preemption,
    plan_preemption,
)

POOL = "/a"


def task(
    tid: str, cpu: float, state: str = "RUNNING", priority: int = 0, started: int = 0, **kw: bool
) -> TaskView:
    return TaskView(tid, POOL, state, priority, Resources(cpu=cpu), started_seq=started, **kw)


def pool_view(tasks: list[TaskView], entitlement: float, slack: float = 0.0) -> PoolAdmissionView:
    """A pool whose allocation is exactly what `tasks` hold."""
    nonslack = sum((t.resources for t in tasks if not t.revocable), Resources())
    slack_alloc = sum((t.resources for t in tasks if t.revocable), Resources())
    np_alloc = sum((t.resources for t in tasks if not t.preemptible), Resources())
    return PoolAdmissionView(
        entitlement=Resources(cpu=entitlement + slack),
        slack_entitlement=Resources(cpu=slack),
        nonslack_entitlement=Resources(cpu=entitlement),
        reservation=Resources(cpu=entitlement),
        allocation=PoolAllocation(nonslack, slack_alloc, np_alloc),
    )


def victims_of(tasks: list[TaskView], entitlement: float, slack: float = 0.0) -> list[str]:
    plan = plan_pool_preemption(
        {POOL: pool_view(tasks, entitlement, slack)}, tasks, sustained_cycles=1
    )
    return [v.task_id for v in plan.victims]


def test_counter_must_reach_sustained_cycles_and_resets() -> None:
    tasks = [task("t1", 6, started=1), task("t2", 6, started=2)]
    pools = {POOL: pool_view(tasks, 10)}
    state = PreemptionState()
    for expected in (1, 2):
        plan = plan_pool_preemption(pools, tasks, state, sustained_cycles=3)
        assert plan.victims == [] and plan.state.over_cycles == {POOL: expected}
        state = plan.state
    plan = plan_pool_preemption(pools, tasks, state, sustained_cycles=3)
    assert [v.task_id for v in plan.victims] == ["t2"]
    code, detail = plan.victims[0].reason
    assert code == POOL_OVER_ENTITLEMENT
    assert detail == "pool /a over entitlement for 3 cycles: cpu 12/10"
    assert plan.state.over_cycles == {}  # processed: count restarts
    # a pool back within its entitlement forgets its count
    fine = {POOL: pool_view([task("t1", 6)], 10)}
    assert plan_pool_preemption(fine, tasks, PreemptionState({POOL: 2})).state.over_cycles == {}


def test_victim_order_state_then_priority_then_most_recent() -> None:
    tasks = [
        task("running-old", 1, started=1),
        task("running-new", 1, started=5),
        task("running-low", 1, priority=-1, started=0),
        task("placing", 1, "PLACING", priority=9),
        task("ready", 1, "READY", priority=9),
    ]
    assert victims_of(tasks, 1) == ["ready", "placing", "running-low", "running-new"]


def test_revocable_first_against_slack_excess() -> None:
    tasks = [task("rev", 2, revocable=True), task("normal", 2), task("rev2", 1, revocable=True)]
    # slack entitlement 1 < slack allocation 3; non-slack fine
    assert victims_of(tasks, 10, slack=1) == ["rev"]


def test_non_preemptible_never_touched_and_useless_tasks_skipped() -> None:
    tasks = [
        TaskView("mem", POOL, "READY", 0, Resources(memory=100)),
        task("np", 5, preemptible=False),
        task("ok", 2),
    ]
    entitled = Resources(cpu=4, memory=1000)
    allocation = PoolAllocation(Resources(cpu=7, memory=100), non_preemptible=Resources(cpu=5))
    view = PoolAdmissionView(entitled, Resources(), entitled, entitled, allocation)
    # cpu is over by 3; "mem" frees no cpu and "np" may not be touched: only "ok" goes
    plan = plan_pool_preemption({POOL: view}, tasks, sustained_cycles=1)
    assert [v.task_id for v in plan.victims] == ["ok"]


def test_in_pool_higher_priority_preempts_lower_priority() -> None:
    running = [
        task("low1", 4, priority=0, started=1),
        task("low2", 4, priority=0, started=2),
        task("mid", 4, priority=5),
    ]
    view = pool_view(running, 12)  # pool exactly at its entitlement
    queue = [Gang("hi", ("hi-0",), POOL, 9, 0, Resources(cpu=6))]
    victims = plan_in_pool_preemption({POOL: view}, {POOL: queue}, running)
    assert [v.task_id for v in victims] == ["low2", "low1"]
    assert victims[0].reason == (
        HIGHER_PRIORITY_IN_POOL,
        "for gang hi (priority 9) in /a: needs cpu 6/0",
    )


def test_in_pool_no_preemption_when_it_cannot_help_or_is_not_needed() -> None:
    running = [task("low", 4, priority=0), task("same", 4, priority=9)]
    view = pool_view(running, 8)
    too_big = [Gang("huge", ("h",), POOL, 9, 0, Resources(cpu=20))]  # above entitlement
    assert plan_in_pool_preemption({POOL: view}, {POOL: too_big}, running) == []
    needs_equal = [Gang("g", ("g",), POOL, 9, 0, Resources(cpu=6))]  # only "low" is lower
    assert plan_in_pool_preemption({POOL: view}, {POOL: needs_equal}, running) == []
    roomy = pool_view(running, 20)
    fits = [Gang("g", ("g",), POOL, 9, 0, Resources(cpu=6))]
    assert plan_in_pool_preemption({POOL: roomy}, {POOL: fits}, running) == []


def test_plan_preemption_runs_both_stages_without_double_counting() -> None:
    running = [task("a", 4, priority=0, started=1), task("b", 4, priority=0, started=2)]
    # 8 allocated, 6 entitled: stage 1 takes b (most recent); stage 2 then needs 6 - 2 free
    # = 4 more for the priority-9 gang and takes a
    view = pool_view(running, 6)
    queue = [Gang("hi", ("hi",), POOL, 9, 0, Resources(cpu=6))]
    plan = plan_preemption({POOL: view}, running, {POOL: queue}, sustained_cycles=1)
    assert [(v.task_id, v.reason[0]) for v in plan.victims] == [
        ("b", POOL_OVER_ENTITLEMENT),
        ("a", HIGHER_PRIORITY_IN_POOL),
    ]


# -------------------------------------------------------------------------- property

states = st.sampled_from(["READY", "PLACING", "LAUNCHING", "RUNNING"])
small = st.one_of(st.sampled_from([0.0, 1.0, 2.0]), st.floats(0, 8))


@st.composite
def over_pools(draw: st.DrawFn) -> tuple[PoolAdmissionView, list[TaskView]]:
    tasks = [
        TaskView(
            f"t{i}",
            POOL,
            draw(states),
            draw(st.integers(0, 3)),
            Resources(draw(small), draw(small), draw(small), draw(small)),
            preemptible=draw(st.booleans()),
            revocable=draw(st.booleans()),
            started_seq=draw(st.integers(0, 100)),
        )
        for i in range(draw(st.integers(0, 12)))
    ]
    view = pool_view(tasks, 0)
    ent = Resources(*(draw(st.floats(0, 30)) for _ in KINDS))
    slack = Resources(*(draw(st.floats(0, 10)) for _ in KINDS))
    view = PoolAdmissionView(ent + slack, slack, ent, ent, view.allocation)
    return view, tasks


@settings(max_examples=80, deadline=None)
@given(over_pools())
def test_preemption_frees_the_excess_and_spares_non_preemptible(
    inputs: tuple[PoolAdmissionView, list[TaskView]],
) -> None:
    view, tasks = inputs
    plan = plan_pool_preemption({POOL: view}, tasks, sustained_cycles=1)
    chosen = {v.task_id for v in plan.victims}
    by_id = {t.task_id: t for t in tasks}
    assert len(chosen) == len(plan.victims)
    assert all(by_id[t].preemptible for t in chosen)
    for revocable, alloc, ent in (
        (True, view.allocation.slack, view.slack_entitlement),
        (False, view.allocation.nonslack, view.nonslack_entitlement),
    ):
        group = [t for t in tasks if t.revocable == revocable and t.preemptible]
        freed = sum((t.resources for t in group if t.task_id in chosen), Resources())
        available = sum((t.resources for t in group), Resources())
        excess = (alloc - ent).clamp_non_negative()
        if (
            excess.is_zero()
            and (view.allocation.slack - view.slack_entitlement).fits_in(Resources())
            and (view.allocation.nonslack - view.nonslack_entitlement).fits_in(Resources())
        ):
            assert not chosen
        assert excess.min(available).fits_in(freed)
