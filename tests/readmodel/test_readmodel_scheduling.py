"""The history the scheduling dashboard reads: offers per host, wait notes, preemptors.

Preemptions come from a real resource manager + job manager run (tests/resmgr's Sim), so
the preemptor parsing is checked against the detail text resmgr really writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from peloton.readmodel.projector import SourcePos, preemptor, project
from peloton.readmodel.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "resmgr"))

from test_resmgr_service_cycle import two_pools  # noqa: E402

SRC = SourcePos("t", 0, 5)


def test_preemptors_of_a_real_resource_manager_run(store: Store) -> None:
    sim = two_pools()
    sim.submit("low", "/A", 12, priority=1)
    sim.run(1.0)
    sim.submit("high", "/A", 4, priority=5)
    sim.run(3.0)
    sim.submit("b", "/B", 12)
    sim.run(6.0)
    rows = [row for i, e in enumerate(sim.of_type("TasksPreempted"))
            for row in project(e.type, e.body, SourcePos("respool-events", 0, i))]
    by_rule = {(r.values["reason"], r.values["preemptor"]) for r in rows}
    assert by_rule == {("HIGHER_PRIORITY_IN_POOL", f"high-{i}") for i in range(4)} | {
        ("POOL_OVER_ENTITLEMENT", "")}
    store.insert(rows)
    got = store._query("SELECT job_id, instance, preemptor FROM {db}.preemptions FINAL "
                       "WHERE preemptor != '' ORDER BY preemptor")
    assert [r["preemptor"] for r in got] == [f"high-{i}" for i in range(4)]
    assert {r["job_id"] for r in got} == {"low"}


@given(gang=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1),
       priority=st.integers(-5, 10**6), pool=st.from_regex(r"/[a-z]{1,8}", fullmatch=True))
def test_the_preemptor_is_the_gang_named_in_the_detail(gang: str, priority: int,
                                                       pool: str) -> None:
    detail = f"for gang {gang} (priority {priority}) in {pool}: needs cpu 1/0"
    assert preemptor(detail) == gang


@given(st.text())
def test_other_details_name_no_preemptor(detail: str) -> None:
    if not detail.startswith("for gang "):
        assert preemptor(detail) == ""


def test_every_offer_is_kept_per_host() -> None:
    cap = {"cpu": 4.0, "memory": 4096.0, "disk": 0.0, "gpu": 0.0}
    offers = [{"host": h, "incarnation": f"{h}-1", "capacity": cap,
               "free": {**cap, "cpu": free}, "labels": {}, "generation": 2,
               "available": h == "a", "port_range_begin": 31000, "port_range_end": 32000,
               "used_ports": [], "task_label_counts": {}} for h, free in (("a", 1.0),
                                                                          ("b", 4.0))]
    rows = project("OfferReceived", {"at": 70, "offers": offers}, SRC)
    history = [r.values for r in rows if r.table == "host_offers"]
    assert [(v["host"], v["at"], v["free"]["cpu"], v["available"], v["src_index"])
            for v in history] == [("a", 70, 1.0, True, 0), ("b", 70, 4.0, False, 1)]
    assert [r.values["host"] for r in rows if r.table == "hosts"] == ["a", "b"]


def test_admission_notes_keep_their_pool_and_stage() -> None:
    body = {"at": 40, "pool": "/p", "tasks": [
        {"job_id": "j", "instance": i, "run": 1, "reason": "pool over entitlement: cpu 3/2"}
        for i in range(2)]}
    rows = project("AdmissionDeferred", body, SRC)
    waits = [r.values for r in rows if r.table == "task_waits"]
    assert [(w["instance"], w["pool"], w["stage"], w["reason"]) for w in waits] == [
        (i, "/p", "admission", "pool over entitlement: cpu 3/2") for i in range(2)]
    notes = [r.values for r in rows if r.table == "tasks"]
    assert all(n["reason"].startswith("waiting for admission to pool /p: ") for n in notes)
