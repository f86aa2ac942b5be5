"""Config versions (rolling updates) in the resource manager: a run's resources and flags
come from its own version's task spec (JobCreated is version 1, JobSpecChanged names the
later ones), every TasksAdmitted entry carries the run's `config_version`, the totals
follow the version whatever the order facts are folded in, and snapshots keep versions.
"""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
from event_bodies import (
    admission_deferred,
    job_created,
    job_state_changed,
    offer,
    offer_received,
    task_state_changed,
)
from hypothesis import given, settings
from ledger_sums import from_scratch_sums

from peloton.bus.codec import default_codec
from peloton.model.event import Event
from peloton.model.resources import Resources
from peloton.resmgr.domain.cycle import ResourceManager
from peloton.resmgr.domain.ledger import Ledger

Body = dict[str, Any]


def job_spec_changed(job_id: str, n: int, version: int, *, at: int = 0,
                     **kw: Any) -> Body:
    """The JobSpecChanged of version `version` of a job (JobCreated's fields + two)."""
    return {**job_created(job_id, n, at=at, **kw), "version": version,
            "update_id": f"update-{version}"}


def changes(job_id: str, *items: tuple[int, str, int], run: int = 1,
            previous: str = "INITIALIZED", at: int = 0) -> Body:
    """A TaskStateChanged with one change per (instance, state, config_version)."""
    body = task_state_changed(job_id, *((i, s) for i, s, _ in items), run=run,
                              previous=previous, at=at)
    for ch, (_, _, version) in zip(body["changes"], items, strict=True):
        ch["config_version"] = version
    return body


def cluster() -> ResourceManager:
    rm = ResourceManager(entitlement_cycle_ms=10_000, min_recompute_ms=0)
    rm.fold("OfferReceived", offer_received(offer("h0", cpu=32), offer("h1", cpu=32)))
    return rm


def admitted(events: list[Event]) -> dict[tuple[int, int], int]:
    return {(t["instance"], t["run"]): t["config_version"] for e in events
            if e.type == "TasksAdmitted" for t in e.body["tasks"]}


def publish(rm: ResourceManager, events: list[Event]) -> None:
    """Fold the tick's facts back, through the codec (as the log would)."""
    codec = default_codec()
    for ev in events:
        rm.fold(*codec.decode(codec.encode(ev.type, ev.body)))


def cpu_of(rm: ResourceManager, instance: int) -> float:
    entry = rm.ledger.entry("db", instance)
    assert entry is not None
    return entry.resources.cpu


def test_a_run_of_version_2_is_admitted_with_its_resources_while_v1_runs_keep_theirs() -> None:
    rm = cluster()
    rm.fold("JobCreated", job_created("db", 3, cpu=1.0))
    rm.fold("JobSpecChanged", job_spec_changed("db", 3, 2, cpu=3.0, at=1))
    rm.fold("TaskStateChanged", changes("db", (0, "PENDING", 1), (1, "PENDING", 1), at=2))
    rm.fold("TaskStateChanged", changes("db", (2, "PENDING", 2), run=2, at=3))
    assert [cpu_of(rm, i) for i in range(3)] == [1.0, 1.0, 3.0]
    out = rm.tick(5)
    assert admitted(out) == {(0, 1): 1, (1, 1): 1, (2, 2): 2}
    publish(rm, out)
    usage, alloc = rm.usage()
    assert alloc["/default"].nonslack.cpu == 5.0  # 1 + 1 + 3


def test_the_version_runs_to_its_tasks_flags() -> None:
    rm = cluster()
    rm.fold("JobCreated", job_created("db", 2, cpu=1.0))
    revocable = job_spec_changed("db", 2, 2, cpu=1.0, at=1)
    revocable["default_task"]["revocable"] = True
    rm.fold("JobSpecChanged", revocable)
    rm.fold("TaskStateChanged", changes("db", (0, "PENDING", 1), (1, "PENDING", 2), at=2))
    entries = [rm.ledger.entry("db", i) for i in range(2)]
    assert [e.revocable for e in entries if e] == [False, True]


