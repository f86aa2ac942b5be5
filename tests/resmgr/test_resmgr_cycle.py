"""ResourceManager.tick(): entitlement and admission over the folded ledger.

Named examples (admit what fits, gangs whole, deferral reasons published only when what
they say changes, EntitlementUpdated's shape and cadence) and a property: over random jobs, hosts
and completions, admission never takes the default pool past its entitlement or the
cluster past its capacity, never admits a run twice and admits gangs whole.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from event_bodies import (
    host_lost,
    job_created,
    offer,
    offer_received,
    task_state_changed,
)
from hypothesis import HealthCheck, given, settings

from peloton.bus.codec import default_codec
from peloton.model.event import Event
from peloton.model.resources import Resources
from peloton.resmgr.domain.cycle import ResourceManager

CYCLE_MS = 10_000


def cluster(*cpus: float, mem: float = 10_000.0) -> ResourceManager:
    """A resource manager that has seen one offer per host (h0, h1, ...)."""
    rm = ResourceManager(entitlement_cycle_ms=CYCLE_MS, min_recompute_ms=200)
    rm.fold("OfferReceived", offer_received(*(offer(f"h{i}", cpu=c, mem=mem)
                                              for i, c in enumerate(cpus))))
    return rm


def submit(rm: ResourceManager, job_id: str, n: int, **kw: Any) -> None:
    """The job manager's facts for a new job: JobCreated, then every task PENDING."""
    rm.fold("JobCreated", job_created(job_id, n, **kw))
    rm.fold("TaskStateChanged", task_state_changed(job_id, *((i, "PENDING") for i in range(n)),
                                                   previous="INITIALIZED"))


def finish(rm: ResourceManager, job_id: str, *instances: int, run: int = 1) -> None:
    rm.fold("TaskStateChanged", task_state_changed(job_id, *((i, "SUCCEEDED")
                                                             for i in instances),
                                                   run=run, previous="RUNNING", host="h0"))


def of(events: list[Event], etype: str) -> list[Event]:
    return [e for e in events if e.type == etype]


def admitted(events: list[Event]) -> list[tuple[str, int]]:
    return [(t["job_id"], t["instance"]) for e in of(events, "TasksAdmitted")
            for t in e.body["tasks"]]


def deferred(events: list[Event]) -> list[tuple[str, int, str]]:
    return [(t["job_id"], t["instance"], t["reason"]) for e in of(events, "AdmissionDeferred")
            for t in e.body["tasks"]]


def pool_row(event: Event, pool: str) -> dict[str, Any]:
    (row,) = [r for r in event.body["pools"] if r["pool"] == pool]
    return row


# --------------------------------------------------------------------- examples


def test_admits_what_fits_and_defers_the_rest_with_a_reason() -> None:
    rm = cluster(4)
    submit(rm, "j1", 6, cpu=1, mem=10)
    out = rm.tick(0)
    assert [e.type for e in out] == ["EntitlementUpdated", "TasksAdmitted", "AdmissionDeferred"]
    assert admitted(out) == [("j1", i) for i in range(4)]
    assert of(out, "TasksAdmitted")[0].key == "j1"  # keyed by its first task's job
    assert of(out, "TasksAdmitted")[0].body["pool"] == "/default"
    assert deferred(out) == [("j1", 4, "pool over entitlement: cpu 5/4"),
                             ("j1", 5, "pool over entitlement: cpu 5/4")]


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=12),
       shards=st.integers(1, 4), cpus=st.integers(4, 40))
