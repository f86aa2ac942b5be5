"""Revocable work in the resource manager: admitted against the slack entitlement, the
first victims when non-revocable work needs the cpus back.

The revocable cpus are the cpus no non-revocable run holds (`revocable_capacity`); a
pool's revocable memory is carved from its entitlement up to its slack limit (20% of its
reservation). Examples: a task-level revocable task runs on slack beside the job's other
tasks; when non-revocable work takes the cpus, the revocable runs are preempted and the
lower-priority non-revocable ones are not. End to end on the in-memory runner (the four
scheduling services, simulated agents): revocable jobs run and succeed (before the
revocable cpus were counted they stayed PENDING for ever, "pool over slack entitlement:
cpu 0.1/0"), and a non-revocable job that needs their cpus preempts just enough of them;
the preempted runs are retried and everything succeeds.
"""

from __future__ import annotations

from typing import Any

from event_bodies import (
    job_created,
    offer,
    offer_received,
    task_state_changed,
)

from peloton.model.event import Event
from peloton.model.resources import Resources
from peloton.resmgr.domain.admission import PoolAllocation
from peloton.resmgr.domain.cycle import ResourceManager, revocable_capacity
from peloton.runner import batch_job
from peloton.runner import cluster as memory_cluster

POOL = "/batch"


def pool_created(cpu: float, mem: float, disk: float = 1_000.0) -> dict[str, Any]:
    res = {"cpu": cpu, "memory": mem, "disk": disk, "gpu": 0.0}
    return {"request_id": "r1", "at": 0, "pool": {"path": POOL, "parent": "/", "config": {
        "name": POOL[1:], "description": "", "resources": [
            {"kind": k, "reservation": v, "limit": 1e6, "share": 1.0, "type": "ELASTIC"}
            for k, v in res.items()],
        "slack_limit_percent": 20.0, "controller_limit_percent": 0.0}}}


def cluster(cpu: float) -> ResourceManager:
    """One host, and a pool reserving all of it (so 20% of its memory may be revocable)."""
    rm = ResourceManager(entitlement_cycle_ms=1_000, min_recompute_ms=0,
                         preemption_enabled=True, preemption_cycles=1)
    rm.fold("OfferReceived", offer_received(offer("h0", cpu=cpu, mem=10_000)))
    rm.fold("ResourcePoolCreated", pool_created(cpu, 10_000))
    return rm


def submit(rm: ResourceManager, job_id: str, n: int, at: int = 0,
           revocable_instances: tuple[int, ...] = (), **kw: Any) -> None:
    body = job_created(job_id, n, at=at, respool=POOL, **kw)
    body["instance_tasks"] = {str(i): {**body["default_task"], "revocable": True}
                              for i in revocable_instances}
    rm.fold("JobCreated", body)
    rm.fold("TaskStateChanged", task_state_changed(job_id, *((i, "PENDING") for i in range(n)),
                                                   previous="INITIALIZED", at=at))


def tasks(events: list[Event], etype: str) -> list[tuple[str, int]]:
    return [(t["job_id"], t["instance"]) for e in events if e.type == etype
            for t in e.body["tasks"]]


def run(rm: ResourceManager, events: list[Event], at: int) -> None:
    """The log: the decisions come back, the admitted runs start RUNNING."""
    for ev in events:
        if ev.type in ("TasksAdmitted", "TasksPreempted", "AdmissionDeferred"):
            rm.fold(ev.type, ev.body)
    for job_id, i in tasks(events, "TasksAdmitted"):
        rm.fold("TaskStateChanged", task_state_changed(job_id, (i, "RUNNING"),
                                                       previous="READY", at=at))


def slack_cpu(events: list[Event]) -> float:
    (ent,) = [e for e in events if e.type == "EntitlementUpdated"]
    (row,) = [r for r in ent.body["pools"] if r["pool"] == POOL]
    return float(row["slack_entitlement"]["cpu"])


def test_the_revocable_cpus_are_the_cpus_no_non_revocable_run_holds() -> None:
    allocs = [PoolAllocation(nonslack=Resources(cpu=3), slack=Resources(cpu=2)),
              PoolAllocation(nonslack=Resources(cpu=4))]
    assert revocable_capacity(Resources(cpu=10), allocs) == Resources(cpu=3)
    assert revocable_capacity(Resources(cpu=5), allocs) == Resources()  # never negative


