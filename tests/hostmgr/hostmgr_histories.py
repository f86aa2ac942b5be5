"""Generated host manager histories, for properties over fold order and snapshots (not a
test module).

`history(data)` lets a reference HostBook live through random facts produced in causal
order (placements, launches, rejections, task ends, kills before launch, host losses and
new incarnations, a job created late, config versions of jobs: placements of a version
whose JobSpecChanged comes later; j1 is stateful, so its ended runs' room is held);
`History.log` holds them split by topic.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import hypothesis.strategies as st
from event_bodies import (
    agent_status,
    host_registered,
    job_created,
    placement,
    placement_made,
    task_state_changed,
)
from hostmgr_helpers import assert_caches_exact

from peloton.bus.catalog import topic_for_event
from peloton.hostmgr.domain.hosts import HostBook
from peloton.model.ids import run_id
from peloton.model.taskstate import TERMINAL

__all__ = ["Body", "Fact", "HOSTS", "PORTS", "TASKS", "History", "history", "ended_runs",
           "created", "holds"]

Body = dict[str, Any]
Fact = tuple[str, Body]
HOSTS = ("h1", "h2", "h3")
PORTS = (31000, 31003)
TASKS = {"j1": 4, "j2": 3}
STATEFUL = {"j1"}  # its runs launch with a volume: their ends hold their room


def created(job: str, **kw: Any) -> Body:
    """JobCreated of a history's job (j2's tasks are stateful: they have a volume)."""
    body = job_created(job, TASKS[job], ports=("http",), **kw)
    if job in STATEFUL:
        body["type"] = "STATEFUL"
        body["default_task"] = {**body["default_task"], "volume": "/data"}
    return body


def holds(book: HostBook) -> dict[str, dict[tuple[str, int], Any]]:
    """Every host's room holds, for comparing books."""
    return {name: dict(h.holds) for name, h in book.hosts.items() if h.holds}


class History:
    """A reference host manager living through facts produced in causal order."""

    def __init__(self) -> None:
        self.ref = HostBook(heartbeat_timeout_ms=10**9, hold_ms=10**9)
        self.log: dict[str, list[Fact]] = defaultdict(list)
        self.now = 0
        self.inc = dict.fromkeys(HOSTS, 1)
        self.run = {(j, i): 1 for j, n in TASKS.items() for i in range(n)}
        self.created: set[str] = set()
        self.versions: dict[str, int] = {}  # job -> newest config version emitted
        self.round = 0

    def emit(self, etype: str, body: Body) -> None:
        self.log[topic_for_event(etype).name].append((etype, body))
        self.ref.fold(etype, body, received_ms=self.now)

    def tick(self) -> None:
        self.now += 100
        assert_caches_exact(self.ref)
        for ev in self.ref.tick(self.now):
            self.log[topic_for_event(ev.type).name].append((ev.type, ev.body))
            if ev.type == "HostLost":
                self.jobmgr_loses(ev.body["runs"])

    def jobmgr_loses(self, runs: list[str]) -> None:
        for rid in runs:
            job, instance, run = rid.rsplit("-", 2)
            self.end((job, int(instance), int(run)), "LOST", agent=False)

    def end(self, key: tuple[str, int, int], state: str, agent: bool, first: bool = True,
            host: str | None = None, previous: str = "RUNNING") -> None:
        """The run ended: the agent says so (on its host) and the job manager does (from
        `previous`: RUNNING for a run it saw launched, PLACED for a kill before that)."""
        facts: list[Fact] = [("TaskStateChanged", task_state_changed(
            key[0], (key[1], state), run=key[2], host=host, at=self.now,
            previous=previous))]
        if agent and host is not None:
            facts.append(("TaskStatusReported", agent_status(
                host, key[0], key[1], state, run=key[2], at=self.now,
                incarnation=f"i{self.inc[host]}")))
            if first:
                facts.reverse()
        for etype, body in facts:
            self.emit(etype, body)
        self.run[key[:2]] = max(self.run[key[:2]], key[2] + 1)

    def launched(self) -> dict[tuple[str, int, int], str]:
        return {k: name for name, h in self.ref.hosts.items() for k in h.runs}