def test_each_batch_holds_jobs_of_one_shard(sizes: list[int], shards: int, cpus: int) -> None:
    """With `shard_of_job` (the partition of tasks-admitted a job's records land in),
    every TasksAdmitted and AdmissionDeferred holds runs of jobs of one shard only, keyed by
    its first task's job, and together they say exactly what one batch per pool said."""
    def shard(job_id: str) -> int:
        return int(job_id.removeprefix("j")) % shards

    outs = []
    for shard_of_job in (None, shard):
        rm = ResourceManager(entitlement_cycle_ms=CYCLE_MS, min_recompute_ms=200,
                             shard_of_job=shard_of_job)
        rm.fold("OfferReceived", offer_received(offer("h0", cpu=cpus, mem=10_000.0)))
        for j, n in enumerate(sizes):
            submit(rm, f"j{j}", n, cpu=1, mem=10)
        outs.append(rm.tick(0))
    whole, sharded = outs
    assert sorted(admitted(sharded)) == sorted(admitted(whole))
    assert sorted(deferred(sharded)) == sorted(deferred(whole))
    for ev in of(sharded, "TasksAdmitted") + of(sharded, "AdmissionDeferred"):
        assert len({shard(t["job_id"]) for t in ev.body["tasks"]}) == 1
        assert ev.key == ev.body["tasks"][0]["job_id"]
    # one batch per pool and shard that has runs
    assert len(of(sharded, "TasksAdmitted")) == len({shard(j) for j, _ in admitted(whole)})


def test_admitted_runs_are_not_admitted_again() -> None:
    rm = cluster(4)
    submit(rm, "j1", 2)
    first = rm.tick(0)
    assert admitted(first) == [("j1", 0), ("j1", 1)]
    for ev in first:  # the service reads its own records back
        rm.fold(ev.type, ev.body)
    assert rm.tick(300) == []
    assert rm.tick(600) == []


def test_released_capacity_admits_waiting_tasks_in_order() -> None:
    rm = cluster(2)
    submit(rm, "j1", 5)
    assert admitted(rm.tick(0)) == [("j1", 0), ("j1", 1)]
    finish(rm, "j1", 1)
    assert admitted(rm.tick(300)) == [("j1", 2)]
    finish(rm, "j1", 0, 2)
    assert admitted(rm.tick(600)) == [("j1", 3), ("j1", 4)]


def test_a_tick_is_wanted_when_runs_begin_to_wait_not_when_runs_end() -> None:
    rm = cluster(2)
    assert not rm.tick_wanted()
    submit(rm, "j1", 3)
    assert rm.tick_wanted()  # new runs to admit: the shell ticks soon
    rm.tick(0)
    assert not rm.tick_wanted()
    finish(rm, "j1", 1)  # room freed: the timer's next tick admits into it
    assert not rm.tick_wanted()
    rm.fold("TaskStateChanged", task_state_changed("j1", (0, "FAILED"), previous="RUNNING"))
    assert not rm.tick_wanted()
    rm.fold("TaskStateChanged", task_state_changed("j1", (0, "PENDING"), run=2,
                                                   previous="INITIALIZED"))
    assert rm.tick_wanted()  # a retry waits again
    assert admitted(rm.tick(300)) == [("j1", 0), ("j1", 2)]
    assert not rm.tick_wanted()


def test_higher_priority_jobs_are_admitted_first() -> None:
    rm = cluster(2)
    submit(rm, "low", 2, priority=0)
    submit(rm, "high", 2, priority=5)
    assert admitted(rm.tick(0)) == [("high", 0), ("high", 1)]


def test_a_retried_run_is_pending_again() -> None:
    rm = cluster(1)
    submit(rm, "j1", 1)
    assert admitted(rm.tick(0)) == [("j1", 0)]
    rm.fold("TaskStateChanged", task_state_changed("j1", (0, "FAILED"), previous="RUNNING"))
    rm.fold("TaskStateChanged", task_state_changed("j1", (0, "PENDING"), run=2,
                                                   previous="INITIALIZED"))
    out = rm.tick(300)
    assert [(t["job_id"], t["instance"], t["run"]) for e in of(out, "TasksAdmitted")
            for t in e.body["tasks"]] == [("j1", 0, 2)]


