"""HostBook folds do not care about order across topics (Kafka orders a partition, not the
cluster): properties over generated histories.

1. Replay: a reference host manager lives through a random history (placements, launches,
   rejections, task ends, kills before launch, host losses and new incarnations, a job
   created late; hostmgr_histories.py). Its log, split by topic, is folded in any
   interleaving that keeps each topic's order: the result has the same host allocations
   and the same waiting placements, no run is ever counted on two hosts, and no run
   holds resources once its own end has been read (a later run's end does not free an
   earlier run: that one may be a stray launch still running); the room held for the
   stateful job's tasks between runs is the same too.
2. Live: a deciding host manager reads external facts (job events, placements, agent
   statuses) and its own events in a random cross-topic order, ticking in between: it
   never double-books a host (against what really runs), never launches a run twice, and
   never launches a run whose end it has read.

Histories are kept small (a few dozen facts, a few dozen examples) so that the whole
directory runs in seconds, and a failure shrinks in seconds too (a failing property over
long histories once shrank past the suite's 300 s timeout and looked like a hang; what
it had found is pinned by the named examples below). Runs of 700 random examples with
histories up to 30 steps pass too: widen `max_examples` and the step range to soak.
"""

from __future__ import annotations

from collections import defaultdict

import hypothesis.strategies as st
from event_bodies import (
    agent_status,
    host_registered,
    job_created,
    launch,
    launch_requested,
    placement,
    placement_made,
    task_state_changed,
)
from hostmgr_helpers import allocations
from hostmgr_histories import HOSTS, PORTS, TASKS, Fact, created, ended_runs, history, holds
from hypothesis import HealthCheck, given, settings

from peloton.bus.catalog import topic_for_event
from peloton.hostmgr.domain.hosts import HostBook
from peloton.model.resources import Resources


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_any_interleaving_of_the_topics_folds_to_the_same_allocations(
        data: st.DataObject) -> None:
    h = history(data)
    queues = {name: list(facts) for name, facts in h.log.items()}
    book = HostBook(heartbeat_timeout_ms=10**9, hold_ms=10**9)
    ended: set[tuple[str, int, int]] = set()
    while any(queues.values()):
        name = data.draw(st.sampled_from(sorted(n for n, q in queues.items() if q)))
        etype, body = queues[name].pop(0)
        book.fold(etype, body)
        for j, i, r in ended_runs(etype, body):
            ended.add((j, i, r))
        seen: set[tuple[str, int, int]] = set()
        for host in book.hosts.values():
            for key in host.runs:
                assert key not in seen, f"{key} counted on two hosts"
                seen.add(key)
                assert key not in ended, f"{key} holds resources after its end"
    assert allocations(book) == allocations(h.ref)
    assert holds(book) == holds(h.ref)
    assert set(book.pending) == set(h.ref.pending)
    assert book.early == {}
    for name, host in book.hosts.items():
        assert host.allocated == h.ref.hosts[name].allocated or (
            (host.allocated - h.ref.hosts[name].allocated).is_zero())
        assert host.allocated.fits_in(host.capacity)
        assert host.used_ports == h.ref.hosts[name].used_ports


def test_an_earlier_runs_end_read_after_the_next_runs_launch_does_not_free_its_port() -> None:
    """Found by the property above: on replay our own launches (one topic) are read before
    the agent's status of run 1 (another topic); run 2 got run 1's port after run 1 ended,
    so for a while both hold it. Run 1's end must not free the port run 2 holds."""
    book = HostBook()
    book.fold("HostRegistered", host_registered("h1", ports=PORTS))
    book.fold("JobCreated", job_created("j1", 2, ports=("http",)))
    for run, at in ((1, 10), (2, 20)):
        book.fold("TaskLaunchRequested", launch_requested(
            "h1", launch("j1", 0, run=run, ports={"http": 31003}), at=at))
    book.fold("TaskStatusReported", agent_status("h1", "j1", 0, "FAILED", run=1, at=15))
    host = book.hosts["h1"]
    assert set(host.runs) == {("j1", 0, 2)} and set(host.used_ports) == {31003}
    (offer,) = [o for ev in book.tick(100) if ev.type == "OfferReceived"
                for o in ev.body["offers"]]
    assert offer["used_ports"] == [31003]
    book.fold("PlacementMade", placement_made(placement(
        "j1", 1, "h1", ports={"http": 31003}), round_=7), received_ms=100)
    assert not [ev for ev in book.tick(200) if ev.type == "TaskLaunchRequested"]


# --------------------------------------------------------------------------- live


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_a_live_host_manager_reading_topics_out_of_order_never_double_books(
        data: st.DataObject) -> None:
    book = HostBook(heartbeat_timeout_ms=10**9, hold_ms=300)
    for name in HOSTS:
        book.fold("HostRegistered", host_registered(name, cpu=2, ports=PORTS,
                                                    incarnation="i1"), received_ms=0)
    queues: dict[str, list[Fact]] = defaultdict(list)
    for job in TASKS:
        queues["job-events"].append(("JobCreated", created(job)))
    running: dict[str, dict[tuple[str, int, int], tuple[Resources, set[int]]]] = {
        name: {} for name in HOSTS}  # what really runs on each host
    ever: set[tuple[str, int, int]] = set()
    ended_read: set[tuple[str, int, int]] = set()
    run = {(j, i): 1 for j, n in TASKS.items() for i in range(n)}
    now, rounds = 0, 0
    for _ in range(data.draw(st.integers(5, 30))):
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
            ended_read.update(ended_runs(etype, body))
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