def step(h: History, data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(["place", "place", "place", "finish", "finish", "kill",
                                      "lose", "reregister", "create", "tick",
                                      "maintain", "update"]))
    if kind == "create":
        for job in sorted(set(TASKS) - h.created)[:1]:
            h.emit("JobCreated", created(job, at=h.now))
            h.created.add(job)
    elif kind == "place":
        on_host = h.launched()
        free = [(j, i) for (j, i), r in sorted(h.run.items())
                if j in h.created and (j, i, r) not in on_host]
        if not free:
            return
        batch = []
        for j, i in data.draw(st.lists(st.sampled_from(free), min_size=1, max_size=3,
                                       unique=True)):
            host = data.draw(st.sampled_from(HOSTS))
            stale = h.inc[host] > 1 and data.draw(st.integers(0, 4)) == 0
            port = data.draw(st.sampled_from([None, 31000, 31001, 31003]))
            batch.append(placement(
                j, i, host, run=h.run[(j, i)], incarnation=f"i{h.inc[host] - stale}",
                cpu=data.draw(st.sampled_from([0.5, 1.0, 2.0])),
                ports={"http": port} if port else None))
            # a known config version, or the next one (its JobSpecChanged may come later)
            batch[-1]["config_version"] = data.draw(st.integers(1, h.versions.get(j, 1) + 1))
        h.round += 1
        h.emit("PlacementMade", placement_made(*batch, round_=h.round, at=h.now))
        h.tick()
    elif kind == "finish":
        on_host = h.launched()
        if not on_host:
            return
        key = data.draw(st.sampled_from(sorted(on_host)))
        h.end(key, data.draw(st.sampled_from(["SUCCEEDED", "FAILED", "KILLED"])),
              agent=True, first=data.draw(st.booleans()), host=on_host[key])
    elif kind == "kill":
        on_host = h.launched()
        waiting = [(j, i, r) for (j, i), r in sorted(h.run.items())
                   if j in h.created and (j, i, r) not in on_host]
        if waiting:
            h.end(data.draw(st.sampled_from(waiting)), "KILLED", agent=False,
                  previous="PLACED")
    elif kind == "lose":
        name = data.draw(st.sampled_from(HOSTS))
        record = h.ref.hosts[name]
        if record.available:
            runs = sorted(run_id(*k) for k in record.runs)  # before the loss releases them
            h.emit("HostLost", {"host": name, "incarnation": record.incarnation, "at": h.now,
                                "reason": "gone", "runs": runs})
            h.jobmgr_loses(runs)
    elif kind == "maintain":  # any command, any host: decided (or refused) at the tick
        command = data.draw(st.sampled_from(["start_maintenance", "complete_maintenance",
                                             "cancel_maintenance"]))
        h.emit("HostMaintenanceRequested", {
            "host": data.draw(st.sampled_from(HOSTS)), "command": command,
            "deadline_ms": None, "requested_by": "", "at": h.now})
        h.tick()
    elif kind == "update":  # a rolling update's next config version of a created job
        job = data.draw(st.sampled_from(sorted(h.created)))
        version = h.versions[job] = h.versions.get(job, 1) + 1
        h.emit("JobSpecChanged", {
            **created(job, command=f"run v{version}", at=h.now), "version": version,
            "update_id": f"u{version}"})
    elif kind == "reregister":
        name = data.draw(st.sampled_from(HOSTS))
        h.inc[name] += 1
        h.emit("HostRegistered", host_registered(name, cpu=2, ports=PORTS, at=h.now,
                                                 incarnation=f"i{h.inc[name]}"))
        h.tick()
    else:
        h.tick()


def history(data: st.DataObject) -> History:
    h = History()
    for name in HOSTS:
        h.emit("HostRegistered", host_registered(name, cpu=2, ports=PORTS, incarnation="i1"))
    h.emit("JobCreated", created("j1"))
    h.created.add("j1")
    for _ in range(data.draw(st.integers(3, 16))):
        step(h, data)
    h.tick()
    return h


def ended_runs(etype: str, body: Body) -> list[tuple[str, int, int]]:
    if etype == "TaskStatusReported":
        return [(s["job_id"], s["instance"], s["run"]) for s in body["statuses"]
                if s["state"] in TERMINAL]
    if etype == "TaskStateChanged":
        return [(body["job_id"], c["instance"], c["run"]) for c in body["changes"]
                if c["state"] in TERMINAL]
    return []
