"""Pools through events: PoolBook decides requests with the pooltree rules and folds its
own facts; replaying the facts rebuilds the tree; standbys converge on the leader's log."""

from __future__ import annotations

from typing import Any

import pytest

from peloton.bus.catalog import topic_for_event
from peloton.bus.codec import default_codec
from peloton.model.event import Event
from peloton.model.resources import Resources
from peloton.resmgr.domain.poolbook import (
    POOL_FACTS,
    PoolBook,
    config_from_record,
    config_record,
    normalize_path,
    parse_pool_document,
)
from peloton.resmgr.domain.poolconfig import PoolConfig, ReservationType, ResourceSpec

CAPACITY = Resources(12, 12288, 30720, 0)


def cfg(name: str = "x", cpu_res: float = 1, cpu_lim: float = 4, **kw: Any) -> dict[str, Any]:
    return config_record(PoolConfig.uniform(name, Resources(cpu_res, 0, 0, 0),
                                             Resources(cpu_lim, 1000, 1000, 0), **kw))


def create(path: str, rid: str, **kw: Any) -> tuple[str, dict[str, Any]]:
    return "ResourcePoolCreateRequested", {"request_id": rid, "at": 1, "path": path,
                                           "config": cfg(**kw)}


def update(path: str, rid: str, parent: str | None = None, **kw: Any
           ) -> tuple[str, dict[str, Any]]:
    return "ResourcePoolUpdateRequested", {"request_id": rid, "at": 1, "path": path,
                                           "config": cfg(**kw), "parent": parent}


def delete(path: str, rid: str) -> tuple[str, dict[str, Any]]:
    return "ResourcePoolDeleteRequested", {"request_id": rid, "at": 1, "path": path}


class Leader:
    """A book that decides, and folds what it publishes (as the service does)."""

    def __init__(self, busy: frozenset[str] = frozenset()) -> None:
        self.book = PoolBook()
        self.log: list[Event] = []
        self.busy = busy

    def ask(self, request: tuple[str, dict[str, Any]], fold: bool = True) -> Event:
        (fact,) = self.book.decide(*request, CAPACITY, self.busy, 100)
        codec = default_codec()
        etype, body = codec.decode(codec.encode(fact.type, fact.body))  # matches the schema
        assert topic_for_event(etype).name == "respool-events"
        self.log.append(fact)
        if fold:
            self.book.fold(etype, body)
        return fact


def test_create_parent_then_child_back_to_back_before_any_fact_comes_back() -> None:
    leader = Leader()
    a = leader.ask(create("/a", "r1", cpu_res=4, cpu_lim=8), fold=False)
    b = leader.ask(create("/a/b", "r2", cpu_res=2, cpu_lim=8), fold=False)
    assert (a.type, b.type) == ("ResourcePoolCreated", "ResourcePoolCreated")
    assert b.body["pool"] == {"path": "/a/b", "parent": "/a", "config": cfg("b", 2, 8)}
    assert "/a" not in leader.book.tree  # the folded tree follows the log only
    for fact in leader.log:
        leader.book.fold(fact.type, fact.body)
    assert leader.book.tree.children("/a") == ("/a/b",)
    assert leader.book.unconfirmed(10**9, 1) == []


@pytest.mark.parametrize("request_, reason", [
    (create("/a/b", "r"), "/a/b: parent: no pool at /a"),
    (create("/default", "r"), "/default: name: 'default' is already used under /"),
    (create("/big", "r", cpu_lim=13), "/big: resources.cpu.limit: 13 exceeds cluster "
                                      "capacity 12"),
    (create("/", "r"), "/: pool: the root pool always exists"),
    (create("relative", "r"), "relative: pool: a pool path starts with '/' "
                              "(e.g. /team-a/batch)"),
    (update("/ghost", "r"), "/ghost: pool: no pool at this path"),
    (delete("/default", "r"), "/default: pool: the default pool cannot be deleted (jobs "
                              "without a respool go there)"),
    (delete("/ghost", "r"), "/ghost: pool: no pool at this path"),
])
def test_rejections_name_the_pool_the_field_and_the_reason(
        request_: tuple[str, dict[str, Any]], reason: str) -> None:
    fact = Leader().ask(request_)
    assert fact.type == "ResourcePoolRequestRejected"
    assert fact.body["reasons"] == [reason]
    assert fact.body["operation"] == {"ResourcePoolCreateRequested": "CREATE",
                                      "ResourcePoolUpdateRequested": "UPDATE",
                                      "ResourcePoolDeleteRequested": "DELETE"}[request_[0]]


