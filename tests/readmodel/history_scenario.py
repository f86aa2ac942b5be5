"""A realistic log with entitlement cycles, for history and time-travel tests.

`history_scenario()` is `full_scenario()` with pools /prod and /prod/batch created first
(requests answered by the real resource manager core), and that core folding the same
facts and publishing its EntitlementUpdated cycles (one per simulated second) in between
them, so pools' entitlement and allocation move over time.
"""

from __future__ import annotations

from readmodel_scenario import Bus, Record, full_scenario

from peloton.readmodel.projector import Row
from peloton.resmgr.domain.cycle import ResourceManager
from peloton.resmgr.domain.poolbook import parse_pool_document

CYCLE_MS = 1_000


def _at(rec: Record) -> int:
    body = rec.body
    return int(body.get("at", body.get("submitted_at", 0)) or 0)


def history_scenario() -> Bus:
    source = full_scenario()
    rm = ResourceManager(entitlement_cycle_ms=CYCLE_MS)
    bus = Bus()
    for i, path in enumerate(("/prod", "/prod/batch")):
        body = {"request_id": f"hist-{i}", "at": 900 + i, "path": path,
                "config": parse_pool_document({"resources": [
                    {"kind": "cpu", "reservation": 2, "limit": 8},
                    {"kind": "memory", "reservation": 256, "limit": 8192}]}, path)[0]}
        bus.add("ResourcePoolCreateRequested", path, body)
        for fact in rm.handle("ResourcePoolCreateRequested", body, 900 + i):
            bus.add(fact.type, fact.key, fact.body)
            rm.fold(fact.type, fact.body)
    for rec in source.records:
        if rec.etype == "EntitlementUpdated":
            continue  # the real resource manager publishes its own cycles below
        bus.add(rec.etype, _key(rec), rec.body)
        now = _at(rec)
        rm.handle(rec.etype, rec.body, now)
        for ev in rm.tick(now):
            if ev.type == "EntitlementUpdated":
                bus.add(ev.type, ev.key, ev.body)
    last = max(_at(r) for r in bus.records)
    for now in range(last + CYCLE_MS, last + 4 * CYCLE_MS, CYCLE_MS):
        for ev in rm.tick(now):
            if ev.type == "EntitlementUpdated":
                bus.add(ev.type, ev.key, ev.body)
    return bus


def _key(rec: Record) -> str:
    """The record's key as the bus partitioned it (the entity the event is about)."""
    b = rec.body
    for field in ("job_id", "host", "path", "pool"):
        if isinstance(b.get(field), str):
            return str(b[field])
    return rec.etype


def rows_until(bus: Bus, at: int) -> list[Row]:
    """The rows of the facts with an event time at or before `at` (log order)."""
    return [r for r in bus.rows() if r.values["at"] <= at]


def instants(bus: Bus) -> list[int]:
    """Every distinct event time of the log, and one before all of them."""
    times = sorted({int(r.values["at"]) for r in bus.rows()})
    return [times[0] - 1, *times]
