"""Whole rounds through `place`: named scenarios, reasons, determinism, partial scans."""

from __future__ import annotations

import random

import pytest
from _placement_builders import host, job, n_hosts, where

from peloton.model.constraint import (
    MaxPerHostConstraint,
    OrConstraint,
    SpreadConstraint,
    parse_constraint,
)
from peloton.model.resources import Resources
from peloton.placement.checker import check_round
from peloton.placement.domain import (
    Code,
    HostView,
    PlacementConfig,
    PlacementInputError,
    Strategy,
    TaskRequest,
    place,
)


def placed_hosts(result, prefix: str = "") -> set[str]:  # type: ignore[no-untyped-def]
    return set(where(result.placements, prefix).values())


def test_pack_fills_one_host_before_the_next() -> None:
    result = place(n_hosts(4, cpu=8), job("batch", 6, cpu=2))
    assert placed_hosts(result) == {"h0", "h1"}
    assert not result.unplaced


def test_pack_prefers_partly_used_hosts() -> None:
    hosts = [host("a", cpu=8), host("b", cpu=8, free=Resources(4, 131072, 10**6))]
    assert placed_hosts(place(hosts, job("batch", 2, cpu=2))) == {"b"}


def test_spread_job_puts_task_i_on_host_i() -> None:
    result = place(n_hosts(4), job("svc", 4, strategy=Strategy.SPREAD))
    assert sorted(where(result.placements).values()) == ["h0", "h1", "h2", "h3"]


def test_spread_over_zones_first() -> None:
    hosts = ([host(f"a{i}", labels={"zone": "a"}) for i in range(4)]
             + [host(f"b{i}", labels={"zone": "b"}) for i in range(2)])
    result = place(hosts, job("svc", 4, strategy=Strategy.SPREAD))
    zones = [h[0] for h in where(result.placements).values()]
    assert zones.count("a") == 2 and zones.count("b") == 2


def test_soft_spread_on_a_packed_job_balances_racks() -> None:
    hosts = [host(f"r{r}h{i}", cpu=8, labels={"rack": f"r{r}"}) for r in range(2) for i in range(3)]
    result = place(hosts, job("b", 8, cpu=2, constraint=parse_constraint({"spread": "rack"})))
    racks = [h[:2] for h in where(result.placements).values()]
    assert racks.count("r0") == racks.count("r1") == 4
    assert len(set(where(result.placements).values())) == 2  # still packed within a rack


def test_preference_wins_over_packing_but_not_over_capacity() -> None:
    hosts = [host("plain", free=Resources(2, 131072, 10**6)), host("ssd", labels={"ssd": "y"}),
             host("tiny", cpu=1, labels={"ssd": "y"})]
    c = parse_constraint({"prefer": {"hostLabel": {"key": "ssd", "exists": True}}})
    assert placed_hosts(place(hosts, job("j", 1, cpu=2, constraint=c))) == {"ssd"}


def test_anti_affinity_one_instance_per_host() -> None:
    c = parse_constraint({"labelConstraint": {
        "kind": "TASK", "condition": "CONDITION_LESS_THAN",
        "label": {"key": "peloton.job_id", "value": "web"}, "requirement": 1}})
    hosts = n_hosts(3, tasks={}) + [host("busy", tasks={"peloton.job_id=web": 1})]
    result = place(hosts, job("web", 5, constraint=c))
    assert sorted(where(result.placements).values()) == ["h0", "h1", "h2"]
    assert len(result.unplaced) == 2
    assert all(code is Code.UNSCHEDULABLE for code in result.codes.values())


def test_gpu_hosts_used_last_by_cpu_tasks() -> None:
    hosts = [host("cpu0", cpu=4), host("gpu0", cpu=64, gpu=8)]
    result = place(hosts, job("j", 3, cpu=2))
    assert where(result.placements) == {"j-0": "cpu0", "j-1": "cpu0", "j-2": "gpu0"}
    strict = place(hosts, job("j", 3, cpu=2), PlacementConfig(gpu_hosts_exclusive=True))
    assert placed_hosts(strict) == {"cpu0"}
    assert "no GPU" in strict.unplaced["j-2"] or "no more room" in strict.unplaced["j-2"]


