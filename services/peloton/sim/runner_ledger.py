"""What the production cores did, folded from the in-memory runner's log into the
simulator's metrics books (`peloton sim run --engine runner`, `runner_engine.py`).

`LogLedger` reads job-events (the job manager's TaskStateChanged facts) and
entitlement-updated (the resource manager's EntitlementUpdated) as a bystander, in the
order they were appended to each partition, and keeps per leaf pool the cpu/memory/disk/
gpu of RUNNING tasks (allocation), of every task not yet terminal (demand, cpu), their
actual usage, the smallest request still waiting, and the newest entitlement. It feeds the
fast engine's `Recorder` (`metrics.py`) so both engines report the same figures by the
same definitions:

- a run is *queued* when its job was submitted (first run) or when the job manager
  created the run (PENDING after a preemption or a loss); its queueing delay ends at the
  job manager's RUNNING fact for it;
- `preempted_running`: runs the job manager moved RUNNING (or on its way there) ->
  PREEMPTING; `preempted_ready`: runs it moved straight to KILLED with a PREEMPTED reason
  (admitted, not yet on a host);
- `lost`: LOST facts; `completed`: SUCCEEDED facts; `killed`: KILLED facts of jobs the
  simulator stopped (services), preemptions excepted;
- wasted resource-seconds: RUNNING -> PREEMPTING or LOST, the request times the time the
  run had been RUNNING.
A job the job manager rejected (JobRejected: e.g. an explicit job whose name is no valid
job id) is kept in `rejected` with its reasons (the CLI warns on stderr); its tasks never
exist. Nothing here
decides anything: it reads what the cores published.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from peloton.jobmgr.domain.retries import PREEMPTED
from peloton.runner.memory import MemoryRunner

__all__ = ["LogLedger", "JobInfo"]
FloatArray = npt.NDArray[np.float64]

_TERMINAL = frozenset({"SUCCEEDED", "FAILED", "LOST", "KILLED"})
_ON_HOST = frozenset({"LAUNCHING", "LAUNCHED", "STARTING", "RUNNING"})


@dataclass(frozen=True, slots=True)
class JobInfo:
    """What the simulator submitted: pool index, request (cpu, mem, disk, gpu), usage per
    task, tier index, size bucket, submit time (ms on the runner's clock)."""

    pool: int
    request: tuple[float, float, float, float]
    usage: FloatArray
    tier: int
    size: int
    submitted_ms: int


class LogLedger:
    TOPICS = ("job-events", "entitlement-updated")

    def __init__(self, runner: MemoryRunner, pools: Sequence[str]) -> None:
        self.runner = runner
        self.pools = tuple(pools)
        self.index = {p: i for i, p in enumerate(self.pools)}
        n = len(self.pools)
        self.jobs: dict[str, JobInfo] = {}
        self.stopped: set[str] = set()
        self.state: dict[tuple[str, int], tuple[int, str]] = {}  # -> (run, state)
        self.queued_ms: dict[tuple[str, int, int], int] = {}
        self.running_since: dict[tuple[str, int, int], int] = {}
        self.running = np.zeros((n, 4))
        self.used = np.zeros((n, 4))
        self.demand = np.zeros(n)
        self.pool_placements = np.zeros(n, dtype=np.int64)
        self.pool_preempted = np.zeros(n, dtype=np.int64)
        self.waiting: list[Counter[float]] = [Counter() for _ in range(n)]
        self.entitled = np.zeros(n)
        self.appeared: list[int] = []  # pools where demand appeared since the last take
        self.delays: list[float] = []
        self.delay_tier: list[int] = []
        self.delay_size: list[int] = []
        self.counts: Counter[str] = Counter()
        self.rejected: dict[str, list[str]] = {}  # job id -> the job manager's reasons
        self.transitions = 0
        self.wasted = np.zeros(4)
        self._at = {tp: 0 for tp in runner.logs if tp[0] in self.TOPICS}

    # ------------------------------------------------------------------ submissions
    def submitted(self, job_id: str, info: JobInfo) -> None:
        self.jobs[job_id] = info
        self.appeared.append(info.pool)

    # ---------------------------------------------------------------------- folding
    def catch_up(self) -> None:
        """Fold every record appended since the last call (partition by partition: the
        facts of one job are in one partition, in order)."""
        logs, codec = self.runner.logs, self.runner.codec
        for tp, at in self._at.items():
            log = logs[tp]
            if at >= len(log):
                continue
            for rec in log[at:]:
                for etype, body in codec.decode_each(rec.value):  # joined: one per job
                    if etype == "TaskStateChanged":
                        self._changes(body)
                    elif etype == "JobRejected" and body["job_id"] in self.jobs:
                        self.rejected[body["job_id"]] = list(body["reasons"])
                    elif etype == "EntitlementUpdated":
                        self._entitlement(body)
            self._at[tp] = len(log)

    def _entitlement(self, body: dict[str, Any]) -> None:
        for row in body["pools"]:
            i = self.index.get(row["pool"])
            if i is not None:
                self.entitled[i] = float(row["entitlement"]["cpu"])

    def _changes(self, body: dict[str, Any]) -> None:
        job_id = body["job_id"]
        info = self.jobs.get(job_id)
        if info is None:
            return
        at = int(body["at"])
        for ch in body["changes"]:
            self.transitions += 1
            self._change(job_id, info, ch, at)

    def _change(self, job_id: str, info: JobInfo, ch: dict[str, Any], at: int) -> None:
        inst, run, state = int(ch["instance"]), int(ch["run"]), ch["state"]
        key = (job_id, inst)
        old = self.state.get(key)
        if old is not None and run < old[0]:
            return  # a fact about an older run (its end after the next run was created)
        old_state = old[1] if old is not None and old[0] == run else None
        if old is not None and old[0] != run:
            self._leave(info, inst, old[1])
        elif old_state is not None:
            self._leave(info, inst, old_state)
        if old is None or old[0] != run:  # a new run is queued
            first = old is None
            self.queued_ms[(job_id, inst, run)] = info.submitted_ms if first else at
            if not first:
                self.appeared.append(info.pool)
        self._enter(info, inst, state)
        self.state[key] = (run, state)
        rk = (job_id, inst, run)
        if state == "RUNNING" and old_state != "RUNNING":
            queued = self.queued_ms.pop(rk, None)
            if queued is not None:
                self.delays.append((at - queued) / 1000)
                self.delay_tier.append(info.tier)
                self.delay_size.append(info.size)
                self.pool_placements[info.pool] += 1
            self.running_since[rk] = at
        elif state in ("PREEMPTING", "LOST") or (
                state == "KILLED" and ch["reason"].startswith(PREEMPTED)
                and old_state != "PREEMPTING"):
            if state != "LOST":
                self.pool_preempted[info.pool] += 1
            if state == "PREEMPTING":
                self.counts["preempted_running"] += 1
            elif state == "LOST":
                self.counts["lost"] += 1
            else:
                self.counts["preempted_ready"] += 1
            started = self.running_since.pop(rk, None)
            if started is not None:
                self.wasted += np.array(info.request) * ((at - started) / 1000)
        elif state == "SUCCEEDED":
            self.counts["completed"] += 1
        elif state == "KILLED" and job_id in self.stopped and old_state != "PREEMPTING":
            self.counts["killed"] += 1
        if state in _TERMINAL:
            self.running_since.pop(rk, None)
            self.queued_ms.pop(rk, None)

    def _leave(self, info: JobInfo, inst: int, state: str) -> None:
        self._book(info, inst, state, -1.0)

    def _enter(self, info: JobInfo, inst: int, state: str) -> None:
        self._book(info, inst, state, 1.0)

    def _book(self, info: JobInfo, inst: int, state: str, sign: float) -> None:
        p = info.pool
        if state in _TERMINAL:
            return
        self.demand[p] += sign * info.request[0]
        if state == "RUNNING":
            req = np.array(info.request)
            self.running[p] += sign * req
            self.used[p] += sign * req * float(info.usage[inst])
        elif state not in _ON_HOST and state != "PREEMPTING" and state != "KILLING":
            self.waiting[p][info.request[0]] += int(sign)
            if self.waiting[p][info.request[0]] <= 0:
                del self.waiting[p][info.request[0]]

    # ---------------------------------------------------------------------- reading
    def tolerance(self) -> FloatArray:
        """Per pool: cpu of the smallest task it waits for (0 when it waits for none)."""
        return np.array([min(w) if w else 0.0 for w in self.waiting])

    def take_appeared(self) -> list[int]:
        out, self.appeared = self.appeared, []
        return out

    def take_delays(self) -> tuple[FloatArray, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        out = (np.array(self.delays, dtype=np.float64),
               np.array(self.delay_tier, dtype=np.int64),
               np.array(self.delay_size, dtype=np.int64))
        self.delays, self.delay_tier, self.delay_size = [], [], []
        return out

    def final_states(self) -> dict[str, int]:
        return dict(sorted(Counter(s for _, s in self.state.values()).items()))
