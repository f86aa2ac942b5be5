"""Pools and preemption across the services, on the production cores in the in-memory runner
(moved here from tests/resmgr/test_resmgr_service_cycle.py, whose hand-rolled bus wired the
resource and job manager cores to instant fakes of placement, hostmgr and the agents):
pools through events, Peloton's preemption system test (between pools), within a pool,
non-preemptible work, kill grace periods, and capacity changes.

Three simulated agents of 4 cpus; pools /A and /B reserve 6 and may grow to 12; one
entitlement cycle a second, preemption after 2 over-entitlement cycles (unless said).
"""

from __future__ import annotations

from typing import Any

from pool_jobs import job_body, pool_config

from peloton.hostmgr.service import HostManagerCore
from peloton.jobmgr.service import JobManagerCore
from peloton.model.event import Event
from peloton.placement.service import PlacementCore
from peloton.resmgr.service import ResourceManagerCore
from peloton.runner import MemoryRunner


def cluster(preemption_cycles: int = 2, preemption: bool = True, in_pool: bool = True,
            cycle_s: float = 1.0, hosts: int = 3) -> MemoryRunner:
    runner = MemoryRunner(seed=5, step_ms=50)
    runner.add_service("jobmgr", JobManagerCore)
    runner.add_service("resmgr", lambda: ResourceManagerCore(
        cycle_s, preemption_cycles=preemption_cycles, preemption=preemption,
        in_pool_preemption=in_pool))
    runner.add_service("placement", PlacementCore)
    runner.add_service("hostmgr", HostManagerCore)
    for i in range(hosts):
        runner.add_agent(f"h{i}", cpu=4.0, memory=4096.0, disk=10240.0)
    runner.run_for(2_000)
    return runner


def create_pool(runner: MemoryRunner, path: str, cpu_res: float, cpu_lim: float) -> None:
    config = pool_config(path.rsplit("/", 1)[1], cpu_res, cpu_lim)
    runner.publish([Event("ResourcePoolCreateRequested", path, {
        "request_id": f"create-{path}", "at": runner.now, "path": path, "config": config})])


def two_pools(**kw: Any) -> MemoryRunner:
    runner = cluster(**kw)
    create_pool(runner, "/A", 6, 12)
    create_pool(runner, "/B", 6, 12)
    runner.run_for(1_500)
    return runner


def submit(runner: MemoryRunner, job_id: str, pool: str, n: int, priority: int = 1,
           preemptible: bool = True, cpu: float = 1.0) -> None:
    runner.submit([job_body(job_id, pool, n, runner.now, priority, preemptible, cpu)])


