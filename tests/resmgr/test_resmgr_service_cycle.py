"""The job manager's side of preemption where the test needs an agent that does not answer
a kill: the resource manager and job manager cores wired the way the bus wires them
(routing by the catalog and the cores' input topics). The cross-service tests of pools and
preemption run on the production cores in the in-memory runner
(tests/runner/test_runner_pools_and_preemption.py); the runner's simulated agents answer
every kill at once, so the kill that arrives while runs are PREEMPTING stays here. `Sim`
also writes the leader's history for test_resmgr_service_failover.py, which folds that
log into fresh cores and needs an instant, fully deterministic history.

`Sim` plays everything else with instant, deterministic fakes: the placement engine puts
each READY run on the first host with a free cpu, hostmgr launches it, the agent reports
it RUNNING, and kills arrive as KILLED at once. Every event goes through the real codec.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from pool_jobs import job_body, pool_config

from peloton.bus.catalog import topic_for_event
from peloton.bus.codec import default_codec
from peloton.jobmgr.service import JobManagerCore
from peloton.model.event import Event
from peloton.resmgr.service import ResourceManagerCore

TERMINAL = {"SUCCEEDED", "FAILED", "LOST", "KILLED"}



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
        self.send(Event("JobSubmitted", job_id,
                        job_body(job_id, pool, n, self.now, priority, preemptible, cpu)))

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


def test_admitted_but_unplaced_victims_are_requeued_at_once() -> None:
    from peloton.jobmgr.domain.book import JobBook

    book = JobBook()
    book.handle("JobSubmitted", job_body("j", "/default", 1, 1), 2)
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