def test_a_task_level_revocable_task_runs_on_slack_beside_its_job() -> None:
    rm = cluster(4)
    submit(rm, "j", 3, revocable_instances=(2,), cpu=1.0)
    out = rm.tick(0)
    assert tasks(out, "TasksAdmitted") == [("j", 0), ("j", 1), ("j", 2)]
    assert tasks(out, "AdmissionDeferred") == []
    run(rm, out, 10)
    usage, allocs = rm.usage()
    assert allocs[POOL].slack == Resources(cpu=1, memory=64)
    assert allocs[POOL].nonslack == Resources(cpu=2, memory=128)


def test_revocable_runs_are_the_first_victims_when_non_revocable_work_needs_the_cpus() -> None:
    rm = cluster(4)
    submit(rm, "low", 2, cpu=1.0, priority=0)  # non-revocable, low priority
    submit(rm, "rev", 2, cpu=1.0, priority=5, revocable=True)
    out = rm.tick(0)
    assert sorted(tasks(out, "TasksAdmitted")) == [("low", 0), ("low", 1), ("rev", 0),
                                                   ("rev", 1)]
    run(rm, out, 10)
    assert slack_cpu(rm.tick(1_000)) == 2.0  # 4 cpus, 2 held by non-revocable runs
    # a non-revocable job needs the 2 cpus the revocable runs use: it is admitted (its
    # pool is entitled to them), the revocable runs go over the slack left (0 cpus)
    submit(rm, "high", 2, at=1_100, cpu=1.0, priority=1)
    out = rm.tick(1_100)
    assert sorted(tasks(out, "TasksAdmitted")) == [("high", 0), ("high", 1)]
    run(rm, out, 1_150)
    out = rm.tick(2_100)  # the next cycle: preemption
    assert slack_cpu(out) == 0.0
    assert sorted(tasks(out, "TasksPreempted")) == [("rev", 0), ("rev", 1)]


def test_without_non_revocable_demand_revocable_runs_are_left_alone() -> None:
    rm = cluster(4)
    submit(rm, "rev", 4, cpu=1.0, revocable=True)
    out = rm.tick(0)
    assert len(tasks(out, "TasksAdmitted")) == 4
    run(rm, out, 10)
    for now in range(1_000, 6_000, 1_000):
        assert tasks(rm.tick(now), "TasksPreempted") == []


# ------------------------------------------------------------------ end to end


def reserving_pool(runner: Any, path: str, cpu: float, memory: float) -> None:
    config = pool_created(cpu, memory)["pool"]["config"]
    runner.publish([Event("ResourcePoolCreateRequested", path, {
        "request_id": "create" + path, "at": 0, "path": path,
        "config": {**config, "name": path[1:]}})])
    runner.run_for(1_000)


def revocable_job(job_id: str, instances: int, **kw: Any) -> dict[str, Any]:
    body = batch_job(job_id, instances, pool=POOL, **kw)
    body["sla"]["revocable"] = True
    return body


def test_revocable_jobs_run_end_to_end() -> None:
    runner = memory_cluster(seed=1, hosts=4, cpu=8.0, memory=8192.0)
    reserving_pool(runner, POOL, 32.0, 32768.0)
    runner.submit([revocable_job(f"rev{j}", 4) for j in range(5)])
    assert runner.run_until(runner.watch.all_terminal, max_ms=30_000)
    assert runner.watch.states() == {"SUCCEEDED": 5}
    assert runner.errors == [] and runner.dead_letters() == 0


def test_non_revocable_work_preempts_just_enough_revocable_runs_end_to_end() -> None:
    runner = memory_cluster(seed=1, hosts=4, cpu=8.0, memory=8192.0)  # 32 cpus
    reserving_pool(runner, POOL, 32.0, 32768.0)
    runner.submit([revocable_job("rev", 8, cpu=3.0, duration_s=60)])  # 24 cpus
    runner.run_for(5_000)
    runner.submit([batch_job("firm", 6, cpu=3.0, pool=POOL, duration_s=5)])  # 18 of 8 free
    assert runner.run_until(runner.watch.all_terminal, max_ms=300_000)
    assert runner.watch.states() == {"SUCCEEDED": 2}
    preempted = [(t["job_id"], t["instance"]) for _, etype, body in
                 runner.records("respool-events") if etype == "TasksPreempted"
                 for t in body["tasks"]]
    # 10 more cpus were needed: four 3-cpu revocable runs, and no non-revocable one
    assert len(preempted) == 4 and all(job == "rev" for job, _ in preempted)
    assert runner.watch.violations == []
    assert runner.errors == [] and runner.dead_letters() == 0