def states(runner: MemoryRunner, job_id: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in runner.core("jobmgr").book.jobs[job_id].tasks:
        out[t.state.value] = out.get(t.state.value, 0) + 1
    return out


def running(runner: MemoryRunner, job_id: str) -> int:
    return states(runner, job_id).get("RUNNING", 0)


def of_type(runner: MemoryRunner, topic: str, etype: str) -> list[dict[str, Any]]:
    return [body for _, e, body in runner.records(topic) if e == etype]


def preempted(runner: MemoryRunner) -> list[dict[str, Any]]:
    return [t for b in of_type(runner, "respool-events", "TasksPreempted") for t in b["tasks"]]


def settle(runner: MemoryRunner, job_id: str, n: int, max_ms: int = 10_000) -> None:
    assert runner.run_until(lambda: running(runner, job_id) == n, max_ms), states(runner, job_id)


# ---- pools through events ----------------------------------------------------------------
def test_a_new_pool_is_published_at_once_and_the_job_manager_accepts_jobs_for_it() -> None:
    runner = cluster()
    create_pool(runner, "/A", 6, 12)
    runner.run_for(1_500)
    (created,) = of_type(runner, "respool-events", "ResourcePoolCreated")
    assert created["pool"]["path"] == "/A"
    latest = of_type(runner, "entitlement-updated", "EntitlementUpdated")[-1]
    assert {p["pool"] for p in latest["pools"]} == {"/", "/A", "/default"}
    assert runner.core("jobmgr").book.leaf_pools == {"/A", "/default"}
    submit(runner, "j", "/A", 2)
    settle(runner, "j", 2)
    assert not of_type(runner, "job-events", "JobRejected")
    assert runner.errors == [] and runner.dead_letters() == 0


def test_jobs_for_a_pool_that_does_not_exist_are_rejected() -> None:
    runner = cluster()
    submit(runner, "j", "/nope", 1)
    runner.run_for(1_000)
    (rejected,) = of_type(runner, "job-events", "JobRejected")
    assert "respool: resource pool /nope does not exist" in rejected["reasons"]


def test_a_new_host_republishes_entitlement_without_waiting_for_the_cycle() -> None:
    runner = cluster(cycle_s=60.0)
    before = len(of_type(runner, "entitlement-updated", "EntitlementUpdated"))
    runner.add_agent("h9", cpu=4.0, memory=4096.0, disk=10240.0)
    runner.run_for(2_000)  # well within the 60 s cycle
    updates = of_type(runner, "entitlement-updated", "EntitlementUpdated")
    assert len(updates) > before and updates[-1]["capacity"]["cpu"] == 16.0


def test_deleting_a_pool_with_tasks_is_refused_and_without_them_accepted() -> None:
    runner = two_pools()
    submit(runner, "j", "/A", 1)
    settle(runner, "j", 1)
    for rid, path in (("d1", "/A"), ("d2", "/B")):
        runner.publish([Event("ResourcePoolDeleteRequested", path,
                              {"request_id": rid, "at": runner.now, "path": path})])
    runner.run_for(1_500)
    (rej,) = of_type(runner, "respool-events", "ResourcePoolRequestRejected")
    assert rej["reasons"] == ["/A: tasks: pool still has tasks"]
    assert [b["path"] for b in of_type(runner, "respool-events", "ResourcePoolDeleted")] == [
        "/B"]
    assert "/B" not in runner.core("resmgr").manager.tree


# ---- preemption between pools (Peloton's system test) ---------------------------------------
def test_second_pool_takes_back_exactly_its_reservation_from_the_first() -> None:
    runner = two_pools()
    submit(runner, "a", "/A", 12)
    settle(runner, "a", 12)
    submit(runner, "b", "/B", 12)
    settle(runner, "b", 6)
    runner.run_for(3_000)  # and nothing more happens
    taken = preempted(runner)
    assert len(taken) == 6 and {t["job_id"] for t in taken} == {"a"}
    assert {t["reason"] for t in taken} == {"POOL_OVER_ENTITLEMENT"}
    assert running(runner, "a") == 6 and running(runner, "b") == 6
    assert states(runner, "a") == {"RUNNING": 6, "PENDING": 6}
    # the preempted runs ended KILLED (reason PREEMPTED) on their agents, the next run is
    # PENDING, and preemption did not count as a failure
    for t in runner.core("jobmgr").book.jobs["a"].tasks:
        if t.state.value == "PENDING":
            assert t.run == 2 and t.failures == 0 and t.reason.startswith("PREEMPTED")
    ends = [ch for b in of_type(runner, "job-events", "TaskStateChanged") if b["job_id"] == "a"
            for ch in b["changes"] if ch["state"] == "KILLED"]
    assert len(ends) == 6 and all(ch["reason"].startswith("PREEMPTED") for ch in ends)
    assert all(ch["previous_state"] == "PREEMPTING" for ch in ends)
    assert not runner.watch.violations and runner.dead_letters() == 0


def test_preemption_waits_for_the_configured_number_of_cycles() -> None:
    runner = two_pools(preemption_cycles=4)
    submit(runner, "a", "/A", 12)
    settle(runner, "a", 12)
    submit(runner, "b", "/B", 12)
    runner.run_for(2_500)  # B's demand is seen within a cycle; 4 cycles are not over
    assert not preempted(runner)
    assert runner.run_until(lambda: bool(preempted(runner)), 4_000)


def test_kills_carry_the_task_grace_period_and_victims_are_the_latest_started() -> None:
    runner = two_pools()
    submit(runner, "a", "/A", 6)
    settle(runner, "a", 6)
    submit(runner, "a2", "/A", 6)
    settle(runner, "a2", 6)
    submit(runner, "b", "/B", 12)
    settle(runner, "b", 6)
    kills = [k for b in of_type(runner, "task-kill-requested", "TaskKillRequested")
             for k in b["kills"]]
    assert len(kills) == 6 and {k["grace_period_s"] for k in kills} == {7.0}
    assert {k["job_id"] for k in kills} == {"a2"}  # started last
    assert all(k["reason"].startswith("PREEMPTED") for k in kills)


def test_without_preemption_nothing_is_taken_back() -> None:
    runner = two_pools(preemption=False)
    submit(runner, "a", "/A", 12)
    settle(runner, "a", 12)
    submit(runner, "b", "/B", 12)
    runner.run_for(6_000)
    assert not preempted(runner) and running(runner, "a") == 12 and running(runner, "b") == 0


def test_non_preemptible_work_stays_within_the_reservation_when_preemption_is_on() -> None:
    runner = two_pools()
    submit(runner, "np", "/A", 10, preemptible=False)
    settle(runner, "np", 6)
    runner.run_for(2_000)
    assert running(runner, "np") == 6
    reasons = [t["reason"] for b in of_type(runner, "tasks-admitted", "AdmissionDeferred")
               for t in b["tasks"]]
    assert any("non-preemptible work beyond reservation" in r for r in reasons)


def test_non_preemptible_work_is_never_preempted() -> None:
    runner = two_pools()
    submit(runner, "np", "/A", 6, preemptible=False)
    submit(runner, "a", "/A", 6)
    settle(runner, "a", 6)
    settle(runner, "np", 6)
    submit(runner, "b", "/B", 12)
    settle(runner, "b", 6)
    assert {t["job_id"] for t in preempted(runner)} == {"a"} and running(runner, "np") == 6


# ---- preemption within a pool --------------------------------------------------------------
def test_a_higher_priority_job_preempts_lower_priority_work_of_its_own_pool() -> None:
    runner = cluster()
    create_pool(runner, "/A", 12, 12)
    runner.run_for(1_500)
    submit(runner, "low", "/A", 12, priority=1)
    settle(runner, "low", 12)
    submit(runner, "high", "/A", 4, priority=5)
    settle(runner, "high", 4)
    victims = preempted(runner)
    assert len(victims) == 4 and {t["reason"] for t in victims} == {"HIGHER_PRIORITY_IN_POOL"}
    assert running(runner, "low") == 8


def test_in_pool_preemption_can_be_switched_off() -> None:
    runner = cluster(in_pool=False)
    create_pool(runner, "/A", 12, 12)
    runner.run_for(1_500)
    submit(runner, "low", "/A", 12, priority=1)
    settle(runner, "low", 12)
    submit(runner, "high", "/A", 4, priority=5)
    runner.run_for(4_000)
    assert not preempted(runner) and running(runner, "low") == 12