def test_a_gang_is_admitted_whole_or_not_at_all() -> None:
    rm = cluster(2)
    submit(rm, "g", 4, min_running=3)  # instances 0-2 form a gang of 3 cpus
    out = rm.tick(0)
    assert admitted(out) == [("g", 3)]  # the single behind the gang is backfilled
    assert deferred(out) == [("g", i, "pool over entitlement: cpu 3/2") for i in range(3)]
    rm.fold("OfferReceived", offer_received(offer("h1", cpu=2)))
    out = rm.tick(300)
    assert admitted(out) == [("g", 0), ("g", 1), ("g", 2)]
    assert len(of(out, "TasksAdmitted")) == 1  # one batch: the gang starts together


def test_a_gang_member_pending_alone_waits_for_the_others() -> None:
    # the job manager's PENDING facts of a gang's members may arrive in several records:
    # a member read alone is a gang of one run that needs three, never a single
    rm = cluster(8)
    rm.fold("JobCreated", job_created("g", 3, min_running=3))
    rm.fold("TaskStateChanged", task_state_changed("g", (1, "PENDING"), previous="INITIALIZED"))
    out = rm.tick(0)
    assert admitted(out) == []
    assert deferred(out) == [("g", 1, "waiting for 2 more gang members")]
    rm.fold("TaskStateChanged", task_state_changed("g", (0, "PENDING"), (2, "PENDING"),
                                                   previous="INITIALIZED"))
    out = rm.tick(300)
    assert admitted(out) == [("g", 0), ("g", 1), ("g", 2)]
    assert len(of(out, "TasksAdmitted")) == 1


def test_a_revocable_gang_is_no_gang() -> None:
    rm = cluster(8)
    submit(rm, "r", 3, min_running=3, revocable=True)
    out = rm.tick(0)
    assert deferred(out) == [] or all("gang" not in r for _, _, r in deferred(out))


def test_deferral_reasons_are_published_only_when_what_they_say_changes() -> None:
    rm = cluster(4)
    submit(rm, "j1", 6, mem=10)
    assert deferred(rm.tick(0)) == [("j1", 4, "pool over entitlement: cpu 5/4"),
                                    ("j1", 5, "pool over entitlement: cpu 5/4")]
    assert rm.tick(300) == []
    rm.fold("OfferReceived", offer_received(offer("mem-only", cpu=0, mem=5000)))
    out = rm.tick(600)  # capacity changed, the cpu shortfall did not
    assert admitted(out) == [] and deferred(out) == []
    rm.fold("OfferReceived", offer_received(offer("h1", cpu=1)))
    out = rm.tick(900)
    assert admitted(out) == [("j1", 4)]
    # j1/5 still waits for cpu: the figures moved (now cpu 6/5), what it says did not
    assert deferred(out) == []


def _fold_back(rm: ResourceManager, events: list[Event]) -> list[Event]:
    """Fold a tick's admission decisions back, as the log brings them."""
    for ev in events:
        if ev.type in ("TasksAdmitted", "AdmissionDeferred"):
            rm.fold(ev.type, ev.body)
    return events


def test_a_draining_queue_is_not_explained_again_at_every_admission() -> None:
    """One cpu frees per tick behind a queue of 40 one-cpu runs: once the oldest blocked
    run reserves the budget, every run behind it is held back, and each admission makes
    the next run the reserving one. Only runs whose reason says something new are
    published again (a queue of 80,000 runs republished every reason each tick)."""
    rm = cluster(4)
    submit(rm, "q", 44)
    first = _fold_back(rm, rm.tick(0))
    assert len(admitted(first)) == 4 and len(deferred(first)) == 40
    now, republished, held = 0, [], set()
    for k in range(12):
        finish(rm, "q", k)
        now += 300
        out = _fold_back(rm, rm.tick(now))
        assert admitted(out) == [("q", 4 + k)]
        republished.append(len(deferred(out)))
        held |= {r for _, _, r in deferred(out) if r.startswith("held back")}
    # the queue is held back once (every run behind the reserving one, in one tick), then
    # each tick re-explains only the run that becomes the reserving one
    big = max(republished)
    assert len(held) == 1 and big > 30
    assert all(n <= 1 for n in republished if n != big) and republished.count(big) == 1


