"""The job manager's aggregate: jobs and their tasks, folded from facts (pure).

Contract:
- `apply(type, body)` folds one fact (the job manager's own events, plus the public facts
  JobSubmitted / JobKillRequested and the resource manager's EntitlementUpdated) into the
  book. It never decides anything, so replaying the same records rebuilds the same book;
  applying a record twice is harmless (transitions are absolute and duplicates are no-ops).
- `handle(type, body, now_ms)` is for live input: it applies the fact, decides what follows
  and returns the resulting events, which it has already applied. The shell publishes them.
- `reconcile(now_ms)` re-derives decisions that a crash between "fact read" and "events
  published" may have lost (undecided submissions, kills not yet carried out). It returns
  nothing when the book is consistent, so it is safe to run at any time.
Deterministic: no clock (now_ms is passed in), no randomness, sorted iteration.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from peloton.jobmgr.domain.states import (
    TERMINAL,
    IllegalTransition,
    JobState,
    TaskState,
    can_transition,
    derive_job_state,
    is_on_host,
    transition,
)
from peloton.jobmgr.domain.validation import validate_submission
from peloton.model.event import Event
from peloton.model.ids import run_id

__all__ = ["JobBook", "JobRecord", "TaskRecord", "SYSTEM_RETRIES", "PREEMPTED"]

S = TaskState
SYSTEM_RETRIES = 4  # a LOST run is retried at least this many times (Peloton's rule)
PREEMPTED = "PREEMPTED"  # how every reason of a preempted run starts
_PREEMPT_ON_HOST = frozenset({S.LAUNCHED, S.STARTING, S.RUNNING})
_PREEMPT_QUEUED = frozenset({S.READY, S.PLACING, S.PLACED})
_AGENT_STATES = {"LAUNCHED": S.LAUNCHED, "STARTING": S.STARTING, "RUNNING": S.RUNNING,
                 "SUCCEEDED": S.SUCCEEDED, "FAILED": S.FAILED, "KILLED": S.KILLED}


@dataclass(slots=True)
class TaskRecord:
    instance: int
    run: int = 1
    state: TaskState = S.INITIALIZED
    host: str | None = None
    failures: int = 0
    reason: str = ""
    exit_code: int | None = None
    kill_requested: bool = False


@dataclass(slots=True)
class JobRecord:
    job_id: str
    spec: dict[str, Any]
    tasks: list[TaskRecord]
    state: JobState = JobState.PENDING
    counts: Counter[TaskState] = field(default_factory=Counter)
    kill_requested: bool = False

    def task_spec(self, instance: int) -> dict[str, Any]:
        return self.spec["instance_tasks"].get(str(instance), self.spec["default_task"])


class JobBook:
    def __init__(self) -> None:
        self.jobs: dict[str, JobRecord] = {}
        self.rejected: dict[str, list[str]] = {}
        self.submitted: dict[str, dict[str, Any]] = {}  # seen, not yet decided
        self.kill_intents: dict[str, set[int] | None] = {}  # None = whole job
        self.pools: set[str] | None = None
        self.leaf_pools: set[str] | None = None

    # ---- fold -----------------------------------------------------------------------
    def apply(self, etype: str, body: dict[str, Any]) -> None:
        job_id = body.get("job_id", "")
        if etype == "JobSubmitted":
            if job_id not in self.jobs and job_id not in self.rejected:
                self.submitted.setdefault(job_id, body)
        elif etype == "JobCreated":
            self.submitted.pop(job_id, None)
            if job_id not in self.jobs:
                tasks = [TaskRecord(i) for i in range(body["instance_count"])]
                job = JobRecord(job_id, body, tasks)
                job.counts[S.INITIALIZED] = len(tasks)
                self.jobs[job_id] = job
                if job_id in self.kill_intents:  # folded first on replay: honour it
                    intent = self.kill_intents[job_id]
                    self._apply_kill_intent(job_id, [] if intent is None else sorted(intent))
        elif etype == "JobRejected":
            self.submitted.pop(job_id, None)
            self.rejected[job_id] = list(body["reasons"])
        elif etype == "JobKillRequested":
            self._apply_kill_intent(job_id, body["instances"])
        elif etype == "TaskStateChanged":
            self._apply_changes(job_id, body["changes"])
        elif etype == "JobStateChanged":
            known = self.jobs.get(job_id)
            if known is not None:
                known.state = JobState(body["state"])
        elif etype == "EntitlementUpdated":
            self.pools = {p["pool"] for p in body["pools"]}
            parents = {p["parent"] for p in body["pools"] if p["parent"]}
            self.leaf_pools = self.pools - parents

    def _apply_kill_intent(self, job_id: str, instances: list[int]) -> None:
        if not instances:
            self.kill_intents[job_id] = None
        else:
            current = self.kill_intents.get(job_id, set())
            if current is not None:
                self.kill_intents[job_id] = current | set(instances)
        job = self.jobs.get(job_id)
        if job is not None:
            if not instances:
                job.kill_requested = True
            for t in job.tasks:
                if not instances or t.instance in instances:
                    t.kill_requested = True

    def _apply_changes(self, job_id: str, changes: Iterable[dict[str, Any]]) -> None:
        job = self.jobs.get(job_id)
        if job is None:
            return
        for ch in changes:
            task = job.tasks[ch["instance"]]
            if ch["run"] < task.run:
                continue
            new_state = S(ch["state"])
            job.counts[task.state] -= 1
            job.counts[new_state] += 1
            task.run = ch["run"]
            task.state = new_state
            task.host = ch["host"]
            task.failures = ch["failures"]
            task.reason = ch["reason"]
            task.exit_code = ch["exit_code"]
            if new_state in (S.KILLING, S.KILLED):
                task.kill_requested = True

    # ---- decide ---------------------------------------------------------------------
    def handle(self, etype: str, body: dict[str, Any], now_ms: int) -> list[Event]:
        """Apply a live input fact, decide, apply and return the events that follow."""
        if etype in ("JobSubmitted", "JobKillRequested", "EntitlementUpdated"):
            self.apply(etype, body)
            return self.reconcile(now_ms) if etype != "EntitlementUpdated" else []
        if etype == "TasksPreempted":
            return self.preempt(body["tasks"], now_ms)
        batches: dict[str, list[dict[str, Any]]] = {}
        if etype == "TasksAdmitted":
            for t in body["tasks"]:
                self._propose(batches, t, S.READY, "admitted")
        elif etype == "PlacementMade":
            for p in body["placements"]:
                self._propose(batches, p, S.PLACED, "placed", host=p["host"])
        elif etype == "PlacementFailed":
            for t in body["tasks"]:
                self._note_reason(t, t["reason"])
        elif etype == "PlacementRejected":
            for r in body["rejections"]:
                self._propose(batches, r, S.READY, f"placement rejected: {r['reason']}")
        elif etype == "TaskLaunchRequested":
            for launch in body["launches"]:
                self._propose(batches, launch, S.LAUNCHING, "launch requested",
                              host=body["host"])
        elif etype == "TaskStatusReported":
            for st in body["statuses"]:
                state = _AGENT_STATES.get(st["state"])
                if state is not None:
                    self._propose(batches, st, state, st["message"], host=body["host"],
                                  exit_code=st["exit_code"])
        elif etype == "HostLost":
            self._lose_host(batches, body["host"], body["reason"], set(body["runs"]))
        return self._commit(batches, now_ms)

    def _note_reason(self, ref: dict[str, Any], reason: str) -> None:
        job = self.jobs.get(ref["job_id"])
        if job is not None and ref["instance"] < len(job.tasks):
            task = job.tasks[ref["instance"]]
            if task.run == ref["run"] and task.state in (S.READY, S.PENDING):
                task.reason = reason

    def _propose(
        self, batches: dict[str, list[dict[str, Any]]], ref: dict[str, Any], target: TaskState,
        reason: str, host: str | None = None, exit_code: int | None = None,
    ) -> None:
        job = self.jobs.get(ref["job_id"])
        if job is None or not 0 <= ref["instance"] < len(job.tasks):
            return
        task = job.tasks[ref["instance"]]
        current = self._pending_state(batches, job.job_id, task)
        if ref["run"] != current[1] or current[0] == target:
            return  # a stale run, or a duplicate delivery: nothing to do
        try:
            transition(current[0], target)
        except IllegalTransition:
            return  # late or out-of-order report; the table decides what is meaningful
        if target == S.KILLED and current[0] == S.PREEMPTING:
            reason = _preempted_reason(task.reason)
        elif target == S.KILLED and not task.kill_requested and current[0] not in (S.KILLING,):
            target, reason = S.FAILED, reason or "killed outside the scheduler"
            if not can_transition(current[0], target):
                return  # a kill of a run not yet launched here: the table has no such edge
        self._emit_change(batches, job, task, target, current, reason, host, exit_code)

    def _pending_state(
        self, batches: dict[str, list[dict[str, Any]]], job_id: str, task: TaskRecord
    ) -> tuple[TaskState, int, str | None, int]:
        for ch in reversed(batches.get(job_id, [])):
            if ch["instance"] == task.instance:
                return S(ch["state"]), ch["run"], ch["host"], ch["failures"]
        return task.state, task.run, task.host, task.failures

    def _emit_change(
        self, batches: dict[str, list[dict[str, Any]]], job: JobRecord, task: TaskRecord,
        target: TaskState, current: tuple[TaskState, int, str | None, int], reason: str,
        host: str | None, exit_code: int | None,
    ) -> None:
        state, run, old_host, failures = current
        host = host if host is not None else old_host
        if target == S.FAILED:
            failures += 1
        elif target == S.LOST:
            failures += 1
        batch = batches.setdefault(job.job_id, [])
        batch.append({"instance": task.instance, "run": run, "state": target.value,
                      "previous_state": state.value, "reason": reason, "host": host,
                      "exit_code": exit_code, "failures": failures})
        if target in (S.FAILED, S.LOST) and self._should_retry(job, task, target, failures):
            batch.append({"instance": task.instance, "run": run + 1, "state": S.PENDING.value,
                          "previous_state": S.INITIALIZED.value,
                          "reason": f"retry after {target.value.lower()} run {run}: {reason}",
                          "host": None, "exit_code": None, "failures": failures})
        elif (target == S.KILLED and state == S.PREEMPTING
              and not (task.kill_requested or job.kill_requested)):
            batch.append(_requeued(task.instance, run, reason, failures))

    def _should_retry(self, job: JobRecord, task: TaskRecord, state: TaskState,
                      failures: int) -> bool:
        if task.kill_requested or job.kill_requested:
            return False
        allowed = job.task_spec(task.instance)["max_failures"]
        if state == S.LOST:
            allowed = max(allowed, SYSTEM_RETRIES)
        return failures <= allowed

    def _lose_host(self, batches: dict[str, list[dict[str, Any]]], host: str, reason: str,
                   runs: set[str]) -> None:
        """The runs the host manager had launched on the lost incarnation are lost; runs
        only PLACED there are left alone (the host manager rejects them back)."""
        for job_id in sorted(self.jobs):
            job = self.jobs[job_id]
            if job.state in (JobState.SUCCEEDED, JobState.FAILED, JobState.KILLED):
                continue
            for task in job.tasks:
                state, run, task_host, _ = self._pending_state(batches, job_id, task)
                if task_host != host or state in TERMINAL or state in (S.PENDING, S.READY):
                    continue
                if run_id(job_id, task.instance, run) not in runs:
                    continue
                target = S.KILLED if state == S.KILLING else S.LOST
                ref = {"job_id": job_id, "instance": task.instance, "run": run}
                self._propose(batches, ref, target, f"host {host} lost: {reason}")

    # ---- preemption (TasksPreempted from the resource manager) ------------------------
    def preempt(self, victims: Iterable[dict[str, Any]], now_ms: int) -> list[Event]:
        """Take back the named runs: running ones go PREEMPTING and their agents are asked
        to kill them (grace period from the task spec); once KILLED, the run ends with a
        PREEMPTED reason and a new run starts PENDING. Runs not on a host yet (READY,
        PLACING, PLACED) end KILLED and a new run starts PENDING at once. Preemption is
        never counted as a failure. Stale runs, runs in other states (e.g. LAUNCHING) and
        tasks being killed are left alone; the resource manager chooses again later."""
        batches: dict[str, list[dict[str, Any]]] = {}
        kills: dict[str, list[dict[str, Any]]] = {}
        for ref in victims:
            job = self.jobs.get(ref["job_id"])
            if job is None or not 0 <= ref["instance"] < len(job.tasks):
                continue
            task = job.tasks[ref["instance"]]
            state, run, host, failures = self._pending_state(batches, job.job_id, task)
            if run != ref["run"] or task.kill_requested or job.kill_requested:
                continue
            reason = f"PREEMPTED ({ref['reason']}: {ref['detail']})"
            if state in _PREEMPT_ON_HOST and host:
                self._propose(batches, ref, S.PREEMPTING, reason)
                grace = job.task_spec(task.instance)["kill_grace_period_s"]
                kills.setdefault(host, []).append(
                    {"job_id": job.job_id, "instance": task.instance, "run": run,
                     "grace_period_s": grace, "reason": reason})
            elif state in _PREEMPT_QUEUED:
                batch = batches.setdefault(job.job_id, [])
                batch.append({"instance": task.instance, "run": run, "state": S.KILLED.value,
                              "previous_state": state.value, "reason": reason, "host": host,
                              "exit_code": None, "failures": failures})
                batch.append(_requeued(task.instance, run, reason, failures))
        events = self._commit(batches, now_ms)
        for host in sorted(kills):
            events.append(Event("TaskKillRequested", host,
                                {"host": host, "at": now_ms, "kills": kills[host]}))
        return events

    def reconcile(self, now_ms: int) -> list[Event]:
        """Decide what the book shows as undecided (see the module contract)."""
        events: list[Event] = []
        for job_id in sorted(self.submitted):
            events.extend(self._decide_submission(self.submitted[job_id], now_ms))
        batches: dict[str, list[dict[str, Any]]] = {}
        kills: dict[str, list[dict[str, Any]]] = {}
        for job_id in sorted(self.kill_intents):
            job = self.jobs.get(job_id)
            if job is not None:
                self._carry_out_kill(job, self.kill_intents[job_id], batches, kills)
        events.extend(self._commit(batches, now_ms))
        for job_id in sorted(set(self.kill_intents) - set(batches)):
            if job_id in self.jobs:  # a kill changes the job's state even if no task moved
                events.extend(self._job_state_events(self.jobs[job_id], now_ms))
        for host in sorted(kills):
            events.append(Event("TaskKillRequested", host,
                                {"host": host, "at": now_ms, "kills": kills[host]}))
        return events

    def _decide_submission(self, sub: dict[str, Any], now_ms: int) -> list[Event]:
        created, problems = validate_submission(sub, self.pools, self.leaf_pools, now_ms)
        if created is None:
            ev = Event("JobRejected", sub["job_id"], {"job_id": sub["job_id"], "at": now_ms,
                                                       "name": sub["name"], "reasons": problems})
            self.apply(ev.type, ev.body)
            return [ev]
        ev = Event("JobCreated", sub["job_id"], created)
        self.apply(ev.type, ev.body)
        job = self.jobs[sub["job_id"]]
        intent = self.kill_intents.get(job.job_id, set())
        if intent is None:
            job.kill_requested = True
        changes = [{"instance": t.instance, "run": 1, "state": S.PENDING.value,
                    "previous_state": S.INITIALIZED.value, "reason": "created", "host": None,
                    "exit_code": None, "failures": 0} for t in job.tasks]
        return [ev, *self._commit({job.job_id: changes}, now_ms)]

    def _carry_out_kill(
        self, job: JobRecord, instances: set[int] | None, batches: dict[str, list[dict[str, Any]]],
        kills: dict[str, list[dict[str, Any]]],
    ) -> None:
        for task in job.tasks:
            if instances is not None and task.instance not in instances:
                continue
            task.kill_requested = True
            if task.state in TERMINAL or task.state in (S.KILLING, S.PREEMPTING):
                continue  # ending already; a preempted run ends KILLED, not re-queued
            ref = {"job_id": job.job_id, "instance": task.instance, "run": task.run}
            if is_on_host(task.state) and task.host:
                self._propose(batches, ref, S.KILLING, "kill requested")
                grace = job.task_spec(task.instance)["kill_grace_period_s"]
                kills.setdefault(task.host, []).append(
                    {"job_id": job.job_id, "instance": task.instance, "run": task.run,
                     "grace_period_s": grace, "reason": "kill requested"})
            else:
                self._propose(batches, ref, S.KILLED, "kill requested")
                if task.state == S.PLACED and task.host:
                    # the host manager may launch it before it sees the kill: the agent
                    # remembers killed runs and never starts them
                    kills.setdefault(task.host, []).append(
                        {"job_id": job.job_id, "instance": task.instance, "run": task.run,
                         "grace_period_s": 0.0, "reason": "kill requested"})

    def _commit(self, batches: dict[str, list[dict[str, Any]]], now_ms: int) -> list[Event]:
        events: list[Event] = []
        for job_id in sorted(batches):
            changes = batches[job_id]
            if not changes:
                continue
            ev = Event("TaskStateChanged", job_id, {"job_id": job_id, "at": now_ms,
                                                     "changes": changes})
            self.apply(ev.type, ev.body)
            events.append(ev)
            events.extend(self._job_state_events(self.jobs[job_id], now_ms))
        return events

    def _job_state_events(self, job: JobRecord, now_ms: int) -> list[Event]:
        new_state = derive_job_state(job.counts, len(job.tasks), job.kill_requested)
        if new_state == job.state:
            return []
        ev = Event("JobStateChanged", job.job_id, {
            "job_id": job.job_id, "at": now_ms, "state": new_state.value,
            "previous_state": job.state.value,
            "task_counts": {s.value: n for s, n in sorted(job.counts.items()) if n}})
        self.apply(ev.type, ev.body)
        return [ev]


def _preempted_reason(reason: str) -> str:
    return reason if reason.startswith(PREEMPTED) else PREEMPTED


def _requeued(instance: int, run: int, reason: str, failures: int) -> dict[str, Any]:
    """The next run of a preempted task: PENDING, failures unchanged."""
    return {"instance": instance, "run": run + 1, "state": S.PENDING.value,
            "previous_state": S.INITIALIZED.value,
            "reason": f"{PREEMPTED}: run {run} was preempted; {reason}", "host": None,
            "exit_code": None, "failures": failures}
