"""Why pending: the classifier of readmodel/pending.py over the real cores' reason texts.

The resource manager's and the placement engine's reasons are produced by running the
real cores (ResourceManager.tick, placement `place`, pins.pinned_reason) and projected by
the real projector, so a change of wording there breaks these tests instead of silently
turning reasons into UNKNOWN. Properties: the engine's per-filter counts parse back
whatever the filter names, and the queue position follows the admission scan's order.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from event_bodies import job_created, offer, offer_received, task_state_changed
from hypothesis import given

from peloton.model.resources import Resources
from peloton.placement.domain import HostView, TaskRequest, place
from peloton.placement.domain.pins import pinned_reason
from peloton.readmodel.pending import (
    classify,
    parse_no_host,
    parse_shortfall,
    queue_position,
    summarize,
)
from peloton.readmodel.projector import SourcePos, project
from peloton.resmgr.domain.admission import Gang, gang_order
from peloton.resmgr.domain.cycle import ResourceManager

SRC = SourcePos("t", 0, 1)


def shown(etype: str, body: dict[str, Any]) -> list[str]:
    """The reasons the read model shows for an AdmissionDeferred/PlacementFailed body."""
    return [r.values["reason"] for r in project(etype, body, SRC)
            if r.table == "tasks" and r.values["facet"] == "reason"]


def deferred(rm: ResourceManager, now: int = 0) -> list[str]:
    return [text for e in rm.tick(now) if e.type == "AdmissionDeferred"
            for text in shown(e.type, e.body)]


def resmgr(cpu: float, **kw: Any) -> ResourceManager:
    rm = ResourceManager(entitlement_cycle_ms=10_000, min_recompute_ms=200, **kw)
    rm.fold("OfferReceived", offer_received(offer("h0", cpu=cpu, mem=10_000)))
    return rm


def submit(rm: ResourceManager, job_id: str, n: int, **kw: Any) -> None:
    rm.fold("JobCreated", job_created(job_id, n, **kw))
    rm.fold("TaskStateChanged", task_state_changed(
        job_id, *((i, "PENDING") for i in range(n)), previous="INITIALIZED"))


def engine_reason(hosts: list[HostView], task: TaskRequest) -> str:
    result = place(hosts, [task])
    return result.unplaced[task.task_id]


def host(name: str, cpu: float, free: float | None = None) -> HostView:
    cap = Resources(cpu=cpu, memory=4096)
    return HostView(name, cap, Resources(cpu=cpu if free is None else free, memory=4096))


# --------------------------------------------------------------------- admission


def test_pool_over_entitlement_from_the_resource_manager_with_the_pool_numbers() -> None:
    rm = resmgr(4)
    submit(rm, "j1", 6, cpu=1, mem=10)
    (text, _) = deferred(rm)
    assert text == "waiting for admission to pool /default: pool over entitlement: cpu 5/4"
    pool = {"allocation": {"cpu": 4.0}, "demand": {"cpu": 6.0}, "reservation": {"cpu": 0.0}}
    r = classify({"state": "PENDING", "reason": text}, pool=pool)
    assert r is not None and r["code"] == "POOL_OVER_ENTITLEMENT" and not r["permanent"]
    assert r["detail"]["binding_resource"] == "cpu" and r["detail"]["slack"] is False
    assert r["detail"]["resources"]["cpu"] == {"needed": 5.0, "entitlement": 4.0,
                                               "allocation": 4.0, "demand": 6.0,
                                               "reservation": 0.0}


def test_non_preemptible_work_in_a_pool_reserving_nothing_is_permanent() -> None:
    rm = resmgr(4, preemption_enabled=True)
    submit(rm, "np", 1, cpu=1, mem=10, preemptible=False)
    (text,) = deferred(rm)
    assert "non-preemptible work beyond reservation: cpu 1/0" in text
    r = classify({"state": "PENDING", "reason": text})
    assert r is not None and r["code"] == "NON_PREEMPTIBLE_BEYOND_RESERVATION"
    assert r["permanent"] and r["detail"]["resources"]["cpu"] == {"needed": 1.0,
                                                                  "reservation": 0.0}


def test_several_failed_checks_keep_every_check_and_lead_with_the_permanent_one() -> None:
    text = ("waiting for admission to pool /p: pool over entitlement: cpu 9/4; "
            "non-preemptible work beyond reservation: cpu 9/0, memory 10/0")
    r = classify({"state": "PENDING", "reason": text})
    assert r is not None and r["code"] == "NON_PREEMPTIBLE_BEYOND_RESERVATION"
    assert [c["code"] for c in r["detail"]["checks"]] == [
        "POOL_OVER_ENTITLEMENT", "NON_PREEMPTIBLE_BEYOND_RESERVATION"]


def test_other_admission_texts() -> None:
    def code(rest: str) -> str:
        r = classify({"state": "PENDING", "reason": f"waiting for admission to pool /p: {rest}"})
        assert r is not None
        return str(r["code"])
    assert code("waiting for 2 more gang members") == "GANG_INCOMPLETE"
    assert code("held back: gang j/gang has waited too long and reserves the nonslack "
                "budget") == "HELD_BEHIND_GANG"
    assert code("unknown pool /gone") == "UNKNOWN_POOL"
    assert code("pool over slack entitlement: cpu 2/1") == "POOL_OVER_ENTITLEMENT"
    assert code("controller tasks beyond controller limit: cpu 2/1") == "CONTROLLER_LIMIT"
    assert code("the moon is in the wrong phase") == "UNKNOWN"


# --------------------------------------------------------------------- placement


def test_a_task_larger_than_any_host_is_no_host_fits_with_counts_and_permanent() -> None:
    reason = engine_reason([host("a", 4), host("b", 4)],
                           TaskRequest("t1", "j", Resources(cpu=64, memory=10)))
    (text,) = shown("PlacementFailed", {"at": 1, "round": 1, "tasks": [
        {"job_id": "j", "instance": 0, "run": 1, "reason": reason}]})
    r = classify({"state": "READY", "reason": text})
    assert r is not None and r["code"] == "NO_HOST_FITS" and r["permanent"]
    assert r["detail"]["hosts"] == 2
    assert r["detail"]["binding_filter"].startswith("capacity ")
    assert r["detail"]["filters"][-1]["hosts_left"] == 0


def test_no_free_room_is_no_host_fits_but_not_permanent() -> None:
    reason = engine_reason([host("a", 4, free=0.5), host("b", 4, free=0)],
                           TaskRequest("t1", "j", Resources(cpu=2, memory=10)))
    r = classify({"state": "PLACING", "reason": f"waiting for placement: {reason}"})
    assert r is not None and r["code"] == "NO_HOST_FITS" and not r["permanent"]
    counts = {f["filter"]: f["hosts_left"] for f in r["detail"]["filters"]}
    assert counts and min(counts.values()) == 0 and r["detail"]["hosts"] == 2


def test_an_incomplete_gang_from_the_engine() -> None:
    tasks = [TaskRequest(f"t{i}", "j", Resources(cpu=1, memory=1), gang_id="j/gang",
                         gang_size=3) for i in range(2)]
    result = place([host("a", 4)], tasks)
    r = classify({"state": "READY", "reason": f"waiting for placement: {result.unplaced['t0']}"})
    assert r is not None and r["code"] == "GANG_INCOMPLETE"
    assert r["detail"] == {"gang": "j/gang", "tasks_in_round": 2, "gang_size": 3}


def test_a_pinned_run_waits_for_its_host_in_maintenance() -> None:
    text = "waiting for placement: " + pinned_reason("h7", {}, "ignored")
    maint = classify({"state": "READY", "reason": text},
                     hosts={"h7": {"maintenance_state": "DRAINING"}})
    plain = classify({"state": "READY", "reason": text},
                     hosts={"h7": {"maintenance_state": "UP"}})
    assert maint is not None and maint["code"] == "WAITING_FOR_HOST_MAINTENANCE"
    assert maint["detail"]["host"] == "h7"
    assert plain is not None and plain["code"] == "WAITING_FOR_PINNED_HOST"


def test_backoff_queued_admitted_and_not_waiting() -> None:
    backoff = classify({"state": "PENDING", "reason": (
        "placement timeout: not placed within 600s (attempt 1); allocation given back, "
        "admitted again after 300s")})
    assert backoff is not None and backoff["code"] == "PLACEMENT_BACKOFF"
    assert backoff["detail"] == {"attempt": 1, "backoff_s": 300.0}
    queued = classify({"state": "PENDING", "reason": "job created"})
    assert queued is not None and queued["code"] == "QUEUED"
    admitted = classify({"state": "PENDING", "reason": "admitted to pool /p"})
    assert admitted is not None and admitted["code"] == "ADMITTED"
    assert classify({"state": "RUNNING", "reason": "waiting for placement: x"}) is None
    odd = classify({"state": "READY", "reason": "waiting for placement: gremlins"})
    assert odd is not None and odd["code"] == "UNKNOWN" and odd["text"].endswith("gremlins")


# --------------------------------------------------------------------- properties

_NAME = st.text(st.characters(whitelist_categories=("Ll", "Lu", "Nd"),
                              whitelist_characters=" =<>!.,:()-_/"),
                min_size=1, max_size=30).filter(
    lambda s: s == s.strip() and "; " not in s and " hosts; " not in s)


@given(req=_NAME, total=st.integers(0, 10**6),
       stages=st.lists(st.tuples(_NAME, st.integers(0, 10**6)), min_size=1, max_size=6))
def test_per_filter_counts_parse_back(req: str, total: int,
                                      stages: list[tuple[str, int]]) -> None:
    # the engine's format (placement/domain/engine.py _no_host)
    detail = "; ".join(f"{name}: {left}" for name, left in stages)
    parsed = parse_no_host(f"no host with {req} ({total} hosts; {detail})")
    assert parsed is not None and parsed["hosts"] == total
    assert [(f["filter"], f["hosts_left"]) for f in parsed["filters"]] == stages
    assert parsed["binding_filter"] == next((n for n, left in stages if left == 0), None)


@given(st.dictionaries(st.sampled_from(["cpu", "memory", "disk", "gpu"]),
                       st.tuples(st.floats(0, 1e9), st.floats(0, 1e9)), min_size=1))
def test_shortfalls_parse_back(values: dict[str, tuple[float, float]]) -> None:
    def num(x: float) -> str:  # resmgr/domain/admission.py _num
        return f"{round(x, 3):g}"
    text = ", ".join(f"{k} {num(n)}/{num(h)}" for k, (n, h) in values.items())
    parsed = parse_shortfall(text)
    assert parsed is not None and list(parsed) == list(values)
    for k, (n, h) in values.items():
        assert parsed[k] == (float(num(n)), float(num(h)))


@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(0, 50)), min_size=1, max_size=12))
def test_queue_position_follows_the_admission_scan(jobs: list[tuple[int, int]]) -> None:
    rows = [{"job_id": f"j{i:02d}", "priority": p, "created_at": at}
            for i, (p, at) in enumerate(jobs)]
    gangs = sorted((Gang(r["job_id"], (), "/p", r["priority"], r["created_at"], Resources())
                    for r in rows), key=gang_order)
    for expected, gang in enumerate(gangs, start=1):
        assert queue_position(gang.gang_id, rows) == (expected, len(rows))
    assert queue_position("other", rows) == (None, len(rows))


def test_summarize_groups_reasons_and_flags_permanent() -> None:
    never = {"code": "NO_HOST_FITS", "detail": {}, "text": "x", "permanent": True}
    later = {"code": "QUEUED", "detail": {}, "text": "y", "permanent": False}
    s = summarize([{"instance": 0, "pending": never}, {"instance": 1, "pending": later},
                   {"instance": 2, "pending": never}, {"instance": 3, "pending": None}])
    assert s["waiting"] == 3 and s["by_code"] == {"NO_HOST_FITS": 2, "QUEUED": 1}
    assert s["permanent"] and s["reasons"][0]["instances"] == [0, 2]


def test_a_gang_above_the_pool_limit_is_permanent_over_entitlement() -> None:
    rm = resmgr(4)
    submit(rm, "big", 1, cpu=64, mem=10)
    (text,) = deferred(rm)
    assert text.endswith("pool over entitlement: cpu 64/4")
    row = {"allocation": {"cpu": 0.0}, "demand": {"cpu": 64.0}, "limit": {"cpu": 4.0}}
    r = classify({"state": "PENDING", "reason": text}, pool=row)
    assert r is not None and r["code"] == "POOL_OVER_ENTITLEMENT" and r["permanent"]
    roomy = {**row, "limit": {"cpu": 100.0}}
    r = classify({"state": "PENDING", "reason": text}, pool=roomy)
    assert r is not None and not r["permanent"]


def test_a_task_no_host_can_hold_is_no_host_fits_at_admission_too() -> None:
    rm = resmgr(4)
    submit(rm, "big", 1, cpu=64, mem=10)
    (text,) = deferred(rm)
    caps = [{"cpu": 4.0, "memory": 10_000.0}, {"cpu": 8.0, "memory": 100.0}]
    r = classify({"state": "PENDING", "reason": text}, needs={"cpu": 64.0, "memory": 10.0},
                 capacities=caps)
    assert r is not None and r["code"] == "NO_HOST_FITS" and r["permanent"]
    assert r["detail"]["largest_host"] == {"cpu": 8.0, "memory": 10_000.0}
    assert r["detail"]["services_say"]["code"] == "POOL_OVER_ENTITLEMENT"
    fits = classify({"state": "PENDING", "reason": text}, needs={"cpu": 4.0, "memory": 10.0},
                    capacities=caps)
    assert fits is not None and fits["code"] == "POOL_OVER_ENTITLEMENT"
