"""Admission: examples with exact reasons, the anti-starvation rule, and properties."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from peloton.model.resources import Resources
from peloton.resmgr.domain.admission import (
    AdmissionState,
    Gang,
    PoolAdmissionView,
    PoolAllocation,
    admission_views,
    admit,
    format_shortfall,
    reason_key,
)
from peloton.resmgr.domain.entitlement import PoolUsage, compute_entitlements
from peloton.resmgr.domain.poolconfig import PoolConfig, ResourceSpec
from peloton.resmgr.domain.pooltree import build_tree

POOL = "/a"


def cpu_pool(
    entitlement: float,
    reservation: float = 0.0,
    allocated: float = 0.0,
    slack: float = 0.0,
    controller_limit: float | None = None,
    non_preemptible: float = 0.0,
) -> PoolAdmissionView:
    """A pool with `entitlement` cpus (all non-slack) and `slack` revocable cpus."""
    return PoolAdmissionView(
        entitlement=Resources(cpu=entitlement),
        slack_entitlement=Resources(cpu=slack),
        nonslack_entitlement=Resources(cpu=entitlement),
        reservation=Resources(cpu=reservation),
        allocation=PoolAllocation(
            nonslack=Resources(cpu=allocated), non_preemptible=Resources(cpu=non_preemptible)
        ),
        controller_limit=None if controller_limit is None else Resources(cpu=controller_limit),
    )


def gang(
    gid: str,
    cpu: float,
    priority: int = 0,
    seq: int = 0,
    members: int = 1,
    pool: str = POOL,
    **flags: bool | int,
) -> Gang:
    return Gang(
        gang_id=gid,
        task_ids=tuple(f"{gid}-{i}" for i in range(members)),
        pool=pool,
        priority=priority,
        seq=seq,
        resources=Resources(cpu=cpu),
        **flags,  # type: ignore[arg-type]
    )


def ids(gangs: list[Gang]) -> list[str]:
    return [g.gang_id for g in gangs]


def test_priority_then_fifo_order() -> None:
    queue = [
        gang("low", 1, 0, seq=1),
        gang("high-late", 1, 5, seq=9),
        gang("low-first", 1, 0, seq=0),
    ]
    result = admit({POOL: cpu_pool(10)}, {POOL: queue})
    assert ids(result.admitted) == ["high-late", "low-first", "low"]
    assert result.pending_reasons == {}
    assert result.allocations[POOL].nonslack == Resources(cpu=3)


def test_over_entitlement_reason_and_backfill_behind_a_big_gang() -> None:
    queue = [gang("big", 20, 1, seq=0), gang("small", 2, 0, seq=1)]
    result = admit({POOL: cpu_pool(38, allocated=20)}, {POOL: queue})
    assert ids(result.admitted) == ["small"]
    assert result.pending_reasons == {"big": "pool over entitlement: cpu 40/38"}
    assert result.state.blocked_cycles == {"big": 1}


def test_gang_waits_for_its_members_without_blocking() -> None:
    queue = [gang("g", 3, 9, members=2, min_members=5), gang("x", 1)]
    result = admit({POOL: cpu_pool(10)}, {POOL: queue})
    assert ids(result.admitted) == ["x"]
    assert result.pending_reasons == {"g": "waiting for 3 more gang members"}


def test_non_preemptible_work_only_within_reservation() -> None:
    view = cpu_pool(100, reservation=10, non_preemptible=8)
    queue = [gang("np", 4, preemptible=False), gang("p", 4)]
    result = admit({POOL: view}, {POOL: queue})
    assert ids(result.admitted) == ["p"]
    assert result.pending_reasons == {"np": "non-preemptible work beyond reservation: cpu 12/10"}


def test_controller_tasks_within_controller_limit() -> None:
    queue = [gang("c1", 1, seq=0, controller=True), gang("c2", 1.5, seq=1, controller=True)]
    result = admit({POOL: cpu_pool(100, controller_limit=2)}, {POOL: queue})
    assert ids(result.admitted) == ["c1"]
    assert result.pending_reasons == {"c2": "controller tasks beyond controller limit: cpu 2.5/2"}


def test_revocable_work_uses_slack_entitlement() -> None:
    queue = [gang("r1", 3, seq=0, revocable=True), gang("r2", 3, seq=1, revocable=True)]
    result = admit({POOL: cpu_pool(0, slack=5)}, {POOL: queue})
    assert ids(result.admitted) == ["r1"]
    assert result.pending_reasons == {"r2": "pool over slack entitlement: cpu 6/5"}
    assert result.allocations[POOL].slack == Resources(cpu=3)


def test_several_failed_checks_are_all_reported() -> None:
    view = cpu_pool(5, reservation=2, controller_limit=1)
    result = admit({POOL: view}, {POOL: [gang("g", 6, preemptible=False, controller=True)]})
    assert result.pending_reasons["g"] == (
        "pool over entitlement: cpu 6/5; non-preemptible work beyond reservation: cpu 6/2; "
        "controller tasks beyond controller limit: cpu 6/1"
    )


def test_unknown_pool() -> None:
    result = admit({}, {"/ghost": [gang("g", 1, pool="/ghost")]})
    assert result.pending_reasons == {"g": "unknown pool /ghost"}


def test_aged_gang_reserves_its_budget_so_it_is_not_starved() -> None:
    """A big gang blocked for max_skips cycles holds back same-budget work behind it."""
    busy = {POOL: cpu_pool(10, allocated=6, slack=5)}  # 4 cpus free, 5 revocable
    big = gang("big", 8, seq=0)
    state = AdmissionState()
    for cycle in (1, 2):  # small work backfills past the blocked big gang
        result = admit(busy, {POOL: [big, gang(f"small{cycle}", 1, seq=cycle)]}, state)
        assert ids(result.admitted) == [f"small{cycle}"]
        assert result.state.blocked_cycles == {"big": cycle}
        state = result.state
    queue = [big, gang("small3", 1, seq=3), gang("rev", 1, seq=4, revocable=True)]
    result = admit(busy, {POOL: queue}, state, max_skips=3)
    assert result.state.blocked_cycles == {"big": 3}
    assert ids(result.admitted) == ["rev"]  # another budget still flows
    assert result.pending_reasons["small3"] == (
        "held back: gang big has waited too long and reserves the nonslack budget"
    )
    # allocation frees up: the big gang goes first, small3 now waits its turn
    freed = {POOL: cpu_pool(10, allocated=2)}
    result = admit(freed, {POOL: queue[:2]}, result.state, max_skips=3)
    assert ids(result.admitted) == ["big"]
    assert result.pending_reasons == {"small3": "pool over entitlement: cpu 11/10"}
    assert result.state.blocked_cycles == {"small3": 1}


def test_gang_that_can_never_fit_does_not_reserve() -> None:
    queue = [gang("huge", 50, seq=0), gang("small", 1, seq=1)]
    state = AdmissionState({"huge": 10})
    result = admit({POOL: cpu_pool(10)}, {POOL: queue}, state, max_skips=3)
    assert ids(result.admitted) == ["small"]
    assert result.pending_reasons["huge"] == "pool over entitlement: cpu 50/10"


def test_views_from_tree_and_entitlements() -> None:
    config = PoolConfig.create("a", {"cpu": ResourceSpec(4, 10, 1)}, controller_limit_percent=50)
    tree, _ = build_tree([("/", config)])
    ents = compute_entitlements(tree, Resources(cpu=10), {"/a": PoolUsage(demand=Resources(cpu=8))})
    views = admission_views(tree, ents, {})
    assert list(views) == ["/a"]
    assert views["/a"].nonslack_entitlement.cpu == 10
    assert views["/a"].reservation == Resources(cpu=4)
    assert views["/a"].controller_limit == Resources(cpu=2)


# -------------------------------------------------------------------------- property

small = st.one_of(st.sampled_from([0.0, 1.0, 2.0, 5.0]), st.floats(0, 10))
vec = st.builds(Resources, small, small, small, small)


@st.composite
def admission_inputs(draw: st.DrawFn) -> tuple[dict[str, PoolAdmissionView], dict[str, list[Gang]]]:
    pools: dict[str, PoolAdmissionView] = {}
    queues: dict[str, list[Gang]] = {}
    for p in range(draw(st.integers(1, 3))):
        path = f"/p{p}"
        ent = draw(st.builds(Resources, *(st.floats(0, 30),) * 4))
        slack = draw(st.builds(Resources, *(st.floats(0, 10),) * 4))
        reservation = draw(st.builds(Resources, *(st.floats(0, 20),) * 4))
        used = ent.scale(draw(st.floats(0, 1)))
        pools[path] = PoolAdmissionView(
            entitlement=ent + slack,
            slack_entitlement=slack,
            nonslack_entitlement=ent,
            reservation=reservation,
            allocation=PoolAllocation(nonslack=used, non_preemptible=used.min(reservation)),
            controller_limit=draw(st.one_of(st.none(), st.just(reservation.scale(0.3)))),
        )
        queues[path] = [
            Gang(
                f"{path}-g{i}",
                ("t",) * draw(st.integers(1, 3)),
                path,
                draw(st.integers(0, 2)),
                i,
                draw(vec),
                preemptible=draw(st.booleans()),
                revocable=draw(st.booleans()),
                controller=draw(st.booleans()),
                min_members=draw(st.sampled_from([0, 0, 2])),
            )
            for i in range(draw(st.integers(0, 8)))
        ]
    return pools, queues


@settings(max_examples=80, deadline=None)
@given(admission_inputs(), st.integers(0, 5))
def test_admission_never_exceeds_entitlement(
    inputs: tuple[dict[str, PoolAdmissionView], dict[str, list[Gang]]], prior_age: int
) -> None:
    pools, queues = inputs
    state = AdmissionState({g.gang_id: prior_age for q in queues.values() for g in q})
    result = admit(pools, queues, state, max_skips=3)
    admitted = {g.gang_id for g in result.admitted}
    for path, queue in queues.items():
        view, after = pools[path], result.allocations[path]
        assert after.nonslack.fits_in(view.nonslack_entitlement.max(view.allocation.nonslack))
        assert after.slack.fits_in(view.slack_entitlement.max(view.allocation.slack))
        assert after.non_preemptible.fits_in(view.reservation.max(view.allocation.non_preemptible))
        if view.controller_limit is not None:
            assert after.controller.fits_in(view.controller_limit)
        for g in queue:  # every gang is either admitted or has a reason, never both
            assert (g.gang_id in admitted) != (g.gang_id in result.pending_reasons)
    assert admit(pools, queues, state, max_skips=3) == result  # deterministic


_AMOUNT = st.one_of(st.integers(0, 10**7).map(float),
                    st.floats(0, 1e9, allow_nan=False, allow_infinity=False))


@settings(max_examples=300, deadline=None)
@given(need=st.fixed_dictionaries({k: _AMOUNT for k in ("cpu", "memory", "disk", "gpu")}),
       have=st.fixed_dictionaries({k: _AMOUNT for k in ("cpu", "memory", "disk", "gpu")}),
       holder=st.text(min_size=1, max_size=20).filter(lambda t: "\n" not in t))
def test_a_reason_key_keeps_what_is_short_and_drops_the_figures(
        need: dict[str, float], have: dict[str, float], holder: str) -> None:
    """The resource manager republishes a reason when its key changes (cycle.py): the key
    names each check and kind that is short, whatever the figures; a held-back reason's
    key names the budget, whichever gang reserves it."""
    n, h = Resources(**need), Resources(**have)
    short = list(n.exceeding(h))
    if short:
        checks = [f"pool over entitlement: {format_shortfall(n, h)}",
                  f"non-preemptible work beyond reservation: {format_shortfall(n, h)}"]
        assert reason_key("; ".join(checks)) == "; ".join(
            [f"pool over entitlement: {', '.join(short)}",
             f"non-preemptible work beyond reservation: {', '.join(short)}"])
    held = f"held back: gang {holder} has waited too long and reserves the slack budget"
    assert reason_key(held) == "held back: slack"
    assert reason_key("waiting for 2 more gang members") == "waiting for 2 more gang members"
