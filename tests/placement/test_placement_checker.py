"""The independent checker must catch every kind of broken round (so it can fail)."""

from __future__ import annotations

from _placement_builders import host, job

from peloton.model.constraint import OrConstraint, SpreadConstraint, parse_constraint
from peloton.model.resources import Resources
from peloton.placement.checker import check_round
from peloton.placement.domain import Code, Placement, RoundResult, TaskRequest, place

HOSTS = [host("a", cpu=4, slack=Resources(2), labels={"zone": "x"}, ports=((100, 101),)),
         host("b", cpu=4, tasks={"peloton.job_id=web": 1})]


def kinds(hosts, tasks, placements, unplaced=None):  # type: ignore[no-untyped-def]
    result = RoundResult(placements, dict(unplaced or {}),
                         {k: Code.UNSCHEDULABLE for k in unplaced or {}})
    return sorted({v.kind for v in check_round(hosts, tasks, result)})


def test_a_real_round_is_clean() -> None:
    tasks = job("j", 3, cpu=1, ports=("p",)) + job("r", 2, cpu=1, revocable=True)
    assert check_round(HOSTS, tasks, place(HOSTS, tasks)) == []


def test_over_commit_non_slack_and_slack() -> None:
    tasks = job("j", 5, cpu=1)
    assert kinds(HOSTS, tasks, [Placement(t.task_id, "a") for t in tasks]) == ["over-committed"]
    rev = job("r", 3, cpu=1, revocable=True)
    assert kinds(HOSTS, rev, [Placement(t.task_id, "a") for t in rev]) == ["over-committed"]


def test_accounting() -> None:
    tasks = job("j", 2)
    assert kinds(HOSTS, tasks, [Placement("j-0", "a")]) == ["unaccounted"]
    assert kinds(HOSTS, tasks, [Placement("j-0", "a"), Placement("j-0", "b")],
                 {"j-1": "x"}) == ["placed-twice"]
    assert kinds(HOSTS, tasks, [Placement("j-0", "zzz")], {"j-1": "x"}) == ["unknown-host"]
    assert kinds(HOSTS, tasks, [Placement("j-0", "a"), Placement("j-1", "a")],
                 {"j-1": "x"}) == ["placed-and-unplaced"]


def test_ports() -> None:
    tasks = job("j", 2, ports=("p",))
    assert kinds(HOSTS, tasks, [Placement("j-0", "a", {"p": 100}),
                                Placement("j-1", "a", {"p": 100})]) == ["ports"]
    assert kinds(HOSTS, tasks[:1], [Placement("j-0", "a", {"p": 555})]) == ["ports"]
    assert kinds(HOSTS, tasks[:1], [Placement("j-0", "a", {"q": 100})]) == ["ports"]


def test_constraints_replayed_in_order() -> None:
    one_per_host = parse_constraint({"maxPerHost": 1})
    tasks = job("web", 2, constraint=one_per_host)
    assert kinds(HOSTS, tasks, [Placement("web-0", "b")], {"web-1": "x"}) == ["constraint"]
    assert kinds(HOSTS, tasks, [Placement("web-0", "a"), Placement("web-1", "a")]) == [
        "constraint"]
    zone = parse_constraint({"hostLabel": {"key": "zone", "equals": "x"}})
    assert kinds(HOSTS, job("z", 1, constraint=zone), [Placement("z-0", "b")]) == ["constraint"]
    # soft parts never fail
    soft = TaskRequest("s", "s", Resources(1), constraint=SpreadConstraint("zone"))
    assert kinds(HOSTS, [soft], [Placement("s", "b")]) == []
    either = OrConstraint((zone, parse_constraint({"hostLabel": {"key": "hostname",
                                                                  "equals": "b"}})))
    assert kinds(HOSTS, [TaskRequest("o", "o", Resources(1), constraint=either)],
                 [Placement("o", "b")]) == []


def test_gangs() -> None:
    tasks = job("g", 3, gang=True)
    assert kinds(HOSTS, tasks, [Placement("g-0", "a")], {"g-1": "x", "g-2": "x"}) == ["gang"]
    partial = tasks[:2]
    assert kinds(HOSTS, partial, [Placement("g-0", "a"), Placement("g-1", "a")]) == ["gang"]
