"""A bystander that folds the log as the runner appends to it: what a test asserts on.

`Watch` reads job-submitted, job-events and task-status-reported (never a core's memory):
- `jobs`: job id -> the job's latest state as the job manager published it
  ("SUBMITTED" until JobCreated, "REJECTED" after JobRejected);
- `tasks`: (job id, instance) -> the latest (run, state, host, reason) from
  TaskStateChanged, newest run wins;
- runs alive on agents: a run is alive from the agent's STARTING/RUNNING report until its
  terminal report, or until its agent process dies (`host_died`, told by the runner). A
  second run of the same task alive at the same time, or the same run alive on two
  hosts, is a violation (`violations`), checked as each report is read. The one allowed
  overlap is a drain's handover (jobmgr/domain/handover.py): a run the job manager
  created as a REPLACEMENT may start while the one run it replaces still serves
  (`handovers` counts them).
Reports are read in the order they were appended; an agent reports a run's end before
the job manager can start another run, so no false alarm comes from report lag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from peloton.jobmgr.domain.handover import REPLACEMENT
from peloton.model.taskstate import TERMINAL, TERMINAL_JOB

__all__ = ["Watch", "TaskView"]

_STARTED = frozenset({"STARTING", "RUNNING"})
_TERMINAL_TASK = frozenset(s.value for s in TERMINAL)
_TERMINAL_JOB = frozenset(s.value for s in TERMINAL_JOB)
TaskKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class TaskView:
    run: int
    state: str
    host: str | None
    reason: str


@dataclass
class Watch:
    jobs: dict[str, str] = field(default_factory=dict)
    submitted_at: dict[str, int] = field(default_factory=dict)
    ended_at: dict[str, int] = field(default_factory=dict)
    tasks: dict[TaskKey, TaskView] = field(default_factory=dict)
    alive: dict[TaskKey, dict[int, str]] = field(default_factory=dict)  # run -> host
    succeeded_runs: dict[TaskKey, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    replacements: dict[TaskKey, set[int]] = field(default_factory=dict)  # runs, handover
    handovers: int = 0
    reruns_after_success: list[str] = field(default_factory=list)

    TOPICS = ("job-submitted", "job-events", "task-status-reported")

    # ---- what a test asks ------------------------------------------------------------
    def unfinished(self) -> list[str]:
        """Jobs submitted and not in a terminal state (sorted)."""
        return sorted(j for j, s in self.jobs.items() if s not in _TERMINAL_JOB)

    def all_terminal(self) -> bool:
        return bool(self.jobs) and not self.unfinished()

    def states(self) -> dict[str, int]:
        """How many jobs are in each state."""
        out: dict[str, int] = {}
        for s in self.jobs.values():
            out[s] = out.get(s, 0) + 1
        return dict(sorted(out.items()))

    def stuck_tasks(self) -> dict[TaskKey, TaskView]:
        """Latest views of the non-terminal tasks of unfinished jobs."""
        open_jobs = set(self.unfinished())
        return {k: v for k, v in sorted(self.tasks.items())
                if k[0] in open_jobs and v.state not in _TERMINAL_TASK}

    # ---- folding ---------------------------------------------------------------------
    def observe(self, etype: str, body: dict[str, Any], now_ms: int) -> None:
        if etype == "JobSubmitted":
            self.jobs.setdefault(body["job_id"], "SUBMITTED")
            self.submitted_at.setdefault(body["job_id"], now_ms)
        elif etype == "JobCreated":
            if self.jobs.get(body["job_id"], "SUBMITTED") == "SUBMITTED":
                self.jobs[body["job_id"]] = "PENDING"
        elif etype == "JobRejected":
            self.jobs[body["job_id"]] = "REJECTED"
            self.ended_at.setdefault(body["job_id"], now_ms)
        elif etype == "JobStateChanged":
            self.jobs[body["job_id"]] = body["state"]
            if body["state"] in _TERMINAL_JOB:
                self.ended_at.setdefault(body["job_id"], now_ms)
        elif etype == "TaskStateChanged":
            self._task_changes(body)
        elif etype == "TaskStatusReported":
            self._statuses(body)

    def _task_changes(self, body: dict[str, Any]) -> None:
        for ch in body["changes"]:
            key = (body["job_id"], ch["instance"])
            old = self.tasks.get(key)
            if ch["state"] == "PENDING" and ch["reason"].startswith(REPLACEMENT):
                self.replacements.setdefault(key, set()).add(ch["run"])
            if old is None or ch["run"] >= old.run:
                self.tasks[key] = TaskView(ch["run"], ch["state"], ch["host"], ch["reason"])

    def _statuses(self, body: dict[str, Any]) -> None:
        host = body["host"]
        for st in body["statuses"]:
            key = (st["job_id"], st["instance"])
            run = st["run"]
            runs = self.alive.setdefault(key, {})
            if st["state"] in _STARTED and runs.get(run) == host:
                pass  # a later report of a run already alive here (its health, RUNNING)
            elif st["state"] in _STARTED:
                other_host = runs.get(run)
                if other_host is not None and other_host != host:
                    self.violations.append(
                        f"run {key[0]}-{key[1]}-{run} alive on {other_host} and {host}")
                others = sorted(r for r in runs if r != run)
                if (len(others) == 1 and others[0] < run
                        and run in self.replacements.get(key, ())):
                    if run not in runs:  # a drain's replacement, the old run still serves
                        self.handovers += 1
                elif others:
                    self.violations.append(
                        f"task {key[0]}-{key[1]}: run {run} started on {host} while run(s) "
                        f"{others} still alive on {[runs[r] for r in others]}")
                done = self.succeeded_runs.get(key)
                if done is not None and run not in runs:
                    self.reruns_after_success.append(
                        f"task {key[0]}-{key[1]}: run {run} started after run {done} succeeded")
                runs[run] = host
            elif st["state"] in _TERMINAL_TASK:
                if runs.get(run) == host:
                    del runs[run]
                if st["state"] == "SUCCEEDED":
                    self.succeeded_runs.setdefault(key, run)
            if not runs:
                del self.alive[key]

    def host_died(self, host: str) -> None:
        """The agent process of `host` died: every run alive there died with it."""
        for key in [k for k, runs in self.alive.items() if host in runs.values()]:
            runs = self.alive[key]
            for run in [r for r, h in runs.items() if h == host]:
                del runs[run]
            if not runs:
                del self.alive[key]
