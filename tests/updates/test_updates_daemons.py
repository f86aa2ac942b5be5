"""The daemon placement rule: the docstring's example, constraints, then properties."""

from __future__ import annotations

import random

import hypothesis.strategies as st
from hypothesis import given, settings

from peloton.model.constraint import (
    AndConstraint,
    Condition,
    HardConstraint,
    HostLabelConstraint,
    LabelConstraint,
    LabelKind,
    LabelOp,
    MaxPerHostConstraint,
    OrConstraint,
    parse_constraint,
)
from peloton.model.hoststate import HostState
from peloton.updates.domain.daemons import (
    DaemonHost,
    DaemonInstance,
    DaemonPlan,
    host_matches,
    plan_daemons,
)

S = HostState
I = DaemonInstance  # noqa: E741
PROPERTY = settings(max_examples=150, deadline=None, derandomize=True)
ZONE_A = HostLabelConstraint("zone", LabelOp.EQUALS, ("a",))


def host(name: str, zone: str | None = None, state: HostState = S.UP) -> DaemonHost:
    return DaemonHost(name, {} if zone is None else {"zone": zone}, state)


def test_the_docstring_example() -> None:
    p = plan_daemons([host("h1", "a"), host("h2", "a"), host("h3", "b")], ZONE_A, [I(0, "h1")])
    assert p.place == (I(1, "h2"),) and p.keep == (I(0, "h1"),) and p.retire == ()
    p = plan_daemons([host("h1", "a", S.DRAINING), host("h2", "a")], ZONE_A,
                     [I(0, "h1"), I(1, "h2")])
    assert p.draining == (I(0, "h1"),) and p.keep == (I(1, "h2"),) and p.place == ()
    p = plan_daemons([host("h2", "a")], ZONE_A, [I(0, "h1"), I(1, "h2")])
    assert p.retire == (I(0, "h1"),) and p.reasons == {0: "host h1 left the cluster"}


def test_retire_reasons_and_the_lowest_instance_stays() -> None:
    hosts = [host("h1", "a", S.DRAINED), host("h2", "a", S.DOWN), host("h3", "b"),
             host("h4", "a")]
    p = plan_daemons(hosts, ZONE_A, [I(0, "h1"), I(1, "h2"), I(2, "h3"), I(5, "h4"),
                                     I(3, "h4")])
    assert p.keep == (I(3, "h4"),) and p.place == ()
    assert p.reasons == {
        0: "host h1 is DRAINED for maintenance",
        1: "host h2 is DOWN for maintenance",
        2: "host h3 no longer matches the daemon's constraint (zone=a)",
        5: "host h4 already runs a lower instance of this daemon",
    }


def test_new_ids_fill_the_gaps_in_host_name_order() -> None:
    p = plan_daemons([host("c"), host("a"), host("b"), host("d")], None,
                     [I(1, "x"), I(3, "d")])
    assert p.place == (I(0, "a"), I(2, "b"), I(4, "c"))
    assert p.retire == (I(1, "x"),)


def test_constraints_judge_host_labels_only() -> None:
    h = DaemonHost("h7", {"zone": "a", "gpu": "yes"})
    host_label = LabelConstraint(LabelKind.HOST, Condition.EQUAL, "zone", "a", 1)
    not_zone_b = LabelConstraint(LabelKind.HOST, Condition.LESS_THAN, "zone", "b", 1)
    task_label = LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, "app", "web", 1)
    cases: list[tuple[HardConstraint, bool]] = [
        (ZONE_A, True),
        (HostLabelConstraint("zone", LabelOp.IN, ("b", "c")), False),
        (HostLabelConstraint("zone", LabelOp.NOT_IN, ("b",)), True),
        (HostLabelConstraint("gpu", LabelOp.EXISTS), True),
        (HostLabelConstraint("ssd", LabelOp.EXISTS), False),
        (HostLabelConstraint("ssd", LabelOp.NOT_EXISTS), True),
        (HostLabelConstraint("hostname", LabelOp.EQUALS, ("h7",)), True),
        (host_label, True), (not_zone_b, True),
        (task_label, True), (MaxPerHostConstraint(1), True),
        (AndConstraint((ZONE_A, HostLabelConstraint("ssd", LabelOp.EXISTS))), False),
        (OrConstraint((HostLabelConstraint("ssd", LabelOp.EXISTS), ZONE_A)), True),
    ]
    for constraint, expected in cases:
        assert host_matches(constraint, h) is expected, constraint
    parsed = parse_constraint({"hostLabel": {"key": "zone", "in": ["a", "b"]}})
    assert isinstance(parsed, HostLabelConstraint) and host_matches(parsed, h)