def test_entitlement_updated_shape() -> None:
    rm = cluster(4, 8, mem=1000)
    rm.fold("OfferReceived", offer_received(offer("down", cpu=100, available=False)))
    submit(rm, "j1", 3, cpu=2, mem=10)
    (ev,) = of(rm.tick(0), "EntitlementUpdated")
    codec = default_codec()
    assert codec.decode(codec.encode(ev.type, ev.body)) == (ev.type, ev.body)
    assert ev.key == "cluster" and ev.body["at"] == 0 and ev.body["cycle"] == 1
    assert ev.body["capacity"] == {"cpu": 12.0, "memory": 2000.0, "disk": 0.0, "gpu": 0.0}
    assert [(r["pool"], r["parent"]) for r in ev.body["pools"]] == [("/", None),
                                                                    ("/default", "/")]
    default = pool_row(ev, "/default")
    assert default["demand"] == {"cpu": 6.0, "memory": 30.0, "disk": 0.0, "gpu": 0.0}
    assert default["allocation"] == {"cpu": 0.0, "memory": 0.0, "disk": 0.0, "gpu": 0.0}
    assert Resources.from_mapping(default["entitlement"]).fits_in(Resources(12, 2000))
    assert default["entitlement"]["cpu"] == pytest.approx(12.0)  # the only pool gets all
    assert pool_row(ev, "/")["entitlement"]["cpu"] == pytest.approx(12.0)


def test_entitlement_is_published_every_cycle_and_sooner_when_it_changes() -> None:
    rm = cluster(4)
    assert [e.body["cycle"] for e in of(rm.tick(0), "EntitlementUpdated")] == [1]
    assert of(rm.tick(CYCLE_MS - 1), "EntitlementUpdated") == []
    assert [e.body["cycle"] for e in of(rm.tick(CYCLE_MS), "EntitlementUpdated")] == [2]
    rm.fold("HostLost", host_lost("h0"))
    out = of(rm.tick(CYCLE_MS + 2000), "EntitlementUpdated")
    assert [e.body["cycle"] for e in out] == [3]
    assert out[0].body["capacity"]["cpu"] == 0.0
    assert rm.tick(CYCLE_MS + 2300) == []


def test_nothing_is_admitted_before_any_capacity_is_known() -> None:
    rm = ResourceManager()
    submit(rm, "j1", 1)
    out = rm.tick(0)
    assert admitted(out) == []
    assert deferred(out) == [("j1", 0, "pool over entitlement: cpu 1/0, memory 64/0")]


# ------------------------------------------------------------------- property


