"""The router's split (bus/routing.py) and the job manager's route (jobmgr/shard.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.bus import routing
from peloton.bus.catalog import INTERNAL_TOPICS, topic, topic_for_event
from peloton.bus.check import check_event
from peloton.bus.routing import (
    Route,
    RouterCore,
    Split,
    check_copartitioned,
    item_field,
    partition_for,
    partition_of,
    split,
)
from peloton.hostmgr.service import HostManagerCore
from peloton.hostmgr.shard import HOST_ROUTE, HostShardCore
from peloton.jobmgr.service import JobManagerCore
from peloton.jobmgr.shard import JOB_ROUTE, JobShardCore
from peloton.model.ids import parse_run_id, run_id

job_ids = st.text(alphabet="abcxyz-019", min_size=1, max_size=12)
statuses = st.lists(st.fixed_dictionaries({
    "job_id": job_ids, "instance": st.integers(0, 50), "run": st.integers(1, 5),
    "state": st.sampled_from(["RUNNING", "SUCCEEDED", "FAILED"]), "exit_code": st.none(),
    "message": st.just(""), "sandbox": st.just(""), "health": st.just("")}), max_size=30)


def status_report(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"host": "host-1", "incarnation": "i-1", "at": 5, "statuses": items}


#: the job route as it was until session 35, when the router split the agents' statuses
#: onto the inbox (the job manager's shards now read them whole): a split of many items
STATUS_ROUTE = Route("jobmgr", "jobmgr-inbox", JOB_ROUTE.own,
                     {"TaskStatusReported": Split("statuses", item_field("job_id"))})


@given(statuses)
def test_parts_hold_every_item_once_in_order_each_in_its_partition(
        items: list[dict[str, Any]]) -> None:
    body = status_report(items)
    parts = split(STATUS_ROUTE, "TaskStatusReported", body)
    n = STATUS_ROUTE.partitions
    seen: list[dict[str, Any]] = []
    for ev in parts:
        p = partition_for(ev.key.encode(), n)
        assert ev.topic == "jobmgr-inbox" and ev.type == "TaskStatusReported"
        assert {k: v for k, v in ev.body.items() if k != "statuses"} == {
            k: v for k, v in body.items() if k != "statuses"}
        assert ev.body["statuses"], "no empty part"
        assert all(partition_for(s["job_id"].encode(), n) == p for s in ev.body["statuses"])
        seen.extend(ev.body["statuses"])
    assert sorted(map(repr, seen)) == sorted(map(repr, items))
    # within a part, the items keep the order they had in the fact
    for ev in parts:
        where = {id(s): i for i, s in enumerate(items)}
        positions = [where[id(s)] for s in ev.body["statuses"]]
        assert positions == sorted(positions)
    assert len({partition_for(e.key.encode(), n) for e in parts}) == len(parts)


@given(statuses)
def test_every_part_is_an_event_the_bus_carries(items: list[dict[str, Any]]) -> None:
    for ev in split(STATUS_ROUTE, "TaskStatusReported", status_report(items)):
        check_event(ev)


def test_lost_runs_go_to_the_partition_of_their_job() -> None:
    runs = [run_id(f"job-{i}", i % 3, 1) for i in range(40)] + ["not-a-run-id"]
    body = {"host": "h", "incarnation": "i", "at": 1, "reason": "lost", "runs": runs}
    parts = split(JOB_ROUTE, "HostLost", body)
    n = JOB_ROUTE.partitions
    got = []
    for ev in parts:
        for rid in ev.body["runs"]:
            try:
                job = parse_run_id(rid)[0]
            except ValueError:
                job = rid
            assert partition_for(job.encode(), n) == partition_for(ev.key.encode(), n)
            got.append(rid)
    assert sorted(got) == sorted(runs) and len(parts) > 1


def test_ignored_types_give_no_part_and_unknown_types_are_refused() -> None:
    assert split(JOB_ROUTE, "OfferReceived", {"at": 1, "offers": []}) == []
    with pytest.raises(KeyError):
        split(JOB_ROUTE, "JobSubmitted", {})


@pytest.mark.parametrize("route", [JOB_ROUTE, HOST_ROUTE], ids=lambda r: r.service)
def test_each_route_covers_every_event_of_every_topic_it_reads(route: Route) -> None:
    for name in route.topics:
        for etype in topic(name).events:
            assert etype in route.splits or etype in route.ignored, (name, etype)
    assert not set(route.topics) & set(route.own)


def test_the_job_route_reads_what_the_single_job_manager_reads() -> None:
    router = RouterCore(JOB_ROUTE)
    # the router reads exactly what the single job manager reads besides its own topics
    # and those every partition reads whole: the pools and hosts (folded on replay), the
    # launches and statuses (handled again on a rebuild: `rehandle`)
    assert JobShardCore.__mro__[1] is JobManagerCore
    single = set(JobManagerCore.inputs)
    whole = set(JobShardCore.inputs) - set(JOB_ROUTE.sharded)
    assert set(router.inputs) == single - set(JOB_ROUTE.own) - whole
    assert whole == {"entitlement-updated", "host-events", "task-launch-requested",
                     "task-status-reported"}
    assert set(JobShardCore.rehandle) == {topic_for_event(t).name for t in JOB_ROUTE.shares}
    assert not set(JobShardCore.rehandle) & set(JobShardCore.replay)


def test_the_inbox_is_internal_and_copartitioned() -> None:
    assert [t.name for t in INTERNAL_TOPICS] == ["jobmgr-inbox", "hostmgr-inbox"]
    assert topic_for_event("TaskStatusReported").name == "task-status-reported"
    check_copartitioned(JOB_ROUTE)
    check_copartitioned(HOST_ROUTE)
    bad = Route("x", "jobmgr-inbox", ("job-submitted", "entitlement-updated"),
                {"TaskStatusReported": Split("statuses", item_field("job_id"))})
    with pytest.raises(ValueError, match="one partition count"):
        check_copartitioned(bad)


def test_the_host_route_reads_what_the_single_host_manager_reads() -> None:
    single = set(HostManagerCore.inputs)
    shard = set(HostShardCore.inputs)
    assert single == (shard - {"hostmgr-inbox"}) | set(HOST_ROUTE.topics)
    assert set(HostShardCore.replay) - shard == {"host-events"}


def test_a_lost_host_goes_whole_to_the_partition_of_its_host() -> None:
    body = {"host": "host-7", "incarnation": "i", "at": 1, "reason": "silent",
            "runs": ["a-0-1", "b-1-1"]}
    [part] = split(HOST_ROUTE, "HostLost", body)
    assert part.body == body and part.key == "host-7" and part.topic == "hostmgr-inbox"
    check_event(part)


@given(st.lists(st.binary(max_size=40), min_size=1, max_size=30), st.integers(1, 64))
def test_the_producers_partitioner_is_kafkas_default_with_a_memory(keys: list[bytes],
                                                                  count: int) -> None:
    """`key_partitioner` (every shell's producer) puts a keyed record where aiokafka's
    default partitioner puts it, asked again and again (the remembered answers)."""
    from aiokafka.partitioner import DefaultPartitioner, murmur2

    from peloton.bus.publisher import key_partitioner

    partitions = list(range(100, 100 + count))  # ids, not positions
    for key in keys + keys:
        want = DefaultPartitioner()(key, partitions, partitions)
        assert key_partitioner(key, partitions, partitions) == want
        assert partition_for(key, count) == (murmur2(key) & 0x7FFFFFFF) % count
    assert key_partitioner(None, partitions, partitions[:1]) == partitions[0]


@given(st.lists(st.text(max_size=12), min_size=1, max_size=200))
def test_partition_of_answers_as_the_partitioner_however_many_keys_it_remembers(
        keys: list[str]) -> None:
    of = partition_of("job-events")
    n = topic("job-events").partitions
    for key in [*keys, *keys]:  # the second time from its memory
        assert of(key) == partition_for(key.encode(), n)


def test_partition_of_forgets_keys_past_its_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(routing, "PARTITION_MEMO", 3)
    of = partition_of("job-events")
    n = topic("job-events").partitions
    keys = [f"job-{i}" for i in range(10)]
    assert [of(k) for k in keys] == [partition_for(k.encode(), n) for k in keys]
    memo = next(c.cell_contents for c in of.__closure__ or () if isinstance(c.cell_contents, dict))
    assert 0 < len(memo) <= 3
