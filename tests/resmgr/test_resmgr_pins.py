"""Pinned runs: the pin of a run's PENDING change (TaskStateChanged v3 `pinned_host`) is
carried into every TasksAdmitted of that run, survives a snapshot, and a newer run
without a pin is unpinned. Nothing else about admission changes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from event_bodies import job_created, offer, offer_received, task_state_changed

from peloton.bus.codec import default_codec
from peloton.model.event import Event
from peloton.resmgr.domain.cycle import ResourceManager
from peloton.resmgr.domain.ledger import Ledger

Body = dict[str, Any]


def cluster() -> ResourceManager:
    rm = ResourceManager(entitlement_cycle_ms=10_000, min_recompute_ms=0)
    rm.fold("OfferReceived", offer_received(offer("h0", cpu=8), offer("h1", cpu=8)))
    return rm


def changes(job_id: str, *items: tuple[int, str, str | None], run: int = 1,
            previous: str = "INITIALIZED", at: int = 0) -> Body:
    """A TaskStateChanged with one change per (instance, state, pinned_host)."""
    body = task_state_changed(job_id, *((i, s) for i, s, _ in items), run=run,
                              previous=previous, at=at)
    for ch, (_, _, pin) in zip(body["changes"], items, strict=True):
        ch["pinned_host"] = pin
    return body


def admitted(events: list[Event]) -> dict[tuple[int, int], str | None]:
    return {(t["instance"], t["run"]): t["pinned_host"] for e in events
            if e.type == "TasksAdmitted" for t in e.body["tasks"]}


def publish(rm: ResourceManager, events: list[Event]) -> None:
    """Fold the tick's facts back, through the codec (as the log would)."""
    codec = default_codec()
    for ev in events:
        rm.fold(*codec.decode(codec.encode(ev.type, ev.body)))


def test_the_pending_changes_pin_is_in_the_runs_tasks_admitted() -> None:
    rm = cluster()
    rm.fold("JobCreated", job_created("db", 3))
    rm.fold("TaskStateChanged", changes("db", (0, "PENDING", "h1"), (1, "PENDING", None),
                                        (2, "PENDING", "h0")))
    out = rm.tick(1)
    assert admitted(out) == {(0, 1): "h1", (1, 1): None, (2, 1): "h0"}
    publish(rm, out)
    assert rm.ledger.entry("db", 0).pinned_host == "h1"  # type: ignore[union-attr]


def test_a_requeued_run_keeps_its_pin_and_a_newer_run_has_its_own() -> None:
    rm = cluster()
    rm.fold("JobCreated", job_created("db", 1))
    rm.fold("TaskStateChanged", changes("db", (0, "PENDING", "h1"), at=1))
    publish(rm, out := rm.tick(1))
    assert admitted(out) == {(0, 1): "h1"}
    rm.fold("TaskStateChanged", changes("db", (0, "READY", None), previous="PENDING", at=2))
    # a placement timeout gives the allocation back; the change carries no pin this time
    rm.fold("TaskStateChanged", changes("db", (0, "PENDING", None), previous="READY", at=3))
    publish(rm, out := rm.tick(4))
    assert admitted(out) == {(0, 1): "h1"}
    rm.fold("TaskStateChanged", changes("db", (0, "FAILED", None), previous="RUNNING", at=5))
    rm.fold("TaskStateChanged", changes("db", (0, "PENDING", None), run=2, at=6))
    assert admitted(rm.tick(7)) == {(0, 2): None}  # a newer run without a pin: unpinned


def test_an_admission_folded_before_its_pending_change_brings_the_pin() -> None:
    ledger = Ledger()
    ledger.fold("JobCreated", job_created("db", 1))
    ledger.fold("TasksAdmitted", {"at": 5, "pool": "/default", "tasks": [
        {"job_id": "db", "instance": 0, "run": 1, "pinned_host": "h1"}]})
    ledger.fold("TaskStateChanged", changes("db", (0, "PENDING", "h1"), at=4))
    entry = ledger.entry("db", 0)
    assert entry is not None and entry.pinned_host == "h1" and entry.admitted


def test_the_pin_changes_nothing_else_about_admission() -> None:
    def decisions(pins: bool) -> list[tuple[str, Body]]:
        rm = cluster()
        rm.fold("JobCreated", job_created("db", 20, cpu=1.0))
        rm.fold("TaskStateChanged", changes(
            "db", *((i, "PENDING", f"h{i % 2}" if pins else None) for i in range(20))))
        out = rm.tick(1)
        for ev in out:
            for t in ev.body.get("tasks", []):
                t.pop("pinned_host", None)
        return [(e.type, e.body) for e in out]

    assert decisions(True) == decisions(False)
    assert len([t for _, b in decisions(True) for t in b.get("tasks", [])]) == 20


def test_pins_survive_a_snapshot_and_an_older_ledger_snapshot_restores_unpinned() -> None:
    rm = cluster()
    rm.fold("JobCreated", job_created("db", 2))
    rm.fold("TaskStateChanged", changes("db", (0, "PENDING", "h1"), (1, "PENDING", None)))
    data = json.loads(json.dumps(rm.snapshot()))
    restored = ResourceManager(entitlement_cycle_ms=10_000, min_recompute_ms=0)
    restored.restore(data)
    assert restored.snapshot() == data
    assert admitted(restored.tick(1)) == admitted(rm.tick(1)) == {(0, 1): "h1", (1, 1): None}
    old = json.loads(json.dumps(data["ledger"]))
    del old["task_fields"]
    old["tasks"] = [row[:12] for row in old["tasks"]]
    assert all(e.pinned_host is None for e in Ledger.restore(old).tasks.values())
    old["tasks"] = [[*row, "h1"] for row in old["tasks"]]  # 13 fields, no marker: refused
    with pytest.raises(ValueError):
        Ledger.restore(old)
