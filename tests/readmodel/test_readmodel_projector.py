"""The projector: pure event -> rows mapping, source positions, versions."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from readmodel_scenario import Bus, full_scenario, submit

import peloton.readmodel.projector as projector_module
from peloton.bus.catalog import TOPICS
from peloton.jobmgr.domain.book import JobBook
from peloton.readmodel.projector import COLUMNS, SourcePos, project, version

# events whose effect the read model shows through the job manager's TaskStateChanged
NOT_SHOWN = {"PlacementMade", "PlacementRejected", "TaskLaunchRequested", "TaskKillRequested",
             "HostMaintenanceRequested",  # its outcome: HostStateChanged or ...Rejected
             "UpdateCommandRequested",  # its outcome: UpdateStateChanged or JobUpdateRejected
             "JobStartRequested",  # its outcome: new runs (TaskStateChanged), JobStateChanged
             "TaskReconcileRequested"}  # its outcome: the agent's answer, a status
SRC = SourcePos("job-events", 2, 40)


def change(instance: int, run: int, state: str, prev: str, **extra: object) -> dict[str, object]:
    return {"instance": instance, "run": run, "state": state, "previous_state": prev,
            "reason": extra.get("reason", ""), "host": extra.get("host"),
            "exit_code": extra.get("exit_code"), "failures": extra.get("failures", 0)}


def test_every_catalog_event_is_projected_or_deliberately_not_shown() -> None:
    bus = full_scenario()
    seen = {r.etype: project(r.etype, r.body, r.source) for r in bus.records}
    for etype in {e for t in TOPICS for e in t.events}:
        if etype in NOT_SHOWN:
            assert seen.get(etype, []) == [], etype
        elif etype not in ("TaskKillRequested", "JobKillRequested"):
            assert seen.get(etype), f"{etype} yields no rows"


def test_rows_are_complete_and_carry_their_source_position() -> None:
    bus = full_scenario()
    for rec in bus.records:
        for row in project(rec.etype, rec.body, rec.source):
            assert set(row.values) == set(COLUMNS[row.table])
            assert (row.values["src_topic"], row.values["src_partition"],
                    row.values["src_offset"]) == (rec.source.topic, rec.source.partition,
                                                  rec.source.offset)


def test_same_record_same_rows() -> None:
    bus = full_scenario()
    assert bus.rows() == bus.rows()


def test_task_state_changed_gives_a_latest_row_and_a_history_row_per_change() -> None:
    body = {"job_id": "j", "at": 5, "changes": [
        change(1, 1, "FAILED", "RUNNING", host="h1", exit_code=2, failures=1),
        change(1, 2, "PENDING", "INITIALIZED", reason="retry", failures=1)]}
    rows = project("TaskStateChanged", body, SRC)
    latest = [r.values for r in rows if r.table == "tasks"]
    history = [r.values for r in rows if r.table == "task_events"]
    assert [(h["run"], h["state"], h["src_index"]) for h in history] == [
        (1, "FAILED", 0), (2, "PENDING", 1)]
    assert latest[0]["exit_code"] == 2 and latest[0]["host"] == "h1"
    assert latest[1]["version"] > latest[0]["version"]  # the new run wins
    assert all(v["facet"] == "state" for v in latest)


def test_a_record_joining_several_jobs_gives_each_jobs_rows_indexed_across_them() -> None:
    """A joined TaskStateChanged (bus.coalesce) projects as its jobs' records would, one
    source position for all, the index running across the jobs (so a replay is exact)."""
    a = {"job_id": "a", "at": 5, "changes": [change(0, 1, "RUNNING", "LAUNCHED", host="h1"),
                                              change(1, 1, "RUNNING", "LAUNCHED", host="h2")]}
    b = {"job_id": "b", "at": 6, "changes": [change(0, 2, "PENDING", "INITIALIZED")]}
    rows = project("TaskStateChanged", {**a, "more": [b]}, SRC)
    history = [r.values for r in rows if r.table == "task_events"]
    assert [(h["job_id"], h["instance"], h["at"], h["state"], h["src_index"])
            for h in history] == [("a", 0, 5, "RUNNING", 0), ("a", 1, 5, "RUNNING", 1),
                                  ("b", 0, 6, "PENDING", 2)]
    apart = project("TaskStateChanged", a, SRC) + project("TaskStateChanged", b, SRC)
    def key(r: Any) -> Any:
        return (r.table, r.values["job_id"], r.values["instance"], r.values["state"])
    assert sorted(map(key, rows)) == sorted(map(key, apart))
    assert project("TaskStateChanged", {**a, "more": []}, SRC) == \
        project("TaskStateChanged", a, SRC)


def test_task_versions_follow_run_then_offset_then_index() -> None:
    def v(run: int, offset: int, index: int) -> int:
        body = {"job_id": "j", "at": 1, "changes": [change(0, run, "READY", "PENDING")] * 3}
        rows = project("TaskStateChanged", body, SourcePos("t", 0, offset))
        return int([r for r in rows if r.table == "tasks"][index].values["version"])

    assert v(1, 10, 2) < v(1, 11, 0) < v(2, 0, 0)


def test_jobmgr_facts_outrank_the_submission_whatever_the_offsets() -> None:
    bus = Bus()
    submit(bus, JobBook(), "j1", 1)
    subm = next(r for r in bus.records if r.etype == "JobSubmitted")
    created = next(r for r in bus.records if r.etype == "JobCreated")
    late = SourcePos(subm.source.topic, subm.source.partition, 10**9)  # a huge offset
    sub_state = [r for r in project("JobSubmitted", subm.body, late)
                 if r.table == "jobs" and r.values["facet"] == "state"][0]
    created_state = [r for r in project("JobCreated", created.body, created.source)
                     if r.table == "jobs" and r.values["facet"] == "state"][0]
    assert sub_state.values["state"] == "SUBMITTED"
    assert created_state.values["state"] == "PENDING"
    assert created_state.values["version"] > sub_state.values["version"]


def test_pending_reasons_are_per_run_and_ordered_by_time() -> None:
    body = {"at": 900, "round": 3, "tasks": [
        {"job_id": "j", "instance": 4, "run": 2, "reason": "no host with a gpu"}]}
    row, wait = project("PlacementFailed", body, SourcePos("placement-made", 1, 7))
    assert row.table == "tasks" and row.values["facet"] == "reason"
    assert row.values["run"] == 2 and row.values["reason"].endswith("no host with a gpu")
    later, _ = project("PlacementFailed", {**body, "at": 901}, SourcePos("placement-made", 0, 1))
    assert later.values["version"] > row.values["version"]
    # and the note's history, for the pending-reasons dashboard (pool: the job's respool)
    assert wait.table == "task_waits"
    assert {k: wait.values[k] for k in ("job_id", "instance", "run", "at", "pool", "stage",
                                        "reason")} == {
        "job_id": "j", "instance": 4, "run": 2, "at": 900, "pool": "", "stage": "placement",
        "reason": "no host with a gpu"}


def test_entitlement_cycle_gives_latest_pools_and_history() -> None:
    bus = full_scenario()
    rec = next(r for r in bus.records if r.etype == "EntitlementUpdated")
    rows = project(rec.etype, rec.body, rec.source)
    assert sorted(r.table for r in rows) == ["entitlement_history"] * 4 + ["pools"] * 4
    assert {r.values["pool"] for r in rows} == {"/", "/prod", "/prod/batch", "/dev"}


def test_dead_letter_keeps_reason_and_payload() -> None:
    bus = full_scenario()
    rec = next(r for r in bus.records if r.etype == "DeadLetterRecorded")
    (row,) = project(rec.etype, rec.body, rec.source)
    assert row.values["key"] == "junk" and row.values["value_size"] == 7
    assert row.values["source_topic"] == "job-submitted" and row.values["offset"] == 41


def test_unknown_and_unshown_events_yield_nothing() -> None:
    assert project("SomethingNew", {"x": 1}, SRC) == []
    assert project("PlacementMade", {"at": 1, "round": 1, "placements": []}, SRC) == []


def test_version_packs_lanes_most_significant_first() -> None:
    assert version(1) == 1 << 192
    assert version(0, 2**64 - 1) < version(1, 0)
    assert version(3, 2, 1, 0) == (3 << 192) | (2 << 128) | (1 << 64)
    with pytest.raises(ValueError):
        version(-1)
    with pytest.raises(ValueError):
        version(1, 2, 3, 4, 5)


def test_projector_is_pure() -> None:
    tree = ast.parse(Path(projector_module.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}
    forbidden = {"clickhouse_connect", "faust", "aiokafka", "httpx", "asyncio", "time",
                 "random", "uuid", "datetime", "os"}
    assert not imported & forbidden


def test_kill_request_is_a_job_facet() -> None:
    body = {"job_id": "j", "at": 77, "instances": [0, 2], "reason": "user"}
    (row,) = project("JobKillRequested", body, SourcePos("job-kill-requested", 0, 3))
    assert row.values["facet"] == "kill" and row.values["kill_instances"] == [0, 2]
    assert row.values["reasons"] == ["user"]
