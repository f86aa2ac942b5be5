"""The job manager partitioned by job id and the host manager by host (jobmgr/shard.py,
hostmgr/shard.py, bus/routing.py) on the in-memory runner: N instances of one consumer
group each (runner/groups.py), kill -9 and rejoin during bursts. Nothing is lost (every job
ends, as it does with one instance), no decision is made twice (no TaskStateChanged
repeated), no task runs twice at once (the watch)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from runner_scenarios import small_jobs, stuck_summary
from test_runner_workloads import SERVICE, maintenance

from peloton.bus.catalog import topic
from peloton.bus.routing import partition_for
from peloton.hostmgr.shard import HOST_ROUTE
from peloton.jobmgr.shard import JOB_ROUTE
from peloton.model.event import Event
from peloton.model.jobfile import parse_job_file
from peloton.resmgr.domain.poolbook import parse_pool_document
from peloton.runner import MemoryRunner, cluster
from peloton.runner.cluster import SERVICES, batch_job


def repeated_decisions(runner: MemoryRunner) -> list[tuple[Any, ...]]:
    """TaskStateChanged facts published more than once (same run, same state)."""
    seen = Counter((b["job_id"], c["instance"], c["run"], c["state"])
                   for _, etype, b in runner.records("job-events")
                   if etype == "TaskStateChanged" for c in b["changes"])
    return [k for k, n in seen.items() if n > 1]


def shard_books(runner: MemoryRunner, service: str) -> dict[int, Any]:
    return {int(name.removeprefix(f"{service}-p")): core.book
            for name, core in runner.cores().items() if name.startswith(f"{service}-p")}


@pytest.mark.parametrize(("seed", "jobmgrs", "hostmgrs"),
                         [(1, 2, 0), (2, 2, 0), (3, 0, 2), (4, 2, 2), (5, 3, 2)])
def test_kill_one_instance_of_each_mid_burst_then_rejoin(seed: int, jobmgrs: int,
                                                        hostmgrs: int) -> None:
    rng = random.Random(seed)
    runner = cluster(seed=seed, hosts=8, jobmgr_instances=jobmgrs,
                     hostmgr_instances=hostmgrs, redeliver=0.02)
    groups = list(runner.groups.values())
    runner.submit(small_jobs(rng, "a", 150, durations=(0.5, 1.0, 2.0)))
    runner.run_for(rng.randrange(200, 2_000))
    victims = {g.name: rng.choice(g.members) for g in groups}
    for g in groups:
        g.kill_member(victims[g.name])
    runner.submit(small_jobs(rng, "b", 100, durations=(0.5, 1.0)))
    runner.run_for(rng.randrange(3_000, 6_000))  # past the session timeout: taken over
    for g in groups:
        assert g.owned(victims[g.name]) == [] and all(runner.nodes[n].alive for n in g.owner)
        g.start_member(victims[g.name])  # rejoins: some shards move back, cleanly
    runner.submit(small_jobs(rng, "c", 50))
    assert runner.run_until(runner.watch.all_terminal, max_ms=120_000), stuck_summary(runner)
    assert runner.watch.states() == {"SUCCEEDED": 300}
    assert not runner.watch.violations and not runner.watch.reruns_after_success
    assert repeated_decisions(runner) == []
    for g in groups:
        assert g.owned(victims[g.name]) and g.moves >= len(g.shards)
    # each shard holds only the jobs (hosts) of its partition, and all of them are held
    if jobmgrs:
        books = shard_books(runner, "jobmgr")
        assert sorted(books) == list(range(JOB_ROUTE.partitions))
        for p, book in books.items():
            assert all(partition_for(j.encode(), JOB_ROUTE.partitions) == p
                       for j in book.jobs)
        assert sum(len(b.jobs) for b in books.values()) == 300
    if hostmgrs:
        books = shard_books(runner, "hostmgr")
        for p, book in books.items():
            assert all(partition_for(h.encode(), HOST_ROUTE.partitions) == p
                       for h in book.hosts)
        assert sorted(h for b in books.values() for h in b.hosts) == sorted(
            f"host-{i}" for i in range(1, 9))
        # the shards read placement-made whole (none routed through the inbox) and each
        # launched only on its own hosts
        assert "PlacementMade" not in {etype for _, etype, _ in runner.records("hostmgr-inbox")}
        launches = [(rec.producer, body["host"])
                    for rec, etype, body in runner.records("task-launch-requested")]
        assert launches and all(
            producer == f"hostmgr-p{partition_for(host.encode(), HOST_ROUTE.partitions)}"
            for producer, host in launches)


def test_partitioned_and_single_job_manager_end_every_job_alike() -> None:
    outcomes = []
    for instances in (0, 3):
        rng = random.Random(7)
        runner = cluster(seed=7, hosts=6, jobmgr_instances=instances,
                         hostmgr_instances=instances)
        runner.submit(small_jobs(rng, "j", 120, durations=(0.5, 1.5)))
        assert runner.run_until(runner.watch.all_terminal, max_ms=60_000), stuck_summary(runner)
        outcomes.append(({k: v.state for k, v in runner.watch.tasks.items()},
                         runner.watch.states()))
        assert not runner.watch.violations
    assert outcomes[0] == outcomes[1]


def test_a_group_with_no_live_instance_waits_and_resumes_where_it_was() -> None:
    rng = random.Random(4)
    runner = cluster(seed=4, hosts=6, jobmgr_instances=2)
    group = runner.groups["jobmgr"]
    runner.submit(small_jobs(rng, "x", 80))
    runner.run_for(700)
    for m in group.members:
        group.kill_member(m)
    runner.submit(small_jobs(rng, "y", 40))
    runner.run_for(5_000)
    assert not any(runner.nodes[n].alive for n in group.owner)
    assert runner.watch.unfinished()  # nobody decides while the group is empty
    group.start_member("jobmgr-2")
    assert sorted(group.owned("jobmgr-2")) == sorted(group.owner)
    assert runner.run_until(runner.watch.all_terminal, max_ms=60_000), stuck_summary(runner)
    assert runner.watch.states() == {"SUCCEEDED": 120}
    assert not runner.watch.violations and repeated_decisions(runner) == []
    moved = [n for n in runner.notes if "jobmgr-2 (jobmgr-2 joined)" in n]
    assert len(moved) == len(group.shards)


@pytest.mark.parametrize("instances", [0, 2])
def test_a_drain_with_a_partitioned_job_manager_ends_and_each_shard_accounts_once(
        instances: int) -> None:
    """With one job manager too: the old run's health reports after its replacement
    started are not a second start (the watch once flagged them)."""
    runner = cluster(seed=5, hosts=4, cpu=4.0, jobmgr_instances=instances,
                     hostmgr_instances=instances)
    web = parse_job_file(SERVICE, "web", runner.now)
    runner.submit([web] + small_jobs(random.Random(5), "b", 20, durations=(30.0,)))
    assert runner.run_until(lambda: sum(
        1 for (j, _), t in runner.watch.tasks.items() if j == "web" and t.state == "RUNNING"
    ) == 3, max_ms=60_000)
    busy = Counter(t.host for t in runner.watch.tasks.values() if t.state == "RUNNING")
    host = busy.most_common(1)[0][0]
    maintenance(runner, host, "start_maintenance")

    def host_state() -> str | None:
        states = [b["state"] for _, e, b in runner.records("host-events")
                  if e == "HostStateChanged" and b["host"] == host]
        return states[-1] if states else None

    assert runner.run_until(lambda: host_state() == "DOWN", max_ms=120_000), host_state()
    accounts = [b for _, e, b in runner.records("host-events")
                if e == "HostDrainProgressed" and b["host"] == host]
    # one account per change of a shard's own account: not two shards answering each other
    assert 0 < len(accounts) <= 4 * JOB_ROUTE.partitions
    assert not runner.watch.violations
    assert all(t.host != host for t in runner.watch.tasks.values() if t.state == "RUNNING")


def pools(runner: MemoryRunner, paths: list[str]) -> None:
    for i, path in enumerate(paths):
        config = parse_pool_document({"resources": [
            {"kind": k, "reservation": 0, "limit": 10**9, "share": 1}
            for k in ("cpu", "memory", "disk", "gpu")]}, path)[0]
        runner.publish([Event("ResourcePoolCreateRequested", path, {
            "request_id": f"pool-{i}", "at": runner.now, "path": path, "config": config})])
    runner.run_for(2_000)


@pytest.mark.parametrize(("seed", "paths"), [(1, ["/a", "/b", "/c", "/d"]),
                                             (2, ["/a", "/b", "/c", "/d"]), (3, [])])
def test_two_placement_engines_share_the_jobs_and_never_place_a_run_twice(
        seed: int, paths: list[str]) -> None:
    """Several pools, or every job in one pool (seed 3): both engines place, each only the
    runs of its share of the jobs (admissions are keyed by job, not by pool)."""
    rng = random.Random(seed)
    runner = cluster(seed=seed, hosts=6, cpu=8.0, placement_instances=2,
                     jobmgr_instances=2, hostmgr_instances=2)
    pools(runner, paths)
    jobs = small_jobs(rng, "j", 200, durations=(0.5, 1.0, 2.0))
    for job in jobs:
        job["respool"] = rng.choice([*paths, "/default"])
    runner.submit(jobs)
    runner.run_for(rng.randrange(300, 1_500))
    group = runner.groups["placement"]
    group.kill_member(rng.choice(group.members))
    assert runner.run_until(runner.watch.all_terminal, max_ms=120_000), stuck_summary(runner)
    assert runner.watch.states() == {"SUCCEEDED": 200}
    assert not runner.watch.violations and repeated_decisions(runner) == []
    made: Counter[tuple[str, int, int]] = Counter()
    engines: Counter[str] = Counter()
    for rec, etype, body in runner.records("placement-made"):
        if etype == "PlacementMade":
            engines[rec.producer] += 1
            made.update((p["job_id"], p["instance"], p["run"]) for p in body["placements"])
    refused: Counter[tuple[str, int, int]] = Counter(
        (r["job_id"], r["instance"], r["run"])
        for _, etype, body in runner.records("placement-rejected")
        for r in body["rejections"])
    assert len(engines) >= 2, engines  # both engines placed work
    # a run is placed again only after the host manager refused its placement, and the
    # engines taking turns (placement/shard.py) rarely collide
    assert all(n <= refused[run] + 1 for run, n in made.items())
    assert sum(refused.values()) <= len(made) // 20, sum(refused.values())
    # each engine placed only the runs of its share of the jobs
    n = topic("tasks-admitted").partitions
    for rec, etype, body in runner.records("placement-made"):
        if etype == "PlacementMade":
            k = int(rec.producer.removeprefix("placement-p"))
            assert all(partition_for(p["job_id"].encode(), n) == k
                       for p in body["placements"])
    # each engine read only its partition of job-events: the jobs and runs it keeps are
    # its share's, the other engines' runs it knows only for a while (foreign.py)
    boards = {int(name.removeprefix("placement-p")): core.board
              for name, core in runner.cores().items() if name.startswith("placement-p")}
    assert sorted(boards) == list(range(n))
    for k, board in boards.items():
        assert board.jobs and {partition_for(j.encode(), n) for j in board.jobs} == {k}
        assert {partition_for(key[0].encode(), n) for key in board.book.runs} <= {k}
        assert k not in {partition_for(key[0].encode(), n) for key in board.foreign.runs}
    # every admission record holds jobs of the one partition it is in
    for rec, etype, body in runner.records("tasks-admitted"):
        assert {partition_for(t["job_id"].encode(), n) for t in body["tasks"]} == \
            {rec.partition}, etype


def test_a_placement_a_router_put_in_the_inbox_before_placements_were_keyed_by_job_is_read(
) -> None:
    # before session 31 the job router split PlacementMade into jobmgr-inbox; parts left
    # there by an upgrade are still a placement to the shard that owns the job (not a
    # dead letter). No placement engine runs here, so only that part can place the run.
    services = {n: f for n, f in SERVICES.items() if n != "placement"}
    runner = cluster(seed=6, hosts=2, services=services, jobmgr_instances=2)
    runner.submit([batch_job("old-1", 1, cpu=0.1, duration_s=1.0)])
    assert runner.run_until(lambda: [t.state for t in runner.watch.tasks.values()]
                            == ["READY"], max_ms=10_000)
    part = {"at": runner.now, "round": 5, "placements": [{
        "job_id": "old-1", "instance": 0, "run": 1, "host": "host-2", "incarnation": "x",
        "resources": {"cpu": 0.1, "memory": 64.0, "disk": 0.0, "gpu": 0.0}, "ports": {},
        "config_version": 1}]}
    runner.publish([Event("PlacementMade", "old-1", part, topic="jobmgr-inbox")])
    runner.run_for(1_000)
    (task,) = runner.watch.tasks.values()
    assert (task.state, task.host) == ("PLACED", "host-2")
    assert runner.dead_letters() == 0