def test_a_run_naming_a_version_not_folded_yet_counts_with_the_newest_then_its_own() -> None:
    ledger = Ledger()
    ledger.fold("JobCreated", job_created("db", 2, cpu=1.0))
    ledger.fold("JobSpecChanged", job_spec_changed("db", 2, 2, cpu=2.0, at=1))
    ledger.fold("TaskStateChanged", changes("db", (0, "PENDING", 3), at=2))
    entry = ledger.entry("db", 0)
    assert entry is not None and entry.config_version == 3
    assert entry.resources.cpu == 2.0  # the newest version folded: 2
    ledger.fold("JobSpecChanged", job_spec_changed("db", 2, 3, cpu=5.0, at=3))
    assert entry.resources.cpu == 5.0
    assert ledger.sums == from_scratch_sums(ledger)
    ledger.fold("JobSpecChanged", job_spec_changed("db", 2, 3, cpu=9.0, at=4))  # again
    assert entry.resources.cpu == 5.0  # a repeated version changes nothing


def test_a_run_whose_version_no_fact_said_waits_for_its_pending_change() -> None:
    rm = cluster()
    rm.fold("JobCreated", job_created("db", 1, cpu=1.0))
    rm.fold("JobSpecChanged", job_spec_changed("db", 1, 2, cpu=2.0, at=1))
    rm.fold("AdmissionDeferred", admission_deferred("db", 0, "waiting", at=2))
    entry = rm.ledger.entry("db", 0)
    assert entry is not None and entry.config_version is None and entry.pending
    assert admitted(rm.tick(3)) == {}
    rm.fold("TaskStateChanged", changes("db", (0, "PENDING", 2), at=1))
    assert entry.config_version == 2 and entry.resources.cpu == 2.0
    assert admitted(rm.tick(4)) == {(0, 1): 2}


def test_an_admission_says_the_version_first_and_later_changes_do_not_move_it() -> None:
    ledger = Ledger()
    ledger.fold("JobCreated", job_created("db", 1, cpu=1.0))
    ledger.fold("JobSpecChanged", job_spec_changed("db", 1, 2, cpu=2.0, at=1))
    ledger.fold("TasksAdmitted", {"at": 5, "pool": "/default", "tasks": [
        {"job_id": "db", "instance": 0, "run": 1, "pinned_host": None,
         "config_version": 2}]})
    ledger.fold("TaskStateChanged", changes("db", (0, "PENDING", 2), at=4))
    entry = ledger.entry("db", 0)
    assert entry is not None and entry.config_version == 2 and entry.admitted
    assert entry.resources.cpu == 2.0


def test_spec_changes_of_unknown_and_forgotten_jobs() -> None:
    ledger = Ledger()
    # an unknown job's JobSpecChanged is held with its other facts until JobCreated
    ledger.fold("JobSpecChanged", job_spec_changed("db", 1, 2, cpu=2.0, at=1))
    ledger.fold("TaskStateChanged", changes("db", (0, "PENDING", 2), at=2))
    assert ledger.entry("db", 0) is None and ledger.size()["orphans"] == 2
    ledger.fold("JobCreated", job_created("db", 1, cpu=1.0))
    entry = ledger.entry("db", 0)
    assert entry is not None and entry.resources.cpu == 2.0
    # a finished job's late JobSpecChanged is ignored
    ledger.fold("JobStateChanged", job_state_changed("db", "SUCCEEDED", "RUNNING", {}, at=3))
    ledger.fold("JobSpecChanged", job_spec_changed("db", 1, 3, cpu=3.0, at=4))
    assert "db" not in ledger.jobs and ledger.size()["orphans"] == 0


