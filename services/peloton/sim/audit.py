"""Conservation checks: recompute every book from the task table and compare.

`audit(state)` returns a list of problems ([] when all hold). Between events:
- no host holds more than its capacity in any kind, and a host that is down holds
  nothing; each host's allocation equals the requests of the RUNNING tasks on it;
- each pool's pending / holding / non-preemptible holding / running totals equal the
  requests of its PENDING / READY+RUNNING / non-preemptible ones / RUNNING tasks;
- the READY set is exactly the READY tasks, the queues hold exactly the PENDING tasks
  (each once), and a job is queued exactly when it has pending tasks;
- no task rests in a transient state (INITIALIZED, PLACING, PLACED, LAUNCHING,
  LAUNCHED, STARTING, PREEMPTING, KILLING): every task is terminal, waiting (PENDING,
  READY) or RUNNING.
Pure; used by the tests after every event.
"""

from __future__ import annotations

import numpy as np

from peloton.jobmgr.domain.states import TERMINAL, TaskState

from .state import SimState
from .tasktable import CODE, STATES

__all__ = ["audit", "RESTING"]

S = TaskState
#: States a task may be in between events.
RESTING = frozenset(TERMINAL | {S.PENDING, S.READY, S.RUNNING})
_TOL = 1e-6


def audit(state: SimState) -> list[str]:
    problems: list[str] = []
    t = state.tasks
    n = t.size
    states = t.state[:n]
    rows = np.arange(n)
    req = state.job_req[t.job[:n]]
    pools = state.job_pool[t.job[:n]]
    hosts = state.hosts
    over = hosts.over_capacity()
    if over.size:
        problems.append(f"hosts over capacity or busy while down: "
                        f"{[hosts.names[h] for h in over[:5].tolist()]}")
    running = states == CODE[S.RUNNING]
    on_host = np.zeros_like(hosts.allocated)
    np.add.at(on_host, t.host[:n][running], req[running])
    if not np.allclose(on_host, hosts.allocated, atol=_TOL):
        problems.append("host allocation differs from the RUNNING tasks on the hosts")
    pending = states == CODE[S.PENDING]
    ready = states == CODE[S.READY]
    nonpre = state.job_np[t.job[:n]]
    for name, mask in (("pending", pending), ("holding", ready | running),
                       ("holding_np", (ready | running) & nonpre), ("running", running)):
        expect = np.zeros_like(state.pools.pending)
        np.add.at(expect, pools[mask], req[mask])
        if not np.allclose(expect, getattr(state.pools, name), atol=1e-3):
            problems.append(f"pool {name} totals differ from the tasks")
    if set(state.ready) != set(rows[ready].tolist()):
        problems.append("the READY set differs from the READY tasks")
    queued: list[int] = []
    for p, queue in enumerate(state.queues):
        for job in queue.values():
            if job.pool != p or job.pending_count == 0:
                problems.append(f"job {job.spec.name} queued wrongly")
            queued += job.pending + (job.gang_rows or [])
    for job in state.jobs:
        if job.pending_count and job.index not in state.queues[job.pool]:
            problems.append(f"job {job.spec.name} has pending tasks but is not queued")
    if sorted(queued) != rows[pending].tolist():
        problems.append("the queues differ from the PENDING tasks")
    resting = np.isin(states, [CODE[s] for s in RESTING])
    if not resting.all():
        bad = sorted({STATES[c].value for c in states[~resting].tolist()})
        problems.append(f"tasks resting in transient states: {bad}")
    return problems
