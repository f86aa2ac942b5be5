"""Rolling updates in the read model (chdb): the `updates` table (REQUESTED, the job
manager's states, REJECTED, refused commands), a JobSpecChanged replacing the job's spec,
and each run's config_version on tasks and their history."""

from __future__ import annotations

from typing import Any

from readmodel_scenario import (
    SERVICE_YAML,
    Bus,
    _feed,
    cluster,
    full_scenario,
    res,
    update_request,
)

from peloton.jobmgr.domain.book import JobBook
from peloton.model.jobfile import parse_job_file
from peloton.model.taskstate import TaskState
from peloton.readmodel.projector import SourcePos, project
from peloton.readmodel.store import Store

PLAIN = SERVICE_YAML.replace("  healthCheck: {type: COMMAND, commandCheck: {command: \"true\"}}\n",
                             "").replace("instanceCount: 1", "instanceCount: 2")


def _running_service(bus: Bus, book: JobBook, t: int = 20_000) -> None:
    """job-roll: a SERVICE job (no health check) with 2 instances running on h1."""
    sub = parse_job_file(PLAIN.replace("name: web", "name: roll"), "job-roll", t)
    _feed(bus, book, "JobSubmitted", "job-roll", sub, t + 1)
    _play(bus, book, "job-roll", t + 10)


def _play(bus: Bus, book: JobBook, job_id: str, t: int) -> None:
    """Play the cluster once: replaced runs end KILLED, pending runs start RUNNING."""
    for task in list(book.jobs[job_id].tasks):
        ref = {"job_id": job_id, "instance": task.instance, "run": task.run}
        if task.state in (TaskState.PREEMPTING, TaskState.KILLING):
            _status(bus, book, ref, "KILLED", t)
        elif task.state == TaskState.PENDING and not task.kill_requested:
            _feed(bus, book, "TasksAdmitted", "/prod/batch",
                  {"at": t, "pool": "/prod/batch", "tasks": [ref]}, t)
            _feed(bus, book, "PlacementMade", "round", {"at": t + 1, "round": 1, "placements": [
                {**ref, "host": "h1", "incarnation": "h1-inc1", "resources": res(1, 128),
                 "ports": {}}]}, t + 1)
            _status(bus, book, ref, "RUNNING", t + 2)


def _status(bus: Bus, book: JobBook, ref: dict[str, Any], state: str, at: int) -> None:
    _feed(bus, book, "TaskStatusReported", "h1", {
        "host": "h1", "incarnation": "h1-inc1", "at": at, "statuses": [
            {**ref, "state": state, "exit_code": None, "message": state.lower(),
             "sandbox": "/sandbox/x", "health": ""}]}, at)


def rolled(batch_size: int = 1) -> Bus:
    """job-roll updated to version 2 (`./serve2`), one instance at a time, to the end."""
    bus, book = Bus(), JobBook()
    cluster(bus, book)
    _running_service(bus, book)
    req = update_request("job-roll", "u-roll", 30_000,
                         PLAIN.replace("name: web", "name: roll").replace("./serve", "./serve2"),
                         batch_size=batch_size)
    _feed(bus, book, "JobUpdateRequested", "job-roll", req, 30_001)
    t = 31_000
    while book.updates["job-roll"].live and t < 60_000:
        _play(bus, book, "job-roll", t)
        bus.add_events(book.tick(t + 500))
        t += 1_000
    return bus


def test_update_events_give_update_rows_and_a_new_spec() -> None:
    bus = full_scenario()
    got = {(r.etype, row.table, row.values["facet"])
           for r in bus.records for row in project(r.etype, r.body, r.source)
           if r.etype in ("JobUpdateRequested", "UpdateStateChanged", "JobUpdateRejected",
                          "JobSpecChanged")}
    assert got == {("JobUpdateRequested", "updates", "request"),
                   ("JobUpdateRequested", "updates", "first"),
                   ("UpdateStateChanged", "updates", "state"),
                   ("UpdateStateChanged", "updates", "first"),
                   ("JobUpdateRejected", "updates", "state"),
                   ("JobUpdateRejected", "updates", "first"),
                   ("JobUpdateRejected", "updates", "command"),
                   ("JobSpecChanged", "jobs", "spec")}
    command = {"job_id": "j", "update_id": "", "at": 5, "request_at": 4, "command": "pause",
               "reasons": ["update_id: job j has no update any update"]}
    assert project("JobUpdateRejected", command, SourcePos("job-events", 0, 1)) == []


