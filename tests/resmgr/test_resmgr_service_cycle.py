"""The resource manager's cycle with pools and preemption, wired to the real job manager
core the way the bus wires them (routing by the catalog and the cores' input topics).

`Sim` plays everything else with instant, deterministic fakes: the placement engine puts
each READY run on the first host with a free cpu, hostmgr launches it, the agent reports
it RUNNING, and kills arrive as KILLED at once. Every event goes through the real codec.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from peloton.bus.catalog import topic_for_event
from peloton.bus.codec import default_codec
from peloton.jobmgr.service import JobManagerCore
from peloton.model.event import Event
from peloton.model.jobfile import parse_job_file
from peloton.model.resources import Resources
from peloton.resmgr.domain.poolbook import config_record
from peloton.resmgr.domain.poolconfig import PoolConfig
from peloton.resmgr.service import ResourceManagerCore

TERMINAL = {"SUCCEEDED", "FAILED", "LOST", "KILLED"}

JOB = """\
name: {name}
owner: team
instanceCount: {n}
respool: {pool}
sla: {{priority: {priority}, preemptible: {preemptible}}}
defaultConfig:
  resource: {{cpuLimit: {cpu}, memLimitMb: 64, diskLimitMb: 16}}
  command: {{value: "sleep 600"}}
  killGracePeriodSeconds: 7
