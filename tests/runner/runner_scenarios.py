"""Shared pieces of the runner scenarios: jobs by shape, what a stuck run looks like, and a
digest of a run's whole log (to compare two runs record for record)."""

from __future__ import annotations

import hashlib
import inspect
import random
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

from peloton.bus.service import ServiceCore
from peloton.runner import SERVICES, MemoryRunner, batch_job, cluster


def log_digest(runner: MemoryRunner) -> str:
    """A digest of every record of every topic partition of `runner`'s log: equal digests,
    same log (offsets, times, keys and values)."""
    h = hashlib.sha256()
    for (name, p), records in sorted(runner.logs.items()):
        for rec in records:
            h.update(f"{name}/{p}/{rec.offset}/{rec.at_ms}/".encode() + rec.key + rec.value)
    return h.hexdigest()


def small_jobs(rng: random.Random, prefix: str, n: int, max_tasks: int = 8,
               durations: tuple[float, ...] = (1.0,)) -> list[dict[str, Any]]:
    """`n` jobs of 1..max_tasks tasks of 0.1 cpu."""
    return [batch_job(f"{prefix}-{i}", rng.randint(1, max_tasks), cpu=0.1,
                      duration_s=rng.choice(durations)) for i in range(n)]


def busy_cluster(seed: int, hosts: int, prefix: str, jobs: int, duration_s: float,
                 running: int, **options: Any) -> MemoryRunner:
    """A cluster of `hosts` 4-cpu hosts running small jobs of `duration_s`: `jobs` jobs
    submitted after 3 s, returned once `running` of their tasks are RUNNING."""
    runner = cluster(seed=seed, hosts=hosts, cpu=4.0, **options)
    runner.run_for(3_000)
    runner.submit(small_jobs(random.Random(seed), prefix, jobs, durations=(duration_s,)))
    assert runner.run_until(lambda: sum(t.state == "RUNNING"
                                        for t in runner.watch.tasks.values()) >= running,
                            max_ms=20_000)
    return runner


def lost_hosts(runner: MemoryRunner) -> set[str]:
    """The hosts the host manager has declared lost so far."""
    return {b["host"] for _, e, b in runner.records("offer-received") if e == "HostLost"}


def assert_all_succeed_once(runner: MemoryRunner) -> None:
    """Every job ends, every task SUCCEEDED, and no task ran twice at once."""
    assert runner.run_until(runner.watch.all_terminal, max_ms=120_000)
    states = runner.watch.states()
    assert set(states) == {"SUCCEEDED"}, states
    assert {k: r for k, r in runner.watch.alive.items() if len(r) > 1} == {}


def with_retention(retention_ms: int) -> dict[str, Callable[[], ServiceCore]]:
    """The usual services, each with a retention window of `retention_ms`: through its
    adapter's `retention_ms` or `retention_s` parameter, else (the resource manager's
    adapter has none) on its ledger, which keeps the window in its snapshot."""
    out: dict[str, Callable[[], ServiceCore]] = {}
    for name, factory in SERVICES.items():
        params = inspect.signature(factory).parameters
        if "retention_ms" in params:
            out[name] = partial(factory, retention_ms=retention_ms)
        elif "retention_s" in params:
            out[name] = partial(factory, retention_s=retention_ms / 1000)
        else:
            out[name] = partial(_with_ledger_retention, factory, retention_ms)
    return out


def _with_ledger_retention(factory: Callable[[], ServiceCore], retention_ms: int) -> Any:
    core: Any = factory()
    core.manager.ledger.retention_ms = retention_ms
    return core


def stuck_summary(runner: MemoryRunner, limit: int = 5) -> str:
    """Jobs by state, stuck tasks by (state, reason), and a few stuck runs."""
    w = runner.watch
    stuck = w.stuck_tasks()
    kinds = Counter((v.state, v.reason.split(":")[0]) for v in stuck.values())
    some = [f"{j}-{i} run {v.run} {v.state} on {v.host}" for (j, i), v in
            list(stuck.items())[:limit]]
    backlog = {name: n for name, n in runner.backlog().items() if n}
    return (f"jobs by state {w.states()}; {len(stuck)} stuck tasks by (state, reason) "
            f"{dict(kinds)}; e.g. {some}; unread {backlog}; "
            f"errors {runner.errors[:3]}")