def test_the_store_shows_updates_newest_first_with_refusals(store: Store) -> None:
    store.insert(full_scenario().rows())
    u1, bad = store.updates_of_job("job-svc")
    assert (u1["update_id"], u1["state"], u1["previous_state"]) == ("u-1", "ABORTED", "PAUSED")
    assert (u1["from_version"], u1["to_version"], u1["instances"]) == (1, 2, 1)
    assert u1["reason"] == "abort requested by ops"
    assert u1["settings"]["batch_size"] == 1 and u1["settings"]["start_paused"] is True
    assert (u1["requested_by"], u1["requested_at"], u1["created_at"]) == ("ops", 9_510, 9_510)
    assert u1["last_command_rejection"] == {
        "command": "resume", "at": 9_522, "reason": "command: the update is ABORTED, which "
        "is final: it accepts no resume; start a new update instead"}
    assert (bad["update_id"], bad["state"]) == ("u-bad", "REJECTED")
    assert bad["reason"] == "config.respool: an update cannot change it (/prod/batch -> /dev)"
    assert store.update("u-bad") == bad
    assert store.update("nope") is None and store.updates_of_job("job-ok") == []
    job = store.get_job("job-svc")
    assert job is not None
    assert job["config"]["version"] == 2
    assert job["config"]["default_task"]["command"] == "./serve2"
    (task,) = store.tasks_of_job("job-svc")
    assert task["config_version"] == 1  # aborted before it touched the instance


def test_a_request_shows_as_requested_until_answered(store: Store) -> None:
    body = update_request("job-x", "u-x", 5_000, batch_size=2)
    store.insert(project("JobUpdateRequested", body, SourcePos("job-update-requested", 0, 3)))
    u = store.update("u-x")
    assert u is not None
    assert (u["state"], u["instances"], u["settings"]["batch_size"]) == ("REQUESTED", 1, 2)
    assert u["from_version"] is None and u["updated_at"] == 5_000
    rejected = {"job_id": "job-x", "update_id": "u-x", "at": 5_100, "request_at": 5_000,
                "command": "update", "reasons": ["job_id: no running job job-x", "a: b"]}
    store.insert(project("JobUpdateRejected", rejected, SourcePos("job-events", 0, 9)))
    u = store.update("u-x")
    assert u is not None
    assert (u["state"], u["reason"], u["created_at"]) == (
        "REJECTED", "job_id: no running job job-x; a: b", 5_000)
    assert u["requested_by"] == "ops"


def test_a_rolling_update_to_its_end(store: Store) -> None:
    bus = rolled()
    rows = bus.rows()
    store.insert(reversed(rows))  # the order of inserts does not matter
    store.insert(rows)  # nor does a replay
    (u,) = store.updates_of_job("job-roll")
    assert (u["state"], u["done"], u["failed"], u["in_flight"]) == ("SUCCEEDED", [0, 1], [], [])
    assert u["reason"].startswith("SUCCEEDED")
    states = [r.body["state"] for r in bus.records if r.etype == "UpdateStateChanged"]
    assert states[:2] == ["INITIALIZED", "ROLLING_FORWARD"] and states[-1] == "SUCCEEDED"
    tasks = store.tasks_of_job("job-roll")
    assert [(t["state"], t["run"], t["config_version"]) for t in tasks] == [
        ("RUNNING", 2, 2), ("RUNNING", 2, 2)]
    first_runs = [h["config_version"] for h in tasks[0]["history"] if h["run"] == 1]
    assert set(first_runs) == {1}
    assert {h["config_version"] for h in tasks[0]["history"] if h["run"] == 2} == {2}
    job = store.get_job("job-roll")
    assert job is not None and job["config"]["version"] == 2
    assert job["config"]["default_task"]["command"] == "./serve2"


def test_a_newer_spec_wins_whatever_the_offsets(store: Store) -> None:
    bus = rolled(batch_size=2)
    created = next(r for r in bus.records if r.etype == "JobCreated")
    changed = next(r for r in bus.records if r.etype == "JobSpecChanged")
    late = SourcePos(created.source.topic, created.source.partition, 10**9)
    store.insert(project("JobSpecChanged", changed.body, changed.source))
    store.insert(project("JobCreated", created.body, late))  # a huge offset: still older
    store.insert(project("JobSpecChanged", {**changed.body, "version": 1, "instance_count": 7},
                         SourcePos(changed.source.topic, 0, 10**9)))
    job = store.get_job("job-roll")
    assert job is not None
    assert (job["config"]["version"], job["instance_count"]) == (2, 2)
    store.insert(project("JobSpecChanged", {**changed.body, "version": 3, "instance_count": 4},
                         SourcePos(changed.source.topic, 0, 1)))
    job = store.get_job("job-roll")
    assert job is not None and (job["config"]["version"], job["instance_count"]) == (3, 4)


def test_an_older_store_gains_config_version(tmp_path: Any) -> None:
    dsn = f"chdb://{tmp_path / 'old'}"
    with Store(dsn) as old:
        for table in ("tasks", "task_events"):
            old._client.command(f"ALTER TABLE peloton.{table} DROP COLUMN config_version")
    with Store(dsn) as store:
        store.insert(rolled().rows())
        tasks = store.tasks_of_job("job-roll")
        assert [t["config_version"] for t in tasks] == [2, 2]