def test_gang_all_or_nothing() -> None:
    hosts = n_hosts(2, cpu=8)
    fits = place(hosts, job("mpi", 4, cpu=4, gang=True))
    assert len(fits.placements) == 4
    too_big = place(hosts, job("mpi", 5, cpu=4, gang=True) + job("other", 1, cpu=4))
    assert not where(too_big.placements, "mpi")
    assert too_big.unplaced["mpi-0"] == too_big.unplaced["mpi-4"]
    assert "gang mpi needs 5 tasks, 4 fit" in too_big.unplaced["mpi-0"]
    assert all(too_big.codes[f"mpi-{i}"] is Code.REJECTED for i in range(5))
    # the rejected gang's reservation was released: the other job still got a host
    assert where(too_big.placements, "other")


def test_gang_incomplete_in_round() -> None:
    tasks = job("mpi", 4, gang=True)[:3]
    result = place(n_hosts(2), tasks)
    assert not result.placements
    assert "incomplete: 3 of 4" in result.unplaced["mpi-0"]


def test_priority_goes_first() -> None:
    hosts = n_hosts(1, cpu=4)
    result = place(hosts, job("low", 2, cpu=2) + job("high", 2, cpu=2, priority=5))
    assert set(where(result.placements)) == {"high-0", "high-1"}


REASON_EXAMPLES = [
    ("gpu in a zone", job("train", 1, cpu=1, gpu=2,
                         constraint=parse_constraint({"hostLabel": {"key": "zone",
                                                                     "equals": "us-east1"}})),
     Code.UNRESOLVABLE, "no host with zone=us-east1 and capacity cpu>=1 memory>=1024MB gpu>=2"),
    ("no free cpu now", job("big", 1, cpu=10, constraint=parse_constraint(
        {"hostLabel": {"key": "zone", "equals": "us-east1"}})), Code.UNSCHEDULABLE,
     "no host with zone=us-east1 and free cpu>=10 memory>=1024MB (3 hosts; zone=us-east1: 2; "
     "capacity cpu>=10 memory>=1024MB: 2; free cpu>=10 memory>=1024MB: 0)"),
    ("no such label", job("x", 1, constraint=parse_constraint(
        {"hostLabel": {"key": "rack", "in": ["r9"]}})), Code.UNRESOLVABLE,
     "no host with rack in [r9] (3 hosts; rack in [r9]: 0)"),
    ("ports exhausted", job("web", 1, ports=tuple(f"p{i}" for i in range(11))),
     Code.UNSCHEDULABLE, "11 free port(s)"),
]


@pytest.mark.parametrize(("name", "tasks", "code", "text"), REASON_EXAMPLES,
                         ids=[e[0] for e in REASON_EXAMPLES])
def test_reasons_are_precise(name, tasks, code, text) -> None:  # type: ignore[no-untyped-def]
    hosts = [host("e1", cpu=16, free=Resources(8, 131072, 10**6), labels={"zone": "us-east1"},
                  ports=((1, 10),)),
             host("e2", cpu=16, free=Resources(8, 131072, 10**6), labels={"zone": "us-east1"},
                  ports=((1, 10),)),
             host("g1", cpu=16, gpu=4, labels={"zone": "us-west1"}, ports=((1, 10),))]
    result = place(hosts, tasks)
    reason = result.unplaced[tasks[0].task_id]
    assert result.codes[tasks[0].task_id] is code
    assert text in reason, reason


def test_invalid_tasks_are_reported_not_raised() -> None:
    soft_in_or = OrConstraint((SpreadConstraint("zone"), MaxPerHostConstraint(1)))
    bad = [TaskRequest("neg", "j", Resources(-1)),
           TaskRequest("dup-ports", "j", Resources(1), ports=("a", "a")),
           TaskRequest("soft-in-or", "k", Resources(1), constraint=soft_in_or),
           TaskRequest("gang0", "k", Resources(1), gang_id="g", gang_size=0)]
    result = place(n_hosts(1), bad + job("ok", 1))
    assert result.codes == {"neg": Code.INVALID, "dup-ports": Code.INVALID,
                            "soft-in-or": Code.INVALID, "gang0": Code.INVALID}
    assert "soft" in result.unplaced["soft-in-or"]
    assert "non-negative" in result.unplaced["neg"]