# ----------------------------------------------------------------------- properties

NAMES = [f"h{i}" for i in range(6)]


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[DaemonHost], HardConstraint | None,
                                        list[DaemonInstance]]:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=6))
    hosts = [DaemonHost(n, {"zone": draw(st.sampled_from("ab"))},
                        draw(st.sampled_from(list(S)))) for n in names]
    constraint = draw(st.sampled_from([None, ZONE_A]))
    instances = draw(st.lists(st.builds(I, st.integers(0, 9), st.sampled_from(NAMES)),
                              unique_by=lambda i: i.instance, max_size=8))
    return hosts, constraint, instances


def everyone(p: DaemonPlan) -> list[DaemonInstance]:
    return [*p.retire, *p.draining, *p.keep]


@PROPERTY
@given(clusters(), st.randoms(use_true_random=False))
def test_one_daemon_per_matching_up_host_and_each_instance_judged_once(
        case: tuple[list[DaemonHost], HardConstraint | None, list[DaemonInstance]],
        rnd: random.Random) -> None:
    hosts, constraint, instances = case
    p = plan_daemons(hosts, constraint, instances)
    hosts2, instances2 = list(hosts), list(instances)
    rnd.shuffle(hosts2)
    rnd.shuffle(instances2)
    assert plan_daemons(hosts2, constraint, instances2) == p
    assert sorted(everyone(p)) == sorted(instances)
    assert set(p.reasons) == {i.instance for i in p.retire}
    by_name = {h.name: h for h in hosts}
    wanted = {h.name for h in hosts if h.state is S.UP and host_matches(constraint, h)}
    running = [i.host for i in (*p.keep, *p.place)]
    assert sorted(running) == sorted(wanted)  # exactly one on every UP matching host
    assert all(by_name[i.host].state is S.DRAINING for i in p.draining)
    new_ids = [i.instance for i in p.place]
    assert len(set(new_ids)) == len(new_ids)
    assert not set(new_ids) & {i.instance for i in instances}
    # applying the plan is a fixed point: nothing more to place or retire
    after = [*p.keep, *p.draining, *p.place]
    again = plan_daemons(hosts, constraint, after)
    assert again.place == () and again.retire == ()


KEYS = ["zone", "rack", "hostname"]
VALUES = ["a", "b", "h0", "h1"]
leaves = st.one_of(
    st.builds(HostLabelConstraint, st.sampled_from(KEYS), st.sampled_from(list(LabelOp)),
              st.lists(st.sampled_from(VALUES), min_size=1, max_size=2).map(tuple))
    .map(lambda c: c if c.op in (LabelOp.IN, LabelOp.NOT_IN) else
         HostLabelConstraint(c.key, c.op, c.values[:1] if c.op is LabelOp.EQUALS else ())),
    st.builds(LabelConstraint, st.just(LabelKind.HOST), st.sampled_from(list(Condition)),
              st.sampled_from(KEYS), st.sampled_from(VALUES), st.integers(0, 2)),
)
host_constraints = st.recursive(
    leaves, lambda kids: st.one_of(
        st.lists(kids, min_size=1, max_size=3).map(lambda cs: AndConstraint(tuple(cs))),
        st.lists(kids, min_size=1, max_size=3).map(lambda cs: OrConstraint(tuple(cs)))),
    max_leaves=5)


@PROPERTY
@given(host_constraints,
       st.lists(st.fixed_dictionaries({}, optional={"zone": st.sampled_from("ab"),
                                                    "rack": st.sampled_from("ab")}),
                min_size=1, max_size=4))
def test_host_matches_agrees_with_the_placement_evaluator(
        constraint: HardConstraint, labels: list[dict[str, str]]) -> None:
    """One meaning of a host constraint: the daemon rule and placement's vectorised
    evaluator accept the same hosts."""
    import numpy as np

    from peloton.model.resources import Resources
    from peloton.placement.domain.evaluator import limits
    from peloton.placement.domain.framework import CycleState, PlacementConfig
    from peloton.placement.domain.hostindex import HostTable
    from peloton.placement.domain.types import HostView

    cap = Resources(1, 1, 1, 0)
    views = [HostView(f"h{i}", cap, cap, labels=ls) for i, ls in enumerate(labels)]
    table = HostTable(views)
    state = CycleState(table, PlacementConfig())
    allowed = limits(state, constraint, None, np.arange(len(views)))  # type: ignore[arg-type]
    by_placement = {name: bool(n > 0) for name, n in zip(table.names, allowed, strict=True)}
    by_daemon = {v.name: host_matches(constraint, DaemonHost(v.name, v.labels)) for v in views}
    assert by_daemon == by_placement, str(constraint)
