"""Config versions (rolling updates) in the host manager: a placement launches the task
spec of its own config version (JobCreated is version 1, JobSpecChanged names the later
ones) and says the version to the agent (launch entry `config_version`, env
PELOTON_CONFIG_VERSION); a placement of a version whose JobSpecChanged was not read yet
waits like one of an unknown job; snapshots keep versions."""

from __future__ import annotations

import json
from typing import Any

from event_bodies import job_created, placement
from hostmgr_helpers import HOLD, book_with, launched, of, place, rejections, tick

from peloton.hostmgr.domain import snapshot
from peloton.hostmgr.domain.hosts import HostBook
from peloton.model.event import Event

Body = dict[str, Any]


def job_spec_changed(job_id: str, n: int, version: int, *, at: int = 0,
                     **kw: Any) -> Body:
    return {**job_created(job_id, n, at=at, ports=("http",), grace_s=7, **kw),
            "version": version, "update_id": f"update-{version}"}


def versioned(job_id: str, instance: int, host: str, version: int, **kw: Any) -> Body:
    p = placement(job_id, instance, host, **kw)
    p["config_version"] = version
    return p


def launches(events: list[Event]) -> dict[int, tuple[str, str, int]]:
    """instance -> (command, env PELOTON_CONFIG_VERSION, config_version) of each launch."""
    return {x["instance"]: (x["command"], x["env"]["PELOTON_CONFIG_VERSION"],
                            x["config_version"])
            for e in of(events, "TaskLaunchRequested") for x in e.body["launches"]}


def test_a_v2_placement_launches_v2s_command_while_a_v1_one_keeps_v1s() -> None:
    book = book_with("h1")
    book.fold("JobSpecChanged", job_spec_changed("j1", 4, 2, command="serve --v2", at=1))
    out = place(book, versioned("j1", 0, "h1", 1), versioned("j1", 1, "h1", 2))
    assert launches(out) == {0: ("echo hi", "1", 1), 1: ("serve --v2", "2", 2)}


def test_a_launch_uses_its_versions_task_spec_for_everything() -> None:
    book = book_with("h1")
    body = job_spec_changed("j1", 4, 2, command="serve", at=1)
    body["default_task"]["env"] = {"MODE": "new"}
    body["default_task"]["kill_grace_period_s"] = 30.0
    book.fold("JobSpecChanged", body)
    (launch,) = [x for e in of(place(book, versioned("j1", 2, "h1", 2, ports={"http": 31001})),
                               "TaskLaunchRequested") for x in e.body["launches"]]
    assert launch["env"]["MODE"] == "new" and launch["kill_grace_period_s"] == 30.0
    assert launch["env"]["PORT_HTTP"] == "31001" and launch["config_version"] == 2


def test_an_unknown_version_waits_and_launches_once_its_spec_is_read() -> None:
    book = book_with("h1")
    out = place(book, versioned("j1", 0, "h1", 3), now=100)
    assert launched(out) == [] and rejections(out) == []
    assert ("j1", 0, 1) in book.pending
    book.fold("JobSpecChanged", job_spec_changed("j1", 4, 3, command="v3", at=150))
    assert launches(tick(book, 200)) == {0: ("v3", "3", 3)}
    assert book.pending == {}


def test_an_unknown_version_is_rejected_after_the_hold() -> None:
    book = book_with("h1")
    place(book, versioned("j1", 0, "h1", 2), now=100)
    out = tick(book, 100 + HOLD + 1)
    assert rejections(out) == [
        ("j1", 0, "unknown config version 2 of job j1 (no JobSpecChanged read)")]


def test_spec_changes_of_unknown_jobs_do_not_crash_and_are_pruned() -> None:
    book = HostBook(retention_ms=1000)
    book.fold("JobSpecChanged", job_spec_changed("ghost", 2, 2, at=5))
    book.fold("JobSpecChanged", job_spec_changed("ghost", 2, 1, at=6))  # not a later one
    assert set(book.jobs["ghost"].versions) == {2} and book.jobs["ghost"].spec is None
    book.tick(5000)
    assert "ghost" not in book.jobs


def test_versions_survive_a_snapshot_and_old_data_loads_as_v1() -> None:
    book = book_with("h1")
    book.fold("JobSpecChanged", job_spec_changed("j1", 4, 2, command="v2", at=1))
    book.fold("PlacementMade", {"at": 1, "round": 7, "placements": [
        versioned("j1", 0, "h1", 2), versioned("j1", 1, "h1", 3)]}, received_ms=1)
    state = json.loads(json.dumps(snapshot.dump(book)))
    restored = HostBook(hold_ms=HOLD)
    snapshot.load(restored, state)
    assert snapshot.dump(restored) == state
    for b in (book, restored):
        b.fold("JobSpecChanged", job_spec_changed("j1", 4, 3, command="v3", at=2))
    out = book.tick(10)
    assert [(e.type, e.body) for e in restored.tick(10)] == [(e.type, e.body) for e in out]
    assert launches(out) == {0: ("v2", "2", 2), 1: ("v3", "3", 3)}
    old = json.loads(json.dumps(state))  # written before versions
    for job in old["jobs"].values():
        del job["versions"]
    old["pending"] = [row[:9] for row in old["pending"]]
    snapshot.load(restored, old)
    assert {p.config_version for p in restored.pending.values()} == {1}
    assert all(not j.versions for j in restored.jobs.values())