def test_a_request_with_an_unreadable_config_is_rejected_not_dead_lettered() -> None:
    body = create("/odd", "r")[1]
    body["config"]["resources"][0]["type"] = "BURSTY"
    body["config"]["resources"][1]["kind"] = "tpu"
    fact = Leader().ask(("ResourcePoolCreateRequested", body))
    assert fact.type == "ResourcePoolRequestRejected"
    assert fact.body["reasons"][0].startswith("/odd: config: ")


def test_sibling_reservations_and_child_limits_are_checked_against_the_parent() -> None:
    leader = Leader()
    leader.ask(create("/a", "r1", cpu_res=6, cpu_lim=8))
    leader.ask(create("/a/x", "r2", cpu_res=4, cpu_lim=8))
    too_much = leader.ask(create("/a/y", "r3", cpu_res=3, cpu_lim=8))
    assert too_much.body["reasons"] == [
        "/a: resources.cpu.reservation: children reserve 7 in total, more than its "
        "reservation 6"]
    too_high = leader.ask(create("/a/z", "r4", cpu_res=0, cpu_lim=9))
    assert too_high.body["reasons"] == ["/a/z: resources.cpu.limit: 9 exceeds parent /a "
                                        "limit 8"]
    shrink = leader.ask(update("/a", "r5", cpu_res=4, cpu_lim=5))
    assert shrink.body["reasons"] == ["/a/x: resources.cpu.limit: 8 exceeds parent /a limit 5"]


def test_delete_is_refused_for_pools_with_children_or_tasks() -> None:
    leader = Leader(busy=frozenset({"/t"}))
    leader.ask(create("/a", "r1"))
    leader.ask(create("/a/b", "r2"))
    leader.ask(create("/t", "r3"))
    assert leader.ask(delete("/a", "r4")).body["reasons"] == [
        "/a: children: pool has child pools (/a/b)"]
    assert leader.ask(delete("/t", "r5")).body["reasons"] == ["/t: tasks: pool still has tasks"]
    assert leader.ask(create("/t/sub", "r5b")).body["reasons"] == [
        "/t/sub: parent: /t holds tasks; jobs run in leaf pools, so a pool with tasks cannot "
        "get child pools"]
    assert leader.ask(update("/a/b", "r5c", parent="/t")).body["reasons"][0].startswith(
        "/a/b: parent: /t holds tasks")
    assert leader.ask(delete("/a/b", "r6")).type == "ResourcePoolDeleted"
    assert leader.ask(delete("/a", "r7")).type == "ResourcePoolDeleted"
    assert sorted(leader.book.tree.nodes) == ["/", "/default", "/t"]


def test_update_replaces_the_config_and_a_new_parent_moves_the_subtree() -> None:
    leader = Leader()
    for rid, path in enumerate(("/a", "/a/b", "/a/b/c", "/z")):
        leader.ask(create(path, f"c{rid}", cpu_res=0, cpu_lim=4))
    too_small = leader.ask(update("/a/b", "u0", cpu_res=0, cpu_lim=3))
    assert too_small.body["reasons"] == [
        "/a/b/c: resources.cpu.limit: 4 exceeds parent /a/b limit 3"]
    changed = leader.ask(update("/a/b", "u1", cpu_res=0, cpu_lim=4, share=2))
    assert changed.type == "ResourcePoolUpdated" and changed.body["removed"] == []
    assert [p["path"] for p in changed.body["pools"]] == ["/a/b", "/a/b/c"]
    assert leader.book.tree.config("/a/b").share.cpu == 2
    moved = leader.ask(update("/a/b", "u2", parent="/z", cpu_res=0, cpu_lim=3))
    assert moved.body["reasons"] == ["/z/b/c: resources.cpu.limit: 4 exceeds parent /z/b limit 3"]
    moved = leader.ask(update("/a/b", "u3", parent="/z", cpu_res=0, cpu_lim=4))
    assert moved.body["removed"] == ["/a/b", "/a/b/c"]
    assert [(p["path"], p["parent"]) for p in moved.body["pools"]] == [
        ("/z/b", "/z"), ("/z/b/c", "/z/b")]
    tree = leader.book.tree
    assert "/a/b" not in tree and tree.children("/z/b") == ("/z/b/c",)
    assert tree.config("/z/b").share.cpu == 1
    under_itself = leader.ask(update("/z", "u4", parent="/z/b", cpu_lim=4))
    assert under_itself.body["reasons"] == ["/z: parent: cannot move a pool under itself (/z/b)"]