def test_malformed_rounds_raise() -> None:
    with pytest.raises(PlacementInputError, match="duplicate host name 'h0'"):
        place(n_hosts(1) + n_hosts(1), [])
    with pytest.raises(PlacementInputError, match="duplicate task ids: a"):
        place(n_hosts(1), [TaskRequest("a", "j", Resources(1))] * 2)


def test_no_hosts() -> None:
    result = place([], job("j", 1))
    assert result.codes["j-0"] is Code.UNRESOLVABLE


def test_inputs_are_not_mutated_and_order_does_not_matter() -> None:
    rng = random.Random(3)
    hosts = [host(f"h{i:02d}", cpu=rng.choice((8, 16)), labels={"zone": "ab"[i % 2]},
                  tasks={"peloton.job_id=s": i % 2}) for i in range(20)]
    tasks = (job("b", 30, cpu=2) + job("s", 12, strategy=Strategy.SPREAD, ports=("p",),
                                        constraint=parse_constraint({"maxPerHost": 1}))
             + job("g", 3, cpu=3, gang=True))
    snapshot = [HostView(h.name, h.capacity, h.free, h.slack_free, dict(h.labels),
                         dict(h.task_label_counts), h.ports_free) for h in hosts]
    first = place(hosts, tasks)
    assert hosts == snapshot
    shuffled_hosts, shuffled_tasks = hosts[:], tasks[:]
    rng.shuffle(shuffled_hosts)
    rng.shuffle(shuffled_tasks)
    second = place(shuffled_hosts, shuffled_tasks)
    assert first == second


def test_partial_scan_is_safe_and_packs_like_a_full_scan() -> None:
    hosts = [host(f"h{i:04d}", cpu=16, free=Resources(16 - (i % 5) * 3, 131072, 10**6),
                  labels={"zone": "abc"[i % 3]}) for i in range(600)]
    tasks = job("a", 300, cpu=2) + job("b", 40, cpu=5) + job("c", 7, cpu=16)
    full = place(hosts, tasks, PlacementConfig(partial_scan_from=10**9))
    partial = place(hosts, tasks, PlacementConfig(partial_scan_from=1, scan_block=32))
    assert check_round(hosts, tasks, partial) == []
    assert len(partial.placements) == len(full.placements) == len(tasks)
    used = len({p.host for p in partial.placements})
    assert used <= len({p.host for p in full.placements}) * 1.1


def test_small_rounds_pack_complementary_shapes_together() -> None:
    # 32-cpu/128-GB hosts; 2 x (12 cpu, 16 GB) and 4 x (6 cpu, 48 GB). Group by group the
    # big-cpu tasks share a host, then the memory-heavy ones need two more (2 per host by
    # memory): 3 hosts. Jointly each host takes one of each shape plus one more: 2 hosts.
    hosts = n_hosts(6, cpu=32, memory=131072)
    tasks = job("a", 2, cpu=12, memory=16384) + job("b", 4, cpu=6, memory=49152)
    joint = place(hosts, tasks)
    apart = place(hosts, tasks, PlacementConfig(joint_pack_max_tasks=0))
    assert check_round(hosts, tasks, joint) == []
    assert len(joint.placements) == len(apart.placements) == 6
    assert len({p.host for p in joint.placements}) == 2
    assert len({p.host for p in apart.placements}) == 3


def test_joint_packing_falls_back_when_something_does_not_fit() -> None:
    hosts = n_hosts(1, cpu=8)
    tasks = job("a", 3, cpu=2) + job("b", 2, cpu=2)
    result = place(hosts, tasks)
    assert len(result.placements) == 4
    assert len(result.unplaced) == 1
    assert "no more room" in next(iter(result.unplaced.values())) or "no host" in next(
        iter(result.unplaced.values()))
