"""The drain planner: the docstring's example, named cases, then properties over random
hosts and a simulated drain to the end."""

from __future__ import annotations

import random
from dataclasses import replace

import hypothesis.strategies as st
from hypothesis import given, settings

from peloton.model.spec import JobType
from peloton.updates.domain.drain import (
    DrainAction,
    DrainActionKind,
    DrainPlan,
    HostRun,
    JobBudget,
    Replacement,
    plan_drain,
)

K, R = DrainActionKind, Replacement
PROPERTY = settings(max_examples=150, deadline=None, derandomize=True)
NOW = 1_000


def acts(p: DrainPlan) -> list[tuple[str, str]]:
    return [(a.kind.value, f"{a.job_id}/{a.instance}") for a in p.actions]


def run(name: str, job_type: str, **kw: object) -> HostRun:
    job, instance = name.split("/")
    return HostRun(job, int(instance), job_type, **kw)  # type: ignore[arg-type]


API = JobType.SERVICE


def test_the_docstring_example() -> None:
    jobs = {"api": JobBudget(1, 0)}
    p = plan_drain("h1", [run("api/0", API), run("api/1", API), run("etl/0", JobType.BATCH)],
                   jobs, NOW, None)
    assert acts(p) == [("kill", "etl/0"), ("start_replacement", "api/0")]
    assert p.waiting == ("api/1: 1 replacement(s) of job api starting already (at most 1 "
                         "at once)",)
    p = plan_drain("h1", [run("api/0", API, replacement=R.HEALTHY), run("api/1", API)],
                   jobs, NOW, None)
    assert acts(p) == [("kill", "api/0"), ("start_replacement", "api/1")]
    p = plan_drain("h1", [run("dns/0", JobType.DAEMON),
                          run("api/1", API, replacement=R.STARTING)], jobs, NOW, None)
    assert acts(p) == [] and not p.drained
    assert "dns/0: a daemon stops last" in p.reason and "api/1: its replacement" in p.reason
    p = plan_drain("h1", [run("dns/0", JobType.DAEMON)], jobs, NOW, None)
    assert acts(p) == [("kill", "dns/0")]
    p = plan_drain("h1", [], jobs, NOW, None)
    assert p.drained and p.reason == "host h1 is drained: it runs nothing"


def test_batch_kills_respect_the_sla_and_count_what_is_already_down() -> None:
    runs = [run(f"etl/{i}", JobType.BATCH) for i in range(4)]
    p = plan_drain("h1", runs, {"etl": JobBudget(3, 1)}, NOW, None)
    assert acts(p) == [("kill", "etl/0"), ("kill", "etl/1")]
    assert p.waiting == ("etl/2: job etl has 3 instance(s) unavailable, its SLA allows 3",
                         "etl/3: job etl has 3 instance(s) unavailable, its SLA allows 3")
    no_sla = plan_drain("h1", runs, {}, NOW, None)
    assert len(no_sla.actions) == 4


def test_a_zero_budget_blocks_voluntary_kills_but_not_a_service_surge() -> None:
    jobs = {"db": JobBudget(0), "api": JobBudget(0)}
    p = plan_drain("h1", [run("db/0", JobType.STATEFUL), run("api/0", API)], jobs, NOW, None)
    assert acts(p) == [("start_replacement", "api/0")]
    assert p.waiting == ("db/0 (its volume is on this host): job db has 0 instance(s) "
                         "unavailable, its SLA allows 0",)


def test_the_deadline_kills_everything_but_daemons_still_go_last() -> None:
    runs = [run("api/0", API, replacement=R.STARTING), run("db/0", JobType.STATEFUL),
            run("dns/0", JobType.DAEMON), run("old/0", JobType.BATCH, ending=True)]
    p = plan_drain("h1", runs, {"db": JobBudget(0), "api": JobBudget(0)}, NOW, NOW)
    assert acts(p) == [("kill", "api/0"), ("kill", "db/0")]
    assert all(a.reason == "the maintenance deadline has passed" for a in p.actions)
    assert p.waiting == ("old/0: being killed",
                         "dns/0: a daemon stops last (3 other run(s) still on the host)")


def test_reasons_say_why_each_kill_happens() -> None:
    p = plan_drain("h1", [run("etl/0", JobType.BATCH), run("db/0", JobType.STATEFUL)], {},
                   NOW, NOW + 1)
    assert [a.reason for a in p.actions] == [
        "batch: retried elsewhere",
        "stateful: stops here, comes back to this host after the maintenance"]
    assert p.reason == "host h1 is draining: 2 action(s) under way"


# ----------------------------------------------------------------------- properties

TYPES = [JobType.BATCH, JobType.SERVICE, JobType.STATEFUL, JobType.DAEMON]