def test_versions_and_run_versions_survive_a_snapshot_and_old_rows_restore_as_v1() -> None:
    rm = cluster()
    rm.fold("JobCreated", job_created("db", 2, cpu=1.0))
    rm.fold("JobSpecChanged", job_spec_changed("db", 2, 2, cpu=3.0, at=1))
    rm.fold("TaskStateChanged", changes("db", (0, "PENDING", 1), (1, "PENDING", 2), at=2))
    data = json.loads(json.dumps(rm.snapshot()))
    restored = ResourceManager(entitlement_cycle_ms=10_000, min_recompute_ms=0)
    restored.restore(data)
    assert restored.snapshot() == data
    assert [cpu_of(restored, i) for i in range(2)] == [1.0, 3.0]
    assert admitted(restored.tick(3)) == admitted(rm.tick(3)) == {(0, 1): 1, (1, 1): 2}
    old = json.loads(json.dumps(data["ledger"]))  # written before runs kept a version
    old["task_fields"] = 13
    old["tasks"] = [row[:13] for row in old["tasks"]]
    del old["job_versions"]
    ledger = Ledger.restore(old)
    assert [(e.config_version, e.resources.cpu) for e in ledger.tasks.values()] == [
        (1, 1.0), (1, 1.0)]


# ---- any order of folds gives the same runs and totals --------------------------------


def _facts() -> list[tuple[str, Body]]:
    """A job updated twice; runs of every version, admitted, deferred, running."""
    return [
        ("JobCreated", job_created("db", 4, cpu=1.0)),
        ("JobSpecChanged", job_spec_changed("db", 4, 2, cpu=2.0, at=1)),
        ("JobSpecChanged", job_spec_changed("db", 4, 3, cpu=4.0, at=2)),
        ("TaskStateChanged", changes("db", (0, "PENDING", 1), (1, "PENDING", 1), at=3)),
        ("TaskStateChanged", changes("db", (2, "PENDING", 2), run=2, at=4)),
        ("TaskStateChanged", changes("db", (3, "PENDING", 3), run=3, at=5)),
        ("TasksAdmitted", {"at": 6, "pool": "/default", "tasks": [
            {"job_id": "db", "instance": 1, "run": 1, "pinned_host": None,
             "config_version": 1},
            {"job_id": "db", "instance": 2, "run": 2, "pinned_host": None,
             "config_version": 2}]}),
        ("AdmissionDeferred", admission_deferred("db", 3, "no room", run=3, at=7)),
        ("TaskStateChanged", changes("db", (2, "READY", 2), run=2, previous="PENDING", at=8)),
    ]


def _state(ledger: Ledger) -> Any:
    return ({k: (e.run, e.state.value, e.config_version, e.resources, e.revocable,
                 e.holding, e.pending) for k, e in sorted(ledger.tasks.items())},
            [dict(s) for s in ledger.sums])


@settings(max_examples=60, deadline=None)
@given(st.permutations(range(len(_facts()))))
def test_any_order_of_folds_gives_the_same_runs_and_totals(order: list[int]) -> None:
    """Job events of one job are one partition, so TaskStateChanged keep their order;
    anything else (even JobCreated and JobSpecChanged, which only out-of-order data moves)
    may come at any point."""
    facts = _facts()
    changes_in_order = iter(i for i, (t, _) in enumerate(facts) if t == "TaskStateChanged")
    order = [next(changes_in_order) if facts[i][0] == "TaskStateChanged" else i
             for i in order]
    expected = Ledger()
    for etype, body in facts:
        expected.fold(etype, body)
    ledger = Ledger()
    for i in order:
        ledger.fold(*facts[i])
    assert _state(ledger) == _state(expected)
    assert ledger.sums == from_scratch_sums(ledger)
    cpus = {k[1]: e.resources for k, e in expected.tasks.items()}
    assert cpus == {0: Resources(1.0, 64.0), 1: Resources(1.0, 64.0),
                    2: Resources(2.0, 64.0), 3: Resources(4.0, 64.0)}
