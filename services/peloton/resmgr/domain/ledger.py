"""What the resource manager knows about tasks and capacity, folded from facts (pure).

Contract: `fold(type, body)` applies JobCreated, TaskStateChanged, TasksAdmitted,
TasksPreempted and OfferReceived/HostLost; it is idempotent (absolute states, stale runs
ignored), so every resmgr instance can fold the whole log and stand by hot. A task counts
as *demand* while its current run is PENDING and not yet admitted, and as *allocation*
from admission until its run ends. A run chosen for preemption carries `preempted_at`
until the run ends.

Orders come from event times, not from the order records were folded in (jobs' FIFO
`seq` is JobCreated's `at`; `started_seq` is the `at` of the change that started the run),
so two instances that folded the same records from several partitions in different
interleavings hold the same ledger (ties are broken by ids where the order is used).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from peloton.model.resources import Resources

__all__ = ["Ledger", "TaskEntry", "JobInfo"]

_HOLDING = {
    "READY",
    "PLACING",
    "PLACED",
    "LAUNCHING",
    "LAUNCHED",
    "STARTING",
    "RUNNING",
    "PREEMPTING",
    "KILLING",
}
_RUNNING_ORDER = {"LAUNCHING", "LAUNCHED", "STARTING", "RUNNING"}


@dataclass(frozen=True, slots=True)
class JobInfo:
    job_id: str
    pool: str
    priority: int
    preemptible: bool
    revocable: bool
    gang_size: int
    seq: int
    spec: dict[str, Any]

    def resources(self, instance: int) -> Resources:
        spec = self.spec["instance_tasks"].get(str(instance), self.spec["default_task"])
        return Resources.from_mapping(spec["resources"])


@dataclass(slots=True)
class TaskEntry:
    job: JobInfo
    instance: int
    resources: Resources
    run: int = 1
    state: str = "INITIALIZED"
    admitted: bool = False
    started_seq: int = 0
    preempted_at: int | None = None

    @property
    def task_id(self) -> str:
        return f"{self.job.job_id}-{self.instance}"

    @property
    def holding(self) -> bool:
        return self.admitted or self.state in _HOLDING

    @property
    def pending(self) -> bool:
        return self.state == "PENDING" and not self.admitted


class Ledger:
    def __init__(self) -> None:
        self.jobs: dict[str, JobInfo] = {}
        self.tasks: dict[tuple[str, int], TaskEntry] = {}
        self.hosts: dict[str, tuple[bool, Resources]] = {}
        self.version = 0  # bumps on every change that may alter demand or capacity
        self.hosts_version = 0  # bumps on every change of capacity

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        if etype == "JobCreated":
            self._job_created(body)
        elif etype == "TaskStateChanged":
            self._task_states(body)
        elif etype == "TasksAdmitted":
            for t in body["tasks"]:
                self.mark_admitted(t["job_id"], t["instance"], t["run"])
        elif etype == "TasksPreempted":
            for t in body["tasks"]:
                self.mark_preempted(t["job_id"], t["instance"], t["run"], body["at"])
        elif etype == "OfferReceived":
            for offer in body["offers"]:
                entry = (offer["available"], Resources.from_mapping(offer["capacity"]))
                if self.hosts.get(offer["host"]) != entry:
                    self.hosts[offer["host"]] = entry
                    self.version += 1
                    self.hosts_version += 1
        elif etype == "HostLost":
            old = self.hosts.get(body["host"])
            if old is not None and old[0]:
                self.hosts[body["host"]] = (False, old[1])
                self.version += 1
                self.hosts_version += 1

    def _job_created(self, body: dict[str, Any]) -> None:
        if body["job_id"] in self.jobs:
            return
        job = JobInfo(
            body["job_id"],
            body["respool"],
            body["priority"],
            body["preemptible"],
            body["revocable"],
            body["gang_size"],
            body["at"],
            body,
        )
        self.jobs[job.job_id] = job
        for i in range(body["instance_count"]):
            self.tasks[(job.job_id, i)] = TaskEntry(job, i, job.resources(i))

    def _task_states(self, body: dict[str, Any]) -> None:
        for ch in body["changes"]:
            entry = self.tasks.get((body["job_id"], ch["instance"]))
            if entry is None or ch["run"] < entry.run:
                continue
            if ch["run"] > entry.run:
                entry.run, entry.admitted, entry.preempted_at = ch["run"], False, None
                entry.started_seq = 0
            if entry.state == ch["state"]:
                continue
            entry.state = ch["state"]
            # `admitted` bridges admission and the job manager's READY; after any change
            # the state itself says whether the run holds (so the flag no longer depends
            # on which of the two facts was folded first)
            entry.admitted = False
            if entry.state in _RUNNING_ORDER and not entry.started_seq:
                entry.started_seq = body["at"]
            if entry.state not in _HOLDING:
                entry.preempted_at = None
            self.version += 1

    def mark_admitted(self, job_id: str, instance: int, run: int) -> None:
        entry = self.tasks.get((job_id, instance))
        if entry is not None and entry.run == run and entry.state in ("PENDING", "INITIALIZED"):
            if not entry.admitted:
                entry.admitted = True
                self.version += 1

    def mark_preempted(self, job_id: str, instance: int, run: int, at: int) -> None:
        entry = self.tasks.get((job_id, instance))
        if entry is not None and entry.run == run and entry.holding:
            if entry.preempted_at is None:
                entry.preempted_at = at
                self.version += 1

    def capacity(self) -> Resources:
        total = Resources()
        for available, cap in self.hosts.values():
            if available:
                total = total + cap
        return total

    def active(self) -> Iterator[TaskEntry]:
        """Tasks that are pending or hold allocation, in a stable order."""
        for key in sorted(self.tasks):
            entry = self.tasks[key]
            if entry.pending or entry.holding:
                yield entry