@st.composite
def hosts(draw: st.DrawFn) -> tuple[list[HostRun], dict[str, JobBudget], bool]:
    jobs = {f"j{i}": (draw(st.sampled_from(TYPES)),
                      JobBudget(draw(st.none() | st.integers(0, 3)), draw(st.integers(0, 2))))
            for i in range(draw(st.integers(1, 4)))}
    runs = []
    for job, (job_type, _) in jobs.items():
        for instance in range(draw(st.integers(0, 4))):
            replacement = (draw(st.sampled_from(list(R))) if job_type == JobType.SERVICE
                           else R.NONE)
            runs.append(HostRun(job, instance, job_type, replacement, draw(st.booleans())))
    forced = draw(st.booleans())
    return runs, {j: b for j, (_, b) in jobs.items()}, forced


@PROPERTY
@given(hosts(), st.randoms(use_true_random=False))
def test_one_outcome_per_run_within_every_rule(
        case: tuple[list[HostRun], dict[str, JobBudget], bool], rnd: random.Random) -> None:
    runs, jobs, forced = case
    p = plan_drain("h", runs, jobs, NOW, NOW if forced else NOW + 1)
    shuffled = list(runs)
    rnd.shuffle(shuffled)
    assert plan_drain("h", shuffled, jobs, NOW, NOW if forced else NOW + 1) == p
    assert p.drained == (not runs)
    assert len(p.actions) + len(p.waiting) == len(runs)
    by_name = {r.name: r for r in runs}
    assert len({f"{a.job_id}/{a.instance}" for a in p.actions}) == len(p.actions)
    others = [r for r in runs if r.job_type != JobType.DAEMON]
    for a in p.actions:
        r = by_name[f"{a.job_id}/{a.instance}"]
        assert not r.ending
        if r.job_type == JobType.DAEMON:
            assert a.kind is K.KILL and not others
        elif r.job_type == JobType.SERVICE and not forced:
            want = K.KILL if r.replacement is R.HEALTHY else K.START_REPLACEMENT
            assert a.kind is want and r.replacement is not R.STARTING
        else:
            assert a.kind is K.KILL
    if forced:
        assert {f"{a.job_id}/{a.instance}" for a in p.actions} >= {
            r.name for r in others if not r.ending}
        return
    for job, budget in jobs.items():
        kills = [a for a in p.actions if a.job_id == job and a.kind is K.KILL
                 and by_name[f"{job}/{a.instance}"].job_type in (JobType.BATCH,
                                                                 JobType.STATEFUL)]
        if budget.max_unavailable is not None:
            assert len(kills) <= max(0, budget.max_unavailable - budget.unavailable)
        starts = [a for a in p.actions if a.job_id == job and a.kind is K.START_REPLACEMENT]
        starting = sum(1 for r in runs if r.job_id == job and r.replacement is R.STARTING)
        if budget.max_unavailable is not None and starts:
            assert starting + len(starts) <= max(1, budget.max_unavailable)


@PROPERTY
@given(hosts())
def test_a_simulated_drain_ends_drained_and_never_breaks_an_sla(
        case: tuple[list[HostRun], dict[str, JobBudget], bool]) -> None:
    """Kills take one step; a killed batch run is retried elsewhere and is back the step
    after (so are the instances down elsewhere at the start); a replacement starts in
    one step and is healthy the next. With every budget at least 1 (0 blocks kills for
    good) the host drains, and no job ever has more instances down than its SLA allows
    (or than it had at the start)."""
    runs, jobs, _ = case
    jobs = {j: replace(b, max_unavailable=None if b.max_unavailable is None
                       else max(1, b.max_unavailable)) for j, b in jobs.items()}
    runs = [replace(r, ending=False, replacement=R.NONE) for r in runs]
    down = {j: b.unavailable for j, b in jobs.items()}
    back = [j for j, b in jobs.items() for _ in range(b.unavailable)]
    for _ in range(6 * len(runs) + 2):
        budgets = {j: replace(b, unavailable=down[j]) for j, b in jobs.items()}
        p = plan_drain("h", runs, budgets, NOW, None)
        if p.drained:
            return
        for job in back:  # retried elsewhere: available again
            down[job] -= 1
        back = []
        runs = [r for r in runs if not r.ending]  # last step's kills are done
        runs = [replace(r, replacement=R.HEALTHY) if r.replacement is R.STARTING else r
                for r in runs]
        for a in p.actions:
            i = next(k for k, r in enumerate(runs) if (r.job_id, r.instance) ==
                     (a.job_id, a.instance))
            runs[i] = _applied(runs[i], a)
            if a.kind is K.KILL and runs[i].job_type in (JobType.BATCH, JobType.STATEFUL):
                down[a.job_id] += 1
                back.append(a.job_id)
        for job, b in jobs.items():
            if b.max_unavailable is not None:
                assert down[job] <= max(b.max_unavailable, b.unavailable), (job, p)
    raise AssertionError(f"not drained: {runs}")


def _applied(r: HostRun, a: DrainAction) -> HostRun:
    if a.kind is K.KILL:
        return replace(r, ending=True)
    return replace(r, replacement=R.STARTING)
