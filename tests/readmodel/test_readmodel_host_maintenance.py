"""Host maintenance in the read model (chdb): HostStateChanged -> a host's maintenance state,
deadline and reason; every state change and refused request in its history; the runs
still on each host."""

from __future__ import annotations

from event_bodies import host_maintenance_rejected, host_state_changed, task_state_changed
from readmodel_scenario import Bus, cluster

from peloton.jobmgr.domain.book import JobBook
from peloton.readmodel.projector import SourcePos, project
from peloton.readmodel.store import Store


def _scenario() -> Bus:
    bus = Bus()
    cluster(bus, JobBook())
    return bus


def test_projection_rows_of_host_events() -> None:
    body = host_state_changed("h1", "DRAINING", "UP", deadline_ms=9_000, reason="start",
                              labels={"zone": "a"}, at=5)
    rows = project("HostStateChanged", body, SourcePos("host-events", 1, 7))
    assert [r.table for r in rows] == ["host_states", "host_events"]
    assert rows[0].values["state"] == "DRAINING" and rows[0].values["deadline"] == 9_000
    assert rows[1].values["kind"] == "STATE_CHANGED"
    rej = project("HostMaintenanceRejected", host_maintenance_rejected("h1"),
                  SourcePos("host-events", 1, 8))
    assert [(r.table, r.values["kind"], r.values["command"]) for r in rej] == [
        ("host_events", "REJECTED", "complete_maintenance")]


def test_hosts_show_maintenance_state_deadline_reason_and_runs(store: Store) -> None:
    bus = _scenario()
    store.insert(bus.rows())
    before = {h["host"]: h for h in store.hosts()}
    assert before["h1"]["maintenance_state"] == "UP"  # registered, UP
    assert before["h1"]["runs"] == [] and before["h1"]["task_count"] == 0
    bus.add("HostStateChanged", "h1", host_state_changed("h1", "UP", "UP", at=1_000))
    bus.add("HostMaintenanceRejected", "h1", host_maintenance_rejected("h1", at=1_500))
    bus.add("HostStateChanged", "h1", host_state_changed(
        "h1", "DRAINING", "UP", deadline_ms=600_000, reason="start_maintenance requested",
        at=2_000))
    bus.add("TaskStateChanged", "j1", task_state_changed(
        "j1", (0, "RUNNING"), (1, "RUNNING"), (2, "SUCCEEDED"), host="h1",
        previous="LAUNCHED", at=2_100))
    bus.add("TaskStateChanged", "j2", task_state_changed("j2", (0, "PENDING"), at=2_100))
    store.insert(bus.rows())
    store.insert(bus.rows())  # a replay changes nothing
    h1 = store.hosts("h1")[0]
    assert (h1["maintenance_state"], h1["maintenance_deadline"], h1["maintenance_reason"]) == (
        "DRAINING", 600_000, "start_maintenance requested")
    assert h1["state"] == "UP"  # the agent's liveness stays as it was
    assert [(r["job_id"], r["instance"], r["state"]) for r in h1["runs"]] == [
        ("j1", 0, "RUNNING"), ("j1", 1, "RUNNING")]
    assert h1["task_count"] == 2
    assert store.hosts("h2")[0]["maintenance_state"] == "UP"
    events = store.host_events("h1")
    assert [(e["kind"], e["state"]) for e in events] == [
        ("STATE_CHANGED", "DRAINING"), ("REJECTED", ""), ("STATE_CHANGED", "UP"),
        ("STATE_CHANGED", "UP")]  # the last: the scenario's registration
    assert events[1]["reason"] == "the host is UP: it is not in maintenance"


def test_a_newer_state_wins_whatever_the_insert_order(store: Store) -> None:
    bus = _scenario()
    for state, prev, at in (("DRAINING", "UP", 2_000), ("DRAINED", "DRAINING", 2_100),
                            ("DOWN", "DRAINED", 2_200)):
        bus.add("HostStateChanged", "h1", host_state_changed("h1", state, prev, at=at,
                                                             deadline_ms=5_000))
    rows = bus.rows()
    store.insert(reversed(rows))
    h1 = store.hosts("h1")[0]
    assert (h1["maintenance_state"], h1["maintenance_deadline"]) == ("DOWN", 5_000)