def test_replaying_the_facts_rebuilds_the_same_tree_and_duplicates_change_nothing() -> None:
    leader = Leader()
    leader.ask(create("/a", "r1", cpu_res=2))
    leader.ask(create("/a/b", "r2", cpu_res=1))
    leader.ask(update("/a", "r3", cpu_res=3, cpu_lim=4))
    leader.ask(create("/c", "r4"))
    leader.ask(delete("/c", "r5"))
    leader.ask(create("/a/b", "r6"))  # rejected: exists
    replica = PoolBook()
    for fact in leader.log + leader.log:  # every fact twice
        replica.fold(fact.type, fact.body)
    assert replica.entries == leader.book.entries
    assert replica.tree == leader.book.tree
    assert replica.applied == {f"r{i}" for i in range(1, 7)}


def test_a_request_already_answered_is_not_decided_again() -> None:
    leader = Leader()
    leader.ask(create("/a", "r1"))
    assert leader.book.decide(*create("/a", "r1"), CAPACITY, (), 200) == []


def test_a_standby_follows_the_leaders_answer_not_its_own() -> None:
    # the standby saw less capacity, so it would have refused what the leader accepted
    standby = PoolBook()
    (own,) = standby.decide(*create("/big", "r1", cpu_lim=10), Resources(8, 0, 0, 0), (), 100)
    assert own.type == "ResourcePoolRequestRejected"
    leader = Leader()
    fact = leader.ask(create("/big", "r1", cpu_lim=10))
    standby.fold(fact.type, fact.body)
    assert "/big" in standby.tree and standby.unconfirmed(10**9, 1) == []


def test_unconfirmed_decisions_are_offered_again_to_a_new_leader() -> None:
    book = PoolBook()
    (fact,) = book.decide(*create("/a", "r1"), CAPACITY, (), 1_000)
    assert book.unconfirmed(3_999, 3_000) == []
    assert book.unconfirmed(4_000, 3_000) == [fact]
    assert book.unconfirmed(5_000, 3_000) == []  # once per period
    assert book.unconfirmed(7_000, 3_000) == [fact]
    book.fold(fact.type, fact.body)
    assert book.unconfirmed(10**9, 1) == [] and "/a" in book.tree


def test_config_records_round_trip_and_fill_every_kind() -> None:
    config = PoolConfig.create("p", {"cpu": ResourceSpec(1, 2, 3, ReservationType.STATIC)},
                               slack_limit_percent=30, controller_limit_percent=10,
                               description="d")
    record = config_record(config)
    assert [r["kind"] for r in record["resources"]] == ["cpu", "memory", "disk", "gpu"]
    assert config_from_record(record) == config
    codec = default_codec()
    body = {"request_id": "r", "at": 1, "path": "/p", "config": record}
    assert codec.decode(codec.encode("ResourcePoolCreateRequested", body))[1] == body


def test_parse_pool_document_accepts_pelotons_yaml_shape_and_lists_problems() -> None:
    doc = {"name": "a", "parent": "/team", "resources": [
        {"kind": "cpu", "reservation": 6, "limit": 12, "share": 2, "type": "STATIC"}],
        "slackLimit": {"maxPercent": 30}, "controllerLimit": {"maxPercent": 10}}
    record, parent, problems = parse_pool_document(doc, "/team/a")
    assert problems == [] and parent == "/team" and record is not None
    assert record["resources"][0] == {"kind": "cpu", "reservation": 6.0, "limit": 12.0,
                                      "share": 2.0, "type": "STATIC"}
    assert record["slack_limit_percent"] == 30 and record["controller_limit_percent"] == 10
    _, _, problems = parse_pool_document({"name": "b", "resources": [
        {"kind": "cpu", "reservation": 6, "limit": 2}]}, "/team/a")
    assert problems == ["name: 'b' does not match the path's name 'a'",
                        "resources.cpu.limit: 2 is below reservation 6"]
    _, _, problems = parse_pool_document({"resources": [{"kind": "tpu"}]}, "/a")
    assert problems == ["resources[0].kind: unknown kind 'tpu' (known: cpu, memory, disk, gpu)"]
    assert parse_pool_document([1], "/a")[2] == ["body: must be a mapping, got list"]


def test_paths_are_normalized() -> None:
    assert normalize_path("/a//b/") == "/a/b" and normalize_path("/") == "/"
    with pytest.raises(ValueError):
        normalize_path("a/b")


def test_every_pool_fact_is_on_respool_events() -> None:
    assert {topic_for_event(e).name for e in POOL_FACTS} == {"respool-events"}
    assert topic_for_event("TasksPreempted").name == "respool-events"
    assert topic_for_event("ResourcePoolCreateRequested").public