"""


def pool_config(name: str, cpu_res: float, cpu_lim: float) -> dict[str, Any]:
    return config_record(PoolConfig.uniform(
        name, Resources(cpu_res, 1024, 1024, 0), Resources(cpu_lim, 12288, 30720, 0)))


class Sim:
    """resmgr + jobmgr cores and instant fakes for placement, hostmgr and the agents."""

    def __init__(self, hosts: int = 3, cpu: float = 4.0, cycle_ms: int = 1000,
                 preemption_cycles: int = 2, preemption: bool = True,
                 in_pool: bool = True) -> None:
        self.rm = ResourceManagerCore(cycle_ms / 1000, preemption_cycles=preemption_cycles,
                                      preemption=preemption, in_pool_preemption=in_pool)
        self.rm.manager.min_recompute_ms = 0
        self.jm = JobManagerCore()
        self.now = 1_000_000
        self.log: list[Event] = []
        self.cpu = cpu
        self.free = {f"h{i}": cpu for i in range(hosts)}
        self.on_host: dict[tuple[str, int, int], str] = {}
        self.round = 0
        self.send(Event("OfferReceived", "offers", {"at": self.now, "offers": [
            self._offer(h) for h in self.free]}))

    @staticmethod
    def _offer(host: str) -> dict[str, Any]:
        cap = {"cpu": 4.0, "memory": 4096.0, "disk": 10240.0, "gpu": 0.0}
        return {"host": host, "incarnation": f"{host}-1", "capacity": cap, "free": cap,
                "labels": {}, "generation": 1, "available": True, "port_range_begin": 31000,
                "port_range_end": 32000, "used_ports": [], "task_label_counts": {}}

    # ---- the bus ----------------------------------------------------------------------
    def send(self, *events: Event) -> None:
        queue = deque(events)
        codec = default_codec()
        while queue:
            ev = queue.popleft()
            etype, body = codec.decode(codec.encode(ev.type, ev.body))
            self.log.append(Event(etype, ev.key, body))
            name = topic_for_event(etype).name
            if name in self.rm.inputs:
                queue.extend(self.rm.handle(etype, body, self.now))
            if name in self.jm.inputs:
                queue.extend(self.jm.handle(etype, body, self.now))
            queue.extend(self._fakes(etype, body))

    def tick(self, seconds: float = 0.1) -> None:
        self.now += int(seconds * 1000)
        self.send(*self.rm.tick(self.now))
        self.send(*self._place())

    def run(self, seconds: float, step: float = 0.1) -> None:
        for _ in range(round(seconds / step)):
            self.tick(step)

    # ---- fakes: placement + hostmgr + agents ------------------------------------------
    def _fakes(self, etype: str, body: dict[str, Any]) -> list[Event]:
        if etype == "TaskStateChanged":
            for ch in body["changes"]:
                key = (body["job_id"], ch["instance"], ch["run"])
                if ch["state"] in TERMINAL and key in self.on_host:
                    self.free[self.on_host.pop(key)] += self.cpu_of(body["job_id"])
            return []
        if etype == "TaskKillRequested":
            return [self._status(body["host"], k, "KILLED") for k in body["kills"]]
        return []

    def cpu_of(self, job_id: str) -> float:
        return self.jm.book.jobs[job_id].spec.default_task.resources.cpu

    def _place(self) -> list[Event]:
        events = []
        for job_id in sorted(self.jm.book.jobs):
            job = self.jm.book.jobs[job_id]
            for t in job.tasks:
                if t.state.value != "READY":
                    continue
                cpu = self.cpu_of(job_id)
                host = next((h for h in sorted(self.free) if self.free[h] >= cpu - 1e-9), None)
                if host is None:
                    continue
                self.free[host] -= cpu
                key = (job_id, t.instance, t.run)
                self.on_host[key] = host
                self.round += 1
                res = job.spec.default_task.resources.as_dict()
                ref = {"job_id": job_id, "instance": t.instance, "run": t.run}
                events.append(Event("PlacementMade", str(self.round), {
                    "at": self.now, "round": self.round, "placements": [
                        {**ref, "host": host, "incarnation": f"{host}-1", "resources": res,
                         "ports": {}}]}))
                events.append(Event("TaskLaunchRequested", host, {
                    "host": host, "incarnation": f"{host}-1", "at": self.now, "launches": [
                        {**ref, "command": "sleep 600", "env": {}, "resources": res,
                         "ports": {}, "kill_grace_period_s": 7.0}]}))
                events.append(self._status(host, ref, "RUNNING"))
        return events

    def _status(self, host: str, ref: dict[str, Any], state: str) -> Event:
        return Event("TaskStatusReported", host, {
            "host": host, "incarnation": f"{host}-1", "at": self.now, "statuses": [
                {"job_id": ref["job_id"], "instance": ref["instance"], "run": ref["run"],
                 "state": state, "exit_code": None, "message": state.lower(),
                 "sandbox": ""}]})

    # ---- helpers ------------------------------------------------------------------------
    def create_pool(self, path: str, cpu_res: float, cpu_lim: float, rid: str = "") -> None:
        self.send(Event("ResourcePoolCreateRequested", path, {
            "request_id": rid or f"create-{path}", "at": self.now, "path": path,
            "config": pool_config(path.rsplit("/", 1)[1], cpu_res, cpu_lim)}))

    def submit(self, job_id: str, pool: str, n: int, priority: int = 1,
               preemptible: bool = True, cpu: float = 1.0) -> None:
        text = JOB.format(name=job_id, n=n, pool=pool, priority=priority,
                          preemptible=str(preemptible).lower(), cpu=cpu)
        self.send(Event("JobSubmitted", job_id, parse_job_file(text, job_id, self.now)))

    def states(self, job_id: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.jm.book.jobs[job_id].tasks:
            out[t.state.value] = out.get(t.state.value, 0) + 1
        return out

    def running(self, job_id: str) -> int:
        return self.states(job_id).get("RUNNING", 0)

    def of_type(self, etype: str) -> list[Event]:
        return [e for e in self.log if e.type == etype]


def two_pools(**kw: Any) -> Sim:
    sim = Sim(**kw)
    sim.create_pool("/A", 6, 12)
    sim.create_pool("/B", 6, 12)
    sim.tick()
    return sim


# ---- pools through events ----------------------------------------------------------------
def test_a_new_pool_is_published_at_once_and_the_job_manager_accepts_jobs_for_it() -> None:
    sim = Sim()
    sim.tick()
    sim.create_pool("/A", 6, 12)
    (created,) = sim.of_type("ResourcePoolCreated")
    assert created.body["pool"]["path"] == "/A" and created.key == "/A"
    sim.tick()
    latest = sim.of_type("EntitlementUpdated")[-1]
    assert {p["pool"] for p in latest.body["pools"]} == {"/", "/A", "/default"}
    assert sim.jm.book.leaf_pools == {"/A", "/default"}
    sim.submit("j", "/A", 2)
    assert sim.of_type("JobCreated") and not sim.of_type("JobRejected")


def test_jobs_for_a_pool_that_does_not_exist_are_rejected() -> None:
    sim = Sim()
    sim.tick()
    sim.submit("j", "/nope", 1)
    (rejected,) = sim.of_type("JobRejected")
    assert "respool: resource pool /nope does not exist" in rejected.body["reasons"]


def test_capacity_change_republishes_entitlement_without_waiting_for_the_cycle() -> None:
    sim = Sim(cycle_ms=60_000)
    sim.tick()
    before = len(sim.of_type("EntitlementUpdated"))
    lost = Sim._offer("h9")
    sim.send(Event("OfferReceived", "offers", {"at": sim.now, "offers": [lost]}))
    sim.tick()
    updates = sim.of_type("EntitlementUpdated")
    assert len(updates) == before + 1 and updates[-1].body["capacity"]["cpu"] == 16.0


def test_deleting_a_pool_with_tasks_is_refused_and_without_them_accepted() -> None:
    sim = two_pools()
    sim.submit("j", "/A", 1)
    sim.send(Event("ResourcePoolDeleteRequested", "/A",
                   {"request_id": "d1", "at": sim.now, "path": "/A"}))
    (rej,) = sim.of_type("ResourcePoolRequestRejected")
    assert rej.body["reasons"] == ["/A: tasks: pool still has tasks"]
    sim.send(Event("ResourcePoolDeleteRequested", "/B",
                   {"request_id": "d2", "at": sim.now, "path": "/B"}))
    assert [e.body["path"] for e in sim.of_type("ResourcePoolDeleted")] == ["/B"]
    sim.tick()
    assert "/B" not in sim.rm.manager.tree


# ---- preemption between pools (Peloton's system test, in-process) -------------------------
def test_second_pool_takes_back_exactly_its_reservation_from_the_first() -> None:
    sim = two_pools()
    sim.submit("a", "/A", 12)
    sim.run(1.0)
    assert sim.running("a") == 12
    sim.submit("b", "/B", 12)
    sim.run(6.0)
    preempted = [t for e in sim.of_type("TasksPreempted") for t in e.body["tasks"]]
    assert len(preempted) == 6
    assert {t["job_id"] for t in preempted} == {"a"}
    assert {t["reason"] for t in preempted} == {"POOL_OVER_ENTITLEMENT"}
    assert sim.running("a") == 6 and sim.running("b") == 6
    assert sim.states("a") == {"RUNNING": 6, "PENDING": 6}
    # the preempted runs ended KILLED (reason PREEMPTED), the next run is PENDING, and
    # preemption did not count as a failure
    for t in sim.jm.book.jobs["a"].tasks:
        if t.state.value == "PENDING":
            assert t.run == 2 and t.failures == 0 and t.reason.startswith("PREEMPTED")
    ends = [ch for e in sim.of_type("TaskStateChanged") if e.body["job_id"] == "a"
            for ch in e.body["changes"] if ch["state"] == "KILLED"]
    assert len(ends) == 6 and all(ch["reason"].startswith("PREEMPTED") for ch in ends)
    assert all(ch["previous_state"] == "PREEMPTING" for ch in ends)


def test_preemption_waits_for_the_configured_number_of_cycles() -> None:
    sim = two_pools(preemption_cycles=4)
    sim.submit("a", "/A", 12)
    sim.run(1.0)
    sim.submit("b", "/B", 12)
    sim.run(2.5)
    assert not sim.of_type("TasksPreempted")
    sim.run(2.0)
    assert sim.of_type("TasksPreempted")


def test_kills_carry_the_task_grace_period_and_victims_are_the_latest_started() -> None:
    sim = two_pools()
    sim.submit("a", "/A", 6)
    sim.run(0.5)
    sim.submit("a2", "/A", 6)
    sim.run(0.5)
    sim.submit("b", "/B", 12)
    sim.run(6.0)
    kills = [k for e in sim.of_type("TaskKillRequested") for k in e.body["kills"]]
    assert len(kills) == 6 and {k["grace_period_s"] for k in kills} == {7.0}
    assert {k["job_id"] for k in kills} == {"a2"}  # started last
    assert all(k["reason"].startswith("PREEMPTED") for k in kills)


def test_without_preemption_nothing_is_taken_back() -> None:
    sim = two_pools(preemption=False)
    sim.submit("a", "/A", 12)
    sim.run(1.0)
    sim.submit("b", "/B", 12)
    sim.run(6.0)
    assert not sim.of_type("TasksPreempted") and sim.running("a") == 12


def test_non_preemptible_work_stays_within_the_reservation_when_preemption_is_on() -> None:
    sim = two_pools()
    sim.submit("np", "/A", 10, preemptible=False)
    sim.run(2.0)
    assert sim.running("np") == 6
    reasons = [t["reason"] for e in sim.of_type("AdmissionDeferred") for t in e.body["tasks"]]
    assert any("non-preemptible work beyond reservation" in r for r in reasons)


def test_non_preemptible_work_is_never_preempted() -> None:
    sim = two_pools()
    sim.submit("np", "/A", 6, preemptible=False)
    sim.submit("a", "/A", 6)
    sim.run(1.0)
    sim.submit("b", "/B", 12)
    sim.run(6.0)
    victims = {t["job_id"] for e in sim.of_type("TasksPreempted") for t in e.body["tasks"]}
    assert victims == {"a"} and sim.running("np") == 6


# ---- preemption within a pool --------------------------------------------------------------
def test_a_higher_priority_job_preempts_lower_priority_work_of_its_own_pool() -> None:
    sim = Sim()
    sim.create_pool("/A", 12, 12)
    sim.tick()
    sim.submit("low", "/A", 12, priority=1)
    sim.run(1.0)
    assert sim.running("low") == 12
    sim.submit("high", "/A", 4, priority=5)
    sim.run(3.0)
    victims = [t for e in sim.of_type("TasksPreempted") for t in e.body["tasks"]]
    assert len(victims) == 4 and {t["reason"] for t in victims} == {"HIGHER_PRIORITY_IN_POOL"}
    assert sim.running("high") == 4 and sim.running("low") == 8


def test_in_pool_preemption_can_be_switched_off() -> None:
    sim = Sim(in_pool=False)
    sim.create_pool("/A", 12, 12)
    sim.tick()
    sim.submit("low", "/A", 12, priority=1)
    sim.run(1.0)
    sim.submit("high", "/A", 4, priority=5)
    sim.run(3.0)
    assert not sim.of_type("TasksPreempted")


def test_admitted_but_unplaced_victims_are_requeued_at_once() -> None:
    from peloton.jobmgr.domain.book import JobBook

    book = JobBook()
    text = JOB.format(name="j", n=1, pool="/default", priority=1, preemptible="true", cpu=1)
    book.handle("JobSubmitted", parse_job_file(text, "j", 1), 2)
    book.handle("TasksAdmitted", {"at": 3, "pool": "/default", "tasks": [
        {"job_id": "j", "instance": 0, "run": 1}]}, 3)
    assert book.jobs["j"].tasks[0].state.value == "READY"
    events = book.handle("TasksPreempted", {"at": 4, "pool": "/default", "tasks": [
        {"job_id": "j", "instance": 0, "run": 1, "reason": "POOL_OVER_ENTITLEMENT",
         "detail": "pool /default over entitlement"}]}, 4)
    changes = [ch for e in events if e.type == "TaskStateChanged" for ch in e.body["changes"]]
    assert [(c["run"], c["state"]) for c in changes] == [(1, "KILLED"), (2, "PENDING")]
    assert all(c["reason"].startswith("PREEMPTED") and c["failures"] == 0 for c in changes)
    assert not [e for e in events if e.type == "TaskKillRequested"]
    # a repeated or stale preemption changes nothing
    assert book.handle("TasksPreempted", {"at": 5, "pool": "/default", "tasks": [
        {"job_id": "j", "instance": 0, "run": 1, "reason": "POOL_OVER_ENTITLEMENT",
         "detail": ""}]}, 5) == []


def test_a_user_kill_during_preemption_is_not_requeued() -> None:
    sim = two_pools()
    sim.submit("a", "/A", 12)
    sim.run(1.0)
    sim.submit("b", "/B", 12)
    # stop the fake agent from answering kills, so tasks stay PREEMPTING
    fakes = sim._fakes
    sim._fakes = lambda etype, body: [] if etype == "TaskKillRequested" else fakes(etype, body)
    sim.run(3.0)
    preempting = [t.instance for t in sim.jm.book.jobs["a"].tasks
                  if t.state.value == "PREEMPTING"]
    assert len(preempting) == 6
    sim.send(Event("JobKillRequested", "a", {"job_id": "a", "at": sim.now, "instances": [],
                                            "reason": "done"}))
    sim._fakes = fakes
    for i in preempting:
        sim.send(sim._status(sim.on_host[("a", i, 1)], {"job_id": "a", "instance": i, "run": 1},
                             "KILLED"))
    assert all(sim.jm.book.jobs["a"].tasks[i].run == 1 for i in preempting)
