"""Why pending through the API: task reasons, a job's summary and queue position, and
submission warnings (peloton.api.whypending, peloton.api.admissibility).

Jobs and task states come from the real job manager core (readmodel_scenario); the
waiting reasons are the texts the real resource manager and placement engine produce.
"""

from __future__ import annotations

import httpx
from event_bodies import job_created, offer, offer_received, task_state_changed
from readmodel_scenario import RES, Bus, _feed, cluster, submit

from peloton.jobmgr.domain.book import JobBook
from peloton.model.resources import Resources
from peloton.placement.domain import HostView, TaskRequest, place
from peloton.placement.domain.pins import pinned_reason
from peloton.readmodel.store import Store
from peloton.resmgr.domain.cycle import ResourceManager


def resmgr_reason(cpu: float, need: float, **kw: object) -> str:
    """The real resource manager's deferral reason for a job of `need` 1-cpu tasks on
    a host of `cpu` cpus."""
    rm = ResourceManager(entitlement_cycle_ms=10_000, min_recompute_ms=200, **kw)  # type: ignore[arg-type]
    rm.fold("OfferReceived", offer_received(offer("h0", cpu=cpu, mem=10_000)))
    rm.fold("JobCreated", job_created("x", int(need), cpu=1, mem=10,
                                      preemptible=not kw.get("preemption_enabled")))
    rm.fold("TaskStateChanged", task_state_changed(
        "x", *((i, "PENDING") for i in range(int(need))), previous="INITIALIZED"))
    return next(t["reason"] for e in rm.tick(0) if e.type == "AdmissionDeferred"
                for t in e.body["tasks"])


def engine_reason() -> str:
    """The real engine's reason for a 64-cpu task on two 8-cpu hosts."""
    hosts = [HostView(n, Resources(cpu=8, memory=8192), Resources(cpu=8, memory=8192))
             for n in ("h1", "h2")]
    task = TaskRequest("t", "j", Resources(cpu=64, memory=10))
    return place(hosts, [task]).unplaced["t"]


def waiting_cluster(store: Store) -> None:
    """/prod/batch (allocation cpu 1, demand 2): job-a and job-b wait for admission
    (job-a submitted first), job-big was admitted and no host can ever take it, job-pin
    waits for host h3, which is draining."""
    bus, book = Bus(), JobBook()
    cluster(bus, book)
    submit(bus, book, "job-a", 1, t=2_000, name="a")
    submit(bus, book, "job-b", 2, t=2_500, name="b")
    submit(bus, book, "job-big", 1, t=3_000, name="big")
    text = resmgr_reason(4, 6)
    bus.add("AdmissionDeferred", "/prod/batch", {"at": 3_500, "pool": "/prod/batch", "tasks": [
        {"job_id": j, "instance": i, "run": 1, "reason": text}
        for j, i in (("job-a", 0), ("job-b", 0), ("job-b", 1))]})
    x = {"job_id": "job-big", "instance": 0, "run": 1}
    _feed(bus, book, "TasksAdmitted", "/prod/batch",
          {"at": 3_600, "pool": "/prod/batch", "tasks": [x]}, 3_600)
    _feed(bus, book, "PlacementFailed", "round-3", {"at": 3_700, "round": 3, "tasks": [
        {**x, "reason": engine_reason()}]}, 3_700)
    submit(bus, book, "job-pin", 1, t=3_800, name="pin")
    p = {"job_id": "job-pin", "instance": 0, "run": 1}
    _feed(bus, book, "TasksAdmitted", "/prod/batch",
          {"at": 3_810, "pool": "/prod/batch", "tasks": [p]}, 3_810)
    bus.add("HostRegistered", "h3", {
        "host": "h3", "incarnation": "h3-inc1", "at": 3_820, "capacity": RES, "labels": {},
        "log_url": "", "port_range_begin": 31000, "port_range_end": 32000,
        "simulated": False})
    bus.add("HostStateChanged", "h3", {
        "host": "h3", "at": 3_830, "state": "DRAINING", "previous_state": "UP",
        "present": True, "labels": {}, "reason": "kernel upgrade", "deadline_ms": None,
        "request": ""})
    _feed(bus, book, "PlacementFailed", "round-4", {"at": 3_840, "round": 4, "tasks": [
        {**p, "reason": pinned_reason("h3", {}, "unused")}]}, 3_840)
    store.insert(bus.rows())


