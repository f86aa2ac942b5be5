"""HostBook folds do not care about order across topics (Kafka orders a partition, not the
cluster): properties over generated histories.

1. Replay: a reference host manager lives through a random history (placements, launches,
   rejections, task ends, kills before launch, host losses and new incarnations, a job
   created late). Its log, split by topic, is folded in any interleaving that keeps each
   topic's order: the result has the same host allocations and the same waiting
   placements, no run is ever counted on two hosts, and no run holds resources once its
   end has been read.
2. Live: a deciding host manager reads external facts (job events, placements, agent
   statuses) and its own events in a random cross-topic order, ticking in between: it
   never double-books a host (against what really runs), never launches a run twice, and
   never launches a run whose end it has read.
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
from hostmgr_helpers import allocations
from hypothesis import HealthCheck, given, settings

from peloton.bus.catalog import topic_for_event
from peloton.hostmgr.domain.hosts import HostBook
from peloton.model.ids import run_id
from peloton.model.resources import Resources
from peloton.model.taskstate import TERMINAL

Body = dict[str, Any]
Fact = tuple[str, Body]
HOSTS = ("h1", "h2", "h3")
PORTS = (31000, 31003)
TASKS = {"j1": 4, "j2": 3}


class History:
    """A reference host manager living through facts produced in causal order."""

    def __init__(self) -> None:
        self.ref = HostBook(heartbeat_timeout_ms=10**9, hold_ms=10**9)
        self.log: dict[str, list[Fact]] = defaultdict(list)
        self.now = 0
        self.inc = dict.fromkeys(HOSTS, 1)
        self.run = {(j, i): 1 for j, n in TASKS.items() for i in range(n)}
        self.created: set[str] = set()
        self.round = 0

    def emit(self, etype: str, body: Body) -> None:
        self.log[topic_for_event(etype).name].append((etype, body))
        self.ref.fold(etype, body, received_ms=self.now)

    def tick(self) -> None:
        self.now += 100
        for ev in self.ref.tick(self.now):
            self.log[topic_for_event(ev.type).name].append((ev.type, ev.body))
            if ev.type == "HostLost":
                self.jobmgr_loses(ev.body["runs"])

    def jobmgr_loses(self, runs: list[str]) -> None:
        for rid in runs:
            job, instance, run = rid.rsplit("-", 2)
            self.end((job, int(instance), int(run)), "LOST", agent=False)

    def end(self, key: tuple[str, int, int], state: str, agent: bool, first: bool = True,
            host: str | None = None) -> None:
        """The run ended: the agent says so (on its host) and the job manager does."""
        facts: list[Fact] = [("TaskStateChanged", task_state_changed(
            key[0], (key[1], state), run=key[2], host=host, at=self.now))]
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


def _step(h: History, data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(["place", "place", "place", "finish", "finish", "kill",
                                      "lose", "reregister", "create", "tick"]))
    if kind == "create":
        for job in sorted(set(TASKS) - h.created)[:1]:
            h.emit("JobCreated", job_created(job, TASKS[job], ports=("http",), at=h.now))
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
            h.end(data.draw(st.sampled_from(waiting)), "KILLED", agent=False)
    elif kind == "lose":
        name = data.draw(st.sampled_from(HOSTS))
        host = h.ref.hosts[name]
        if host.available:
            h.emit("HostLost", {"host": name, "incarnation": host.incarnation, "at": h.now,
                                "reason": "gone",
                                "runs": sorted(run_id(*k) for k in host.runs)})
            h.jobmgr_loses(sorted(run_id(*k) for k in host.runs))
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
    h.emit("JobCreated", job_created("j1", TASKS["j1"], ports=("http",)))
    h.created.add("j1")
    for _ in range(data.draw(st.integers(3, 25))):
        _step(h, data)
    h.tick()
    return h


def _ended(etype: str, body: Body) -> list[tuple[str, int, int]]:
    if etype == "TaskStatusReported":
        return [(s["job_id"], s["instance"], s["run"]) for s in body["statuses"]
                if s["state"] in TERMINAL]
    if etype == "TaskStateChanged":
        return [(body["job_id"], c["instance"], c["run"]) for c in body["changes"]
                if c["state"] in TERMINAL]
    return []


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_any_interleaving_of_the_topics_folds_to_the_same_allocations(
        data: st.DataObject) -> None:
    h = history(data)
    queues = {name: list(facts) for name, facts in h.log.items()}
    book = HostBook(heartbeat_timeout_ms=10**9, hold_ms=10**9)
    ended: dict[tuple[str, int], int] = {}
    while any(queues.values()):
        name = data.draw(st.sampled_from(sorted(n for n, q in queues.items() if q)))
        etype, body = queues[name].pop(0)
        book.fold(etype, body)
        for j, i, r in _ended(etype, body):
            ended[(j, i)] = max(ended.get((j, i), 0), r)
        seen: set[tuple[str, int, int]] = set()
        for host in book.hosts.values():
            for key in host.runs:
                assert key not in seen, f"{key} counted on two hosts"
                seen.add(key)
                assert key[2] > ended.get(key[:2], 0), f"{key} holds resources after its end"
    assert allocations(book) == allocations(h.ref)
    assert set(book.pending) == set(h.ref.pending)
    assert book.early == {}
    for name, host in book.hosts.items():
        assert host.allocated == h.ref.hosts[name].allocated or (
            (host.allocated - h.ref.hosts[name].allocated).is_zero())
        assert host.allocated.fits_in(host.capacity)
        assert host.used_ports == h.ref.hosts[name].used_ports


# --------------------------------------------------------------------------- live


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_a_live_host_manager_reading_topics_out_of_order_never_double_books(
        data: st.DataObject) -> None:
    book = HostBook(heartbeat_timeout_ms=10**9, hold_ms=300)
    for name in HOSTS:
        book.fold("HostRegistered", host_registered(name, cpu=2, ports=PORTS,
                                                    incarnation="i1"), received_ms=0)
    queues: dict[str, list[Fact]] = defaultdict(list)
    for job, n in TASKS.items():
        queues["job-events"].append(("JobCreated", job_created(job, n, ports=("http",))))
    running: dict[str, dict[tuple[str, int, int], tuple[Resources, set[int]]]] = {
        name: {} for name in HOSTS}  # what really runs on each host
    ever: set[tuple[str, int, int]] = set()
    ended_read: set[tuple[str, int, int]] = set()
    run = {(j, i): 1 for j, n in TASKS.items() for i in range(n)}
    now, rounds = 0, 0
    for _ in range(data.draw(st.integers(5, 40))):
        kind = data.draw(st.sampled_from(["place", "deliver", "deliver", "deliver", "tick",
                                          "agent_end", "kill"]))
        if kind == "place":
            rounds += 1
            tasks = data.draw(st.lists(st.sampled_from(sorted(run)), min_size=1, max_size=3,
                                       unique=True))
            queues["placement-made"].append(("PlacementMade", placement_made(*[
                placement(j, i, data.draw(st.sampled_from(HOSTS)), run=run[(j, i)],
                          incarnation="i1", cpu=data.draw(st.sampled_from([0.5, 1.0, 1.5])),
                          ports={"http": data.draw(st.sampled_from([31000, 31001]))})
                for j, i in tasks], round_=rounds, at=now)))
        elif kind == "deliver" and any(queues.values()):
            name = data.draw(st.sampled_from(sorted(n for n, q in queues.items() if q)))
            etype, body = queues[name].pop(0)
            book.fold(etype, body, received_ms=now)
            ended_read.update(_ended(etype, body))
        elif kind == "agent_end":
            live = sorted((k, h) for h, runs in running.items() for k in runs)
            if live:
                key, host = data.draw(st.sampled_from(live))
                del running[host][key]
                queues["task-status-reported"].append(("TaskStatusReported", agent_status(
                    host, *key[:2], "SUCCEEDED", run=key[2], incarnation="i1", at=now)))
                run[key[:2]] = max(run[key[:2]], key[2] + 1)
        elif kind == "kill":  # the job manager kills a run not known to run anywhere
            key2 = data.draw(st.sampled_from(sorted(run)))
            key = (*key2, run[key2])
            if key not in ever:
                queues["job-events"].append(("TaskStateChanged", task_state_changed(
                    key[0], (key[1], "KILLED"), run=key[2], previous="PLACED", at=now)))
                run[key2] += 1
        else:
            now += 100
            for ev in book.tick(now):
                queues[topic_for_event(ev.type).name].append((ev.type, ev.body))
                if ev.type != "TaskLaunchRequested":
                    continue
                for x in ev.body["launches"]:
                    key = (x["job_id"], x["instance"], x["run"])
                    assert key not in ever, f"{key} launched twice"
                    assert key not in ended_read, f"{key} launched after its end was read"
                    ever.add(key)
                    running[ev.body["host"]][key] = (Resources.from_mapping(x["resources"]),
                                                     set(x["ports"].values()))
            for name, runs in running.items():
                total = sum((r for r, _ in runs.values()), Resources())
                assert total.fits_in(Resources(2, 4096, 10_000)), (name, total)
                ports = [p for _, ps in runs.values() for p in ps]
                assert len(ports) == len(set(ports)), (name, ports)
