"""Hypothesis properties of whole rounds, checked by the independent checker.

No host over capacity (non-slack and slack), ports unique and free, hard constraints hold
when placements are replayed in order, gangs all or nothing, every task accounted for;
the same input (in any order) gives the same output; partial scans are just as safe.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from peloton.model.constraint import Constraint, parse_constraint
from peloton.model.resources import Resources
from peloton.placement.checker import check_round
from peloton.placement.domain import (
    HostView,
    PlacementConfig,
    Strategy,
    TaskRequest,
    place,
)

CONSTRAINTS: list[Constraint | None] = [None, None, None] + [parse_constraint(c) for c in (
    {"maxPerHost": 1},
    {"maxPerHost": 2},
    {"hostLabel": {"key": "zone", "equals": "a"}},
    {"hostLabel": {"key": "zone", "notIn": ["b"]}},
    {"hostLabel": {"key": "ssd", "exists": True}},
    {"spread": "zone"},
    [{"spread": "rack"}, {"maxPerHost": 3}],
    {"prefer": {"hostLabel": {"key": "ssd", "exists": True}}, "weight": 2},
    {"labelConstraint": {"kind": "TASK", "condition": "CONDITION_LESS_THAN",
                         "label": {"key": "peloton.job_id", "value": "j0"}, "requirement": 2}},
    {"labelConstraint": {"kind": "TASK", "condition": "CONDITION_EQUAL",
                         "label": {"key": "tier", "value": "db"}, "requirement": 0}},
    {"labelConstraint": {"kind": "TASK", "condition": "CONDITION_GREATER_THAN",
                         "label": {"key": "peloton.job_id", "value": "j1"}, "requirement": 0}},
    {"labelConstraint": {"kind": "HOST", "condition": "CONDITION_LESS_THAN",
                         "label": {"key": "hostname", "value": "h1"}, "requirement": 1}},
    {"orConstraint": {"constraints": [
        {"hostLabel": {"key": "zone", "equals": "b"}},
        {"labelConstraint": {"kind": "TASK", "condition": "CONDITION_GREATER_THAN",
                             "label": {"key": "tier", "value": "db"}, "requirement": 0}}]}},
    {"andConstraint": {"constraints": [
        {"maxPerHost": 2}, {"hostLabel": {"key": "rack", "in": ["r0", "r1"]}}]}},
)]


@st.composite
def hosts_st(draw: st.DrawFn) -> list[HostView]:
    n = draw(st.integers(0, 10))
    out = []
    for i in range(n):
        cpu = draw(st.sampled_from([2.0, 4.0, 8.0]))
        gpu = draw(st.sampled_from([0.0, 0.0, 2.0]))
        used = draw(st.sampled_from([0.0, 0.5, 1.0, 3.0]))
        labels = {"zone": draw(st.sampled_from("ab")), "rack": f"r{draw(st.integers(0, 2))}"}
        if draw(st.booleans()):
            labels["ssd"] = "1"
        counts = {}
        if draw(st.booleans()):
            counts["peloton.job_id=j0"] = draw(st.integers(0, 2))
        if draw(st.booleans()):
            counts["tier=db"] = draw(st.integers(0, 1))
        lo = draw(st.integers(1000, 1003))
        ports = ((lo, lo + draw(st.integers(-1, 4))),) if draw(st.booleans()) else (
            (lo, lo + 1), (lo + 1, lo + 3))
        cap = Resources(cpu, 4096, 1000, gpu)
        out.append(HostView(f"h{i}", cap, Resources(max(cpu - used, 0), 4096 - used * 512, 1000,
                                                     gpu), Resources(draw(st.sampled_from(
                                                         [0.0, 1.0])), 512), labels, counts,
                            ports))
    return out


@st.composite
def tasks_st(draw: st.DrawFn) -> list[TaskRequest]:
    out: list[TaskRequest] = []
    for j in range(draw(st.integers(0, 5))):
        n = draw(st.integers(1, 6))
        gang = draw(st.integers(0, 4)) == 0
        res = Resources(draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])),
                        draw(st.sampled_from([0.0, 256.0, 1024.0])), 0.0,
                        draw(st.sampled_from([0.0, 0.0, 0.0, 1.0])))
        labels = {"tier": "db"} if draw(st.booleans()) else {}
        for i in range(n):
            out.append(TaskRequest(
                f"j{j}-{i}", f"j{j}", res,
                draw(st.sampled_from([(), (), ("http",), ("a", "b")])) if i == 0 or not gang
                else out[-1].ports,
                draw(st.sampled_from(CONSTRAINTS)) if i == 0 or not gang
                else out[-1].constraint,
                labels, f"g{j}" if gang else None,
                n + draw(st.sampled_from([0, 0, 0, 1])) if gang else 1,
                draw(st.sampled_from(list(Strategy))), draw(st.integers(0, 5)) == 0,
                draw(st.integers(0, 2))))
    return out


PROFILE = settings(max_examples=100, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROFILE
@given(hosts_st(), tasks_st(), st.booleans())
def test_rounds_are_safe_and_complete(hosts, tasks, exclusive) -> None:  # type: ignore[no-untyped-def]
    config = PlacementConfig(gpu_hosts_exclusive=exclusive)
    result = place(hosts, tasks, config)
    assert check_round(hosts, tasks, result) == []
    assert set(result.unplaced) == set(result.codes)


@PROFILE
@given(hosts_st(), tasks_st(), st.randoms(use_true_random=False))
def test_same_input_same_output_in_any_order(hosts, tasks, rnd: random.Random) -> None:  # type: ignore[no-untyped-def]
    first = place(hosts, tasks)
    assert place(hosts, tasks) == first
    h, t = hosts[:], tasks[:]
    rnd.shuffle(h)
    rnd.shuffle(t)
    assert place(h, t) == first


@PROFILE
@given(hosts_st(), tasks_st())
def test_partial_scans_and_group_by_group_packing_are_safe(hosts, tasks) -> None:  # type: ignore[no-untyped-def]
    config = PlacementConfig(partial_scan_from=1, scan_block=2, joint_pack_max_tasks=0)
    result = place(hosts, tasks, config)
    assert check_round(hosts, tasks, result) == []