async def test_waiting_tasks_carry_a_structured_reason(store: Store,
                                                       client: httpx.AsyncClient) -> None:
    waiting_cluster(store)
    r = await client.get("/v1/jobs/job-b/tasks")
    assert r.status_code == 200
    (t0, t1) = r.json()["tasks"]
    assert t0["pending"]["code"] == "POOL_OVER_ENTITLEMENT" == t1["pending"]["code"]
    cpu = t0["pending"]["detail"]["resources"]["cpu"]
    assert cpu == {"needed": 5.0, "entitlement": 4.0, "allocation": 1.0, "demand": 2.0,
                   "reservation": 2.0}
    assert t0["pending"]["text"] == t0["reason"] and not t0["pending"]["permanent"]
    one = (await client.get("/v1/jobs/job-big/tasks/0")).json()
    assert one["state"] == "READY" and one["pending"]["code"] == "NO_HOST_FITS"
    assert one["pending"]["permanent"] and one["pending"]["detail"]["hosts"] == 2


async def test_a_pinned_run_waits_for_its_host_in_maintenance(
        store: Store, client: httpx.AsyncClient) -> None:
    waiting_cluster(store)
    (t,) = (await client.get("/v1/jobs/job-pin/tasks")).json()["tasks"]
    assert t["pending"]["code"] == "WAITING_FOR_HOST_MAINTENANCE"
    assert t["pending"]["detail"]["host"] == "h3"
    assert t["pending"]["detail"]["maintenance_state"] == "DRAINING"


async def test_a_job_shows_its_queue_position_and_reasons(store: Store,
                                                          client: httpx.AsyncClient) -> None:
    waiting_cluster(store)
    a = (await client.get("/v1/jobs/job-a")).json()["pending"]
    b = (await client.get("/v1/jobs/job-b")).json()["pending"]
    assert (a["queue_position"], a["queue_length"]) == (1, 2)
    assert (b["queue_position"], b["queue_length"]) == (2, 2)
    assert b["waiting"] == 2 and b["by_code"] == {"POOL_OVER_ENTITLEMENT": 2}
    assert b["reasons"][0]["instances"] == [0, 1] and not b["permanent"]
    big = (await client.get("/v1/jobs/job-big")).json()["pending"]
    assert big["permanent"] and big["queue_position"] is None
    assert big["by_code"] == {"NO_HOST_FITS": 1}


async def test_a_job_that_does_not_wait_has_no_pending(loaded: Store,
                                                       client: httpx.AsyncClient) -> None:
    job = (await client.get("/v1/jobs/job-ok")).json()
    assert job["pending"] is None
    tasks = (await client.get("/v1/jobs/job-ok/tasks")).json()["tasks"]
    assert all(t["pending"] is None for t in tasks)


JOB = """\
name: warn
owner: me
instanceCount: 2
respool: /prod/batch
sla: {{preemptible: {preemptible}}}
defaultConfig:
  resource: {{cpuLimit: {cpu}, memLimitMb: 64}}
  command: {{value: "echo hi"}}
"""


async def test_submission_warns_about_a_job_that_can_never_run(
        store: Store, client: httpx.AsyncClient) -> None:
    waiting_cluster(store)  # h1, h3 (8 cpus each), h2 (lost); /prod/batch reserves cpu 2
    ok = await client.post("/v1/jobs", content=JOB.format(preemptible="true", cpu=1))
    assert ok.status_code == 202 and ok.json()["warnings"] == []
    big = await client.post("/v1/jobs", content=JOB.format(preemptible="true", cpu=64))
    assert big.status_code == 202 and [w["code"] for w in big.json()["warnings"]] == [
        "NO_HOST_FITS"]
    assert "more than any of the 2 host(s)" in big.json()["warnings"][0]["message"]
    np = await client.post("/v1/jobs", content=JOB.format(preemptible="false", cpu=4))
    assert np.status_code == 202
    (w,) = np.json()["warnings"]
    assert w["code"] == "NON_PREEMPTIBLE_BEYOND_RESERVATION"
    assert "cpu 4" in w["message"] and "reserves cpu 2" in w["message"]


async def test_no_warning_while_nothing_is_known(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/jobs", content=JOB.format(preemptible="false", cpu=64))
    assert r.status_code == 202 and r.json()["warnings"] == []


def test_warnings_for_a_gang_beyond_the_reservation_and_none_when_it_fits() -> None:
    from event_bodies import job_submitted

    from peloton.api.admissibility import warnings_for

    gang = job_submitted("g", 4, cpu=1, preemptible=False, min_running=3)
    (w,) = warnings_for(gang, {"cpu": 2.0, "memory": 1e6}, [])
    assert w["code"] == "NON_PREEMPTIBLE_BEYOND_RESERVATION"
    assert w["message"].startswith("the gang of 3 tasks") and "cpu 3" in w["message"]
    assert warnings_for(gang, {"cpu": 3.0, "memory": 1e6}, [{"cpu": 1, "memory": 64}]) == []
    assert warnings_for(job_submitted("p", 4, cpu=9), {}, []) == []  # preemptible, no hosts
