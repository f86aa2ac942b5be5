"""The store against real chdb: round trip, replays, out-of-order delivery, schema."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from readmodel_scenario import Bus, full_scenario, res

from peloton.readmodel.projector import COLUMNS, SourcePos, project
from peloton.readmodel.store import Store

JOBS = ("job-ok", "job-bad", "job-wait", "job-rej")


def snapshot(store: Store) -> dict[str, Any]:
    """Everything the API can show."""
    return {
        "jobs": store.list_jobs(limit=100),
        "job": {j: store.get_job(j) for j in JOBS},
        "tasks": {j: store.tasks_of_job(j) for j in JOBS},
        "hosts": store.hosts(),
        "pools": store.pools(),
        "dead_letters": store.dead_letters(),
        "counts": store.table_counts(),
    }


def test_round_trip_of_a_whole_scenario(store: Store) -> None:
    store.insert(full_scenario().rows())
    states = {j["job_id"]: j["state"] for j in store.list_jobs()}
    assert states == {"job-ok": "SUCCEEDED", "job-bad": "FAILED", "job-wait": "PENDING",
                      "job-rej": "REJECTED", "job-svc": "RUNNING"}
    ok = store.get_job("job-ok")
    assert ok is not None
    assert (ok["name"], ok["owner"], ok["respool"], ok["instance_count"], ok["priority"]) == (
        "ok", "team-a", "/prod/batch", 2, 3)
    assert ok["task_counts"] == {"SUCCEEDED": 2}
    assert ok["submitted_at"] == 2_000 and ok["created_at"] == 2_001
    assert ok["config"]["default_task"]["command"] == "echo hello"
    rej = store.get_job("job-rej")
    assert rej is not None and rej["rejection_reasons"] == [
        "respool: resource pool /nope does not exist"]
    assert store.get_job("nope") is None


def test_tasks_show_latest_state_sandbox_and_history(store: Store) -> None:
    store.insert(full_scenario().rows())
    t0, t1 = store.tasks_of_job("job-bad")
    assert (t0["state"], t0["exit_code"], t0["host"]) == ("SUCCEEDED", 0, "h1")
    assert (t1["run"], t1["state"], t1["exit_code"], t1["failures"]) == (2, "FAILED", 1, 2)
    assert t1["sandbox"] == "/sandbox/job-bad-1-2"
    assert [h["state"] for h in t1["history"]] == [
        "PENDING", "READY", "PLACED", "LAUNCHING", "RUNNING", "FAILED",
        "PENDING", "READY", "PLACED", "LAUNCHING", "RUNNING", "FAILED"]
    assert [h["run"] for h in t1["history"]] == [1] * 6 + [2] * 6
    assert store.task("job-bad", 1) == t1
    assert store.task("job-bad", 7) is None
    assert t1["health"] is None  # a batch task has no health check
    (svc,) = store.tasks_of_job("job-svc")
    assert (svc["state"], svc["health"]) == ("RUNNING", "HEALTHY")
    assert store.run_host("job-bad", 1, 1) == "h1"
    assert store.run_host("job-wait", 0, 1) is None


def test_a_waiting_task_shows_why_it_waits(store: Store) -> None:
    store.insert(full_scenario().rows())
    (wait,) = store.tasks_of_job("job-wait")
    assert wait["state"] == "PENDING"
    assert wait["reason"] == "waiting for admission to pool /prod/batch: pool over entitlement"
    # the same note for an older run is not shown
    note = {"at": 9_000, "round": 9, "tasks": [
        {"job_id": "job-bad", "instance": 1, "run": 1, "reason": "no host"}]}
    store.insert(project("PlacementFailed", note, SourcePos("placement-made", 0, 99)))
    assert store.task("job-bad", 1)["reason"] == "failed"  # type: ignore[index]


def test_hosts_pools_and_dead_letters(store: Store) -> None:
    store.insert(full_scenario().rows())
    hosts = {h["host"]: h for h in store.hosts()}
    assert hosts["h1"]["state"] == "UP" and hosts["h1"]["free"]["cpu"] == 6.0
    assert hosts["h1"]["log_url"] == "http://h1.agents:7000"
    assert hosts["h2"]["state"] == "LOST" and hosts["h2"]["lost_reason"]
    assert store.host_log_url("h1") == "http://h1.agents:7000"
    assert store.host_log_url("nope") is None
    pools = store.pools()
    assert [p["pool"] for p in pools] == ["/", "/dev", "/prod", "/prod/batch"]
    assert pools[3]["parent"] == "/prod" and pools[3]["entitlement"]["cpu"] == 4.0
    (dl,) = store.dead_letters()
    assert dl["service"] == "jobmgr" and dl["offset"] == 41


def test_pools_show_only_the_newest_cycle(store: Store) -> None:
    def cycle(at: int, offset: int, names: list[str]) -> None:
        body = {"at": at, "cycle": at, "capacity": res(8), "pools": [
            {"pool": n, "parent": None, "reservation": res(), "limit": res(), "entitlement":
             res(at), "slack_entitlement": res(), "nonslack_entitlement": res(),
             "allocation": res(), "demand": res()} for n in names]}
        store.insert(project("EntitlementUpdated", body, SourcePos("entitlement-updated", 0,
                                                                   offset)))

    cycle(1, 0, ["/", "/old"])
    cycle(3, 2, ["/", "/new"])
    cycle(2, 1, ["/", "/old"])  # delivered late: older than what we have
    assert [(p["pool"], p["entitlement"]["cpu"]) for p in store.pools()] == [
        ("/", 3.0), ("/new", 3.0)]


def test_host_that_comes_back_with_a_new_incarnation(store: Store) -> None:
    def reg(at: int, inc: str, offset: int) -> None:
        store.insert(project("HostRegistered", {
            "host": "h9", "incarnation": inc, "at": at, "capacity": res(4), "labels": {},
            "log_url": "http://h9:1", "port_range_begin": 0, "port_range_end": 0,
            "simulated": True}, SourcePos("host-registered", 1, offset)))

    def lost(at: int, inc: str, offset: int) -> None:
        store.insert(project("HostLost", {"host": "h9", "incarnation": inc, "at": at,
                                          "reason": "gone", "runs": []},
                             SourcePos("offer-received", 3, offset)))

    reg(100, "a", 0)
    lost(200, "a", 0)
    assert store.hosts()[0]["state"] == "LOST"
    reg(300, "b", 1)
    assert store.hosts()[0]["state"] == "REGISTERED"
    lost(400, "a", 1)  # the old incarnation's loss, noticed late, does not count
    assert store.hosts()[0]["state"] == "REGISTERED"


def test_replaying_the_same_records_changes_nothing(store: Store) -> None:
    rows = full_scenario().rows()
    store.insert(rows)
    once = snapshot(store)
    store.insert(rows)
    store.insert(rows[: len(rows) // 2])
    assert snapshot(store) == once


def test_delivery_order_across_partitions_does_not_matter(tmp_path: Path) -> None:
    bus = full_scenario()
    with Store(f"chdb://{tmp_path / 'a'}") as in_order:
        in_order.insert(bus.rows())
        expected = snapshot(in_order)
    per_record = [project(r.etype, r.body, r.source) for r in bus.records]
    random.Random(7).shuffle(per_record)
    with Store(f"chdb://{tmp_path / 'b'}") as shuffled:
        for i in range(0, len(per_record), 20):  # several inserts in a random order
            shuffled.insert([row for rows in per_record[i:i + 20] for row in rows])
        assert snapshot(shuffled) == expected


def test_schema_matches_the_projector_columns(store: Store) -> None:
    for table, columns in COLUMNS.items():
        rows = store._query(
            "SELECT name FROM system.columns WHERE database = {db:String} "
            "AND table = {t:String} AND default_kind != 'MATERIALIZED' ORDER BY position",
            db=store.db, t=table)
        assert [r["name"] for r in rows] == list(columns), table


def test_reopening_keeps_data_and_epoch(tmp_path: Path) -> None:
    path = f"chdb://{tmp_path / 'db'}"
    bus = Bus()
    bus.add("HostRegistered", "h1", {
        "host": "h1", "incarnation": "i", "at": 1, "capacity": res(1), "labels": {},
        "log_url": "", "port_range_begin": 0, "port_range_end": 0, "simulated": False})
    with Store(path) as first:
        first.insert(bus.rows())
        epoch = first.epoch()
    with Store(path) as again:
        assert again.epoch() == epoch
        assert [h["host"] for h in again.hosts()] == ["h1"]
        assert again.ping()


def test_a_daemon_counts_one_instance_per_host_it_runs_on(store: Store) -> None:
    from peloton.jobmgr.domain.book import JobBook
    from peloton.model.jobfile import parse_job_file

    bus, book = Bus(), JobBook()
    for h in ("h1", "h2", "h3"):
        up = {"host": h, "at": 1_000, "state": "UP", "previous_state": "UP", "present": True,
              "labels": {}, "reason": "", "deadline_ms": None, "request": ""}
        bus.add("HostStateChanged", h, up)
        bus.add_events(book.handle("HostStateChanged", up, 1_000))
    job = parse_job_file("name: dns\ntype: DAEMON\ndefaultConfig:\n  resource: {cpuLimit: 0.1,"
                         " memLimitMb: 16}\n  command: {value: ./dns}\n", "dns", 2_000)
    bus.add("JobSubmitted", "dns", job)
    bus.add_events(book.handle("JobSubmitted", job, 2_000))
    store.insert(bus.rows())
    got = store.get_job("dns")
    assert got is not None and got["type"] == "DAEMON"
    assert got["instance_count"] == 3 == sum(got["task_counts"].values())
    assert [j["instance_count"] for j in store.list_jobs() if j["job_id"] == "dns"] == [3]
