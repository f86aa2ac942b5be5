"""Benchmark of the resource manager's tick with a backlog (the pure core, no bus).

A cluster of `hosts` hosts of 64 cpus and `jobs` batch jobs of 1-8 tasks (seeded) of
`task_cpu` cpus each, all PENDING at once, as after a big burst: the first tick admits what
the entitlement allows, its decisions are folded back (as the log would bring them), then
`ticks` more ticks run, each after a few new jobs arrived and `ends` admitted runs ended
(so admission runs again and the queue drains, as under load). Prints the CPU seconds of
the first tick and of the later ones (median and worst), how many runs were admitted and
left pending, and how many pending reasons the later ticks published (a draining queue
must not be explained again at every admission). This is a shell around the core,
so it reads the clock and draws seeded random numbers.

With `unconfirmed`, no decision comes back before the later ticks (and no run ends): a
leader reading its own TasksAdmitted behind a burst's other facts, so every admission
stays provisional (`provisional` in the result: how many there were at the last tick).

    python -m peloton.resmgr.backlogbench                    # 20,000 jobs, most pending
    python -m peloton.resmgr.backlogbench --task-cpu 0.1     # most admitted, not READY yet
    python -m peloton.resmgr.backlogbench --hosts 1000 --task-cpu 0.1 --unconfirmed

A tick holds the resource manager's loop for as long as it takes: its consumers wait
meanwhile. Its etcd lease is refreshed on a thread of its own (`peloton.ha.threaded`), so
a tick longer than the lease's 2 s does not depose it (one longer than `MAX_STALL_S`, 30 s,
is taken for a hung service).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time
from typing import Any

from peloton.bus.gcpolicy import GEN0_THRESHOLD, GcPolicy
from peloton.jobmgr.domain.validation import validate_submission
from peloton.resmgr.domain.cycle import ResourceManager
from peloton.runner.cluster import batch_job

__all__ = ["backlog_tick_bench"]


def _change(instance: int, run: int, state: str, previous: str,
            exit_code: int | None = None) -> dict[str, Any]:
    """One TaskStateChanged change of the job manager's."""
    return {"instance": instance, "run": run, "state": state, "previous_state": previous,
            "reason": "", "host": None, "exit_code": exit_code, "failures": 0,
            "config_version": 1}


def _pending(job_id: str, instances: int, cpu: float, at: int) -> list[tuple[str, Any]]:
    created, problems = validate_submission(
        batch_job(job_id, instances, cpu=cpu, submitted_at=at), None, None, at)
    assert created is not None, problems
    changes = [_change(i, 1, "PENDING", "INITIALIZED") for i in range(instances)]
    return [("JobCreated", created),
            ("TaskStateChanged", {"job_id": job_id, "at": at, "changes": changes})]


def _offers(hosts: int, at: int) -> dict[str, Any]:
    size = {"cpu": 64.0, "memory": 262_144.0, "disk": 1_000_000.0, "gpu": 0.0}
    none = {"cpu": 0.0, "memory": 0.0, "disk": 0.0, "gpu": 0.0}
    return {"at": at, "offers": [
        {"host": f"host-{i}", "incarnation": "1", "capacity": size, "free": size,
         "labels": {}, "generation": 1, "available": True, "port_range_begin": 31000,
         "port_range_end": 32000, "used_ports": [], "task_label_counts": {}, "slack": none,
         "holds": []}
        for i in range(hosts)]}


def _ended(runs: list[tuple[str, int, int]], at: int) -> list[tuple[str, Any]]:
    return [("TaskStateChanged", {"job_id": job_id, "at": at, "changes": [
        _change(instance, run, "SUCCEEDED", "RUNNING", exit_code=0)]})
        for job_id, instance, run in runs]


def backlog_tick_bench(jobs: int = 20_000, hosts: int = 100, task_cpu: float = 1.0,
                       ticks: int = 5, seed: int = 7, ends: int = 50,
                       unconfirmed: bool = False) -> dict[str, Any]:
    rng = random.Random(seed)
    rm = ResourceManager(entitlement_cycle_ms=10_000)
    rm.fold("OfferReceived", _offers(hosts, 0))
    for j in range(jobs):
        for etype, body in _pending(f"job-{j}", rng.randint(1, 8), task_cpu, j):
            rm.fold(etype, body)
    now = jobs + 1_000
    # garbage collection as the resource manager's process runs it (bus/gcpolicy.py:
    # CPython's defaults would add full collections of the whole backlog to every tick)
    threshold = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, *threshold[1:])
    policy = GcPolicy()
    try:
        return _ticks(rm, jobs, hosts, task_cpu, ticks, 0 if unconfirmed else ends, now,
                      policy, unconfirmed)
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def _ticks(rm: ResourceManager, jobs: int, hosts: int, task_cpu: float, ticks: int,
           ends: int, now: int, policy: GcPolicy, unconfirmed: bool) -> dict[str, Any]:
    seconds: list[float] = []
    reasons: list[int] = []
    running: list[tuple[str, int, int]] = []  # admitted runs, in order of admission
    admitted = 0
    for k in range(ticks + 1):
        policy.step()  # the service's freeze runs every few seconds: about every tick here
        started = time.process_time()
        events = rm.tick(now)
        seconds.append(time.process_time() - started)
        said = 0
        for ev in events:
            if ev.type in ("TasksAdmitted", "AdmissionDeferred") and not unconfirmed:
                rm.fold(ev.type, ev.body)
            if ev.type == "TasksAdmitted":
                admitted += len(ev.body["tasks"])
                running += [(t["job_id"], t["instance"], t["run"]) for t in ev.body["tasks"]]
            elif ev.type == "AdmissionDeferred":
                said += len(ev.body["tasks"])
        reasons.append(said)
        now += 100
        if k < ticks:  # new work, and some runs end, before each later tick
            for etype, body in (_pending(f"new-{k}", 2, task_cpu, now)
                                + _ended(running[:ends], now)):
                rm.fold(etype, body)
            del running[:ends]
    later = seconds[1:]
    return {"jobs": jobs, "runs": sum(len(rm.ledger.live[j]) for j in rm.ledger.live),
            "hosts": hosts, "task_cpu": task_cpu, "ended_per_tick": ends,
            "admitted": admitted,
            "pending": len(rm.ledger.pending),
            "unconfirmed": unconfirmed, "provisional": len(rm.provisional.admitted),
            "reasons_first_tick": reasons[0],
            "reasons_later_ticks": sum(reasons[1:]),
            "first_tick_s": round(seconds[0], 3),
            "later_tick_median_s": round(statistics.median(later), 3) if later else None,
            "later_tick_max_s": round(max(later), 3) if later else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--task-cpu", type=float, default=1.0)
    parser.add_argument("--ticks", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ends", type=int, default=50)
    parser.add_argument("--unconfirmed", action="store_true")
    a = parser.parse_args()
    if a.ends < 0:
        parser.error("--ends must be 0 or more")
    print(json.dumps(backlog_tick_bench(a.jobs, a.hosts, a.task_cpu, a.ticks, a.seed,
                                        a.ends, a.unconfirmed),
                     indent=1))


if __name__ == "__main__":
    main()