@st.composite
def workloads(draw: st.DrawFn) -> tuple[list[float], list[tuple[str, Any]]]:
    hosts = draw(st.lists(st.sampled_from([1.0, 2.0, 4.0, 8.0]), min_size=1, max_size=3))
    steps: list[tuple[str, Any]] = []
    for j in range(draw(st.integers(1, 4))):
        n = draw(st.integers(1, 5))
        steps.append(("submit", (f"j{j}", n, draw(st.sampled_from([0.5, 1.0, 2.0, 3.0])),
                                 draw(st.integers(1, n)), draw(st.integers(0, 2)))))
        for _ in range(draw(st.integers(0, 4))):
            kind = draw(st.sampled_from(["tick", "tick", "finish"]))
            steps.append((kind, draw(st.integers(0, 10**6))))
    steps += [("tick", 0), ("finish", 0), ("tick", 0), ("tick", 0)]
    return hosts, steps


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_admission_stays_within_entitlement_and_capacity(
    workload: tuple[list[float], list[tuple[str, Any]]],
) -> None:
    hosts, steps = workload
    rm = cluster(*hosts, mem=10_000)
    capacity = Resources(sum(hosts), 10_000 * len(hosts))
    now = 0
    admitted_runs: set[tuple[str, int, int]] = set()
    gangs: dict[str, int] = {}
    for kind, arg in steps:
        if kind == "submit":
            job_id, n, cpu, min_running, priority = arg
            submit(rm, job_id, n, cpu=cpu, mem=10, min_running=min_running, priority=priority)
            gangs[job_id] = min_running
            continue
        if kind == "finish":
            holding = sorted(k for k, e in rm.ledger.tasks.items() if rm.holding(e))
            if holding:
                job_id, instance = holding[arg % len(holding)]
                finish(rm, job_id, instance, run=rm.ledger.tasks[(job_id, instance)].run)
            continue
        now += 250
        out = rm.tick(now)
        batch = [(t["job_id"], t["instance"], t["run"]) for e in of(out, "TasksAdmitted")
                 for t in e.body["tasks"]]
        assert len(batch) == len(set(batch)) and not set(batch) & admitted_runs
        admitted_runs |= set(batch)
        held = sum((e.resources for e in rm.ledger.tasks.values() if rm.holding(e)),
                   Resources())
        assert held.fits_in(capacity), (held, capacity)
        if batch:
            ent = rm.entitlements["/default"].nonslack_entitlement
            assert held.fits_in(ent), (held, ent)
            assert ent.fits_in(capacity)
        for job_id, gang in gangs.items():  # run-1 gang members start in the same tick
            members = {(job_id, i, 1) for i in range(gang)} if gang > 1 else set()
            assert not members & set(batch) or members <= set(batch)


# ------------------------------------------------------------------------ bugs


def test_a_retried_gang_member_is_admitted_while_the_gang_runs() -> None:
    rm = cluster(8)
    submit(rm, "g", 3, min_running=3)
    assert admitted(rm.tick(0)) == [("g", 0), ("g", 1), ("g", 2)]
    rm.fold("TaskStateChanged", task_state_changed("g", (1, "RUNNING"), (2, "RUNNING"),
                                                   previous="STARTING", host="h0"))
    rm.fold("TaskStateChanged", task_state_changed("g", (0, "FAILED"), previous="RUNNING"))
    rm.fold("TaskStateChanged", task_state_changed("g", (0, "PENDING"), run=2,
                                                   previous="INITIALIZED"))
    out = rm.tick(300) + rm.tick(CYCLE_MS) + rm.tick(2 * CYCLE_MS)
    assert ("g", 0) in admitted(out), deferred(out)


def test_entitlement_is_published_every_cycle_while_tasks_make_progress() -> None:
    rm = cluster(8)
    submit(rm, "j1", 200)
    assert len(of(rm.tick(0), "EntitlementUpdated")) == 1
    submit(rm, "j2", 50)  # more demand: a new result, computed soon after that publish
    published = []
    for k in range(1, 3 * CYCLE_MS // 300):
        # some admitted task moves on every 300 ms (no requirement changes)
        state = ("READY", "PLACED", "LAUNCHING", "RUNNING")[(k // 8) % 4]
        rm.fold("TaskStateChanged", task_state_changed("j1", (k % 8, state), previous=""))
        published += of(rm.tick(k * 300), "EntitlementUpdated")
    assert len(published) >= 2
    assert pool_row(published[0], "/default")["demand"]["cpu"] == 242.0


def test_waiting_tasks_are_not_deferred_again_while_nothing_changes_for_them() -> None:
    rm = cluster(4, 4)
    submit(rm, "j1", 40)
    rm.tick(0)  # 8 admitted, 32 deferred
    rm.fold("HostLost", host_lost("h1"))  # over entitlement now: nothing fits for a while
    for k in range(1, 6):
        rm.fold("TaskStateChanged", task_state_changed("j1", (k, "READY")))
        rm.tick(k * 300)
    repeated = []
    for k in range(6, 12):  # unrelated progress of running tasks
        rm.fold("TaskStateChanged", task_state_changed("j1", (k % 8, "RUNNING"), previous=""))
        repeated += deferred(rm.tick(k * 300))
    assert repeated == []
