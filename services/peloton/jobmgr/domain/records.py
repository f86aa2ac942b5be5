"""The job manager's records: a job (its typed spec and tasks), a task's current run, one
state change, and the batch of changes one decision makes (pure data, no decisions).

A change record is the body of one TaskStateChanged entry (schema TaskTransition, v2:
`not_before_ms` and `round` added). `Batch` holds the changes decided while handling one
input, per job in decision order, and indexes the newest change of every task so a later
decision in the same input sees it in O(1) (no scan of the batch per task).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from peloton.model.backoff import RestartBackoff
from peloton.model.quickinit import quick_init
from peloton.model.spec import LONG_RUNNING, JobSpec, JobType
from peloton.model.taskstate import TERMINAL, JobState, TaskState, task_state

__all__ = ["TaskRecord", "JobRecord", "Outgoing", "Change", "Pending", "Batch", "change"]

S = TaskState
Change = dict[str, Any]


@dataclass(slots=True)
class Outgoing:
    """A task's previous run, still on a draining host while its replacement starts."""

    run: int
    host: str
    config_version: int
    ending: bool = False  # its kill was decided (a KILLING change of it)

    def to_row(self) -> list[Any]:
        return [self.run, self.host, self.config_version, self.ending]

    @classmethod
    def from_row(cls, row: list[Any] | None) -> Outgoing | None:
        if row is None:
            return None
        run, host, version, ending = row
        return cls(int(run), str(host), int(version), bool(ending))


@dataclass(slots=True)
class TaskRecord:
    """One task and its current run, as the job manager's own events left it."""

    instance: int
    run: int = 1
    state: TaskState = S.INITIALIZED
    host: str | None = None
    failures: int = 0
    reason: str = ""
    exit_code: int | None = None
    kill_requested: bool = False
    since: int = 0  # event time of the run's last change (timeouts count from it)
    round: int = -1  # the placement round the run holds while PLACED
    not_before_ms: int | None = None  # retry backoff after a placement timeout
    placement_attempts: int = 0  # placement timeouts of the current run
    unreached_run: int = 0  # a run that ended here before any agent was told (kill it later)
    placed_round: int = -1  # the newest placement round of this run seen (any state)
    health: str = ""  # the current run's health (model.health.HealthState; "" = none yet)
    backoff: RestartBackoff = field(default_factory=RestartBackoff)  # long-running jobs
    pinned_host: str | None = None  # the current run may only be placed there
    volume_host: str | None = None  # a stateful instance's volume lives on this host
    config_version: int = 1  # the job config version the current run runs
    version_failures: int = 0  # runs at config_version that ended on their own, in a row
    outgoing: Outgoing | None = None  # the run a drain replaces, still serving (handover)
    in_place: bool = False  # the current run is softly pinned to its old host (restarts)


@dataclass(slots=True)
class JobRecord:
    job_id: str
    spec: JobSpec
    tasks: list[TaskRecord]
    state: JobState = JobState.PENDING
    counts: Counter[TaskState] = field(default_factory=Counter)
    kill_requested: bool = False
    ended_at: int | None = None  # event time the job became terminal (retention counts)
    versions: dict[int, JobSpec] = field(default_factory=dict)  # config version -> spec

    def __post_init__(self) -> None:
        self.versions.setdefault(1, self.spec)

    def spec_of(self, version: int) -> JobSpec:
        """The spec a run of `version` runs (the newest one for an unknown version)."""
        return self.versions.get(version, self.spec)

    def health_checked(self, task: TaskRecord) -> bool:
        """Whether the task's current run has a health check (its version's spec)."""
        return bool(self.spec_of(task.config_version).task(task.instance)
                    .get("health_check_json"))

    @property
    def long_running(self) -> bool:
        """SERVICE, STATEFUL and DAEMON instances run until stopped (restarted on exit)."""
        return self.spec.type in LONG_RUNNING

    @property
    def stateful(self) -> bool:
        return self.spec.type == JobType.STATEFUL

    @property
    def has_controller(self) -> bool:
        return self.spec.task(0).controller

    def controller_state(self) -> TaskState | None:
        """Instance 0's state when the job has a controller task, else None."""
        return self.tasks[0].state if self.has_controller else None


def change(
    instance: int, run: int, state: TaskState, previous: TaskState, reason: str,
    host: str | None, exit_code: int | None, failures: int, *,
    not_before_ms: int | None = None, round_: int = -1, pinned_host: str | None = None,
) -> Change:
    return {"instance": instance, "run": run, "state": state.value,
            "previous_state": previous.value, "reason": reason, "host": host,
            "exit_code": exit_code, "failures": failures, "not_before_ms": not_before_ms,
            "round": round_, "pinned_host": pinned_host}


@quick_init
@dataclass(frozen=True, slots=True)
class Pending:
    """A task's run as the book plus the batch decided so far show it."""

    state: TaskState
    run: int
    host: str | None
    failures: int
    round: int
    placed_round: int = -1  # the newest placement round of the run seen (see TaskRecord)


class Batch:
    """Changes (per job, in order) and agent kills decided while handling one input."""

    def __init__(self) -> None:
        self.changes: dict[str, list[Change]] = {}
        self.kills: dict[str, list[dict[str, Any]]] = {}
        self.health: dict[str, list[dict[str, Any]]] = {}  # TaskHealthChanged entries
        self._latest: dict[tuple[str, int], Change] = {}
        self._rounds: dict[tuple[str, int], tuple[int, int]] = {}  # key -> (run, round)
        self._past: dict[tuple[str, int, int], str] = {}  # older run -> state decided

    def add(self, job_id: str, ch: Change) -> None:
        key = (job_id, ch["instance"])
        self.changes.setdefault(job_id, []).append(ch)
        self._latest[key] = ch
        if ch["round"] >= 0:
            run, seen = self._rounds.get(key, (ch["run"], -1))
            self._rounds[key] = (ch["run"], max(seen, ch["round"]) if run == ch["run"]
                                 else ch["round"])

    def add_past(self, job_id: str, ch: Change) -> None:
        """A change of a task's older run (a drain's outgoing run, see handover): it is
        published with the others but never becomes the task's pending run."""
        self.changes.setdefault(job_id, []).append(ch)
        self._past[(job_id, ch["instance"], ch["run"])] = ch["state"]

    def past_decided(self, job_id: str, instance: int, run: int, final: bool = False
                     ) -> bool:
        """Whether this batch already changed that older run (to a terminal state when
        `final`)."""
        state = self._past.get((job_id, instance, run))
        return state is not None and (not final or S(state) in TERMINAL)

    def pending(self, job_id: str, task: TaskRecord) -> Pending:
        key = (job_id, task.instance)
        ch = self._latest.get(key)
        if ch is None:
            return Pending(task.state, task.run, task.host, task.failures, task.round,
                           task.placed_round)
        placed = task.placed_round if ch["run"] == task.run else -1
        run, seen = self._rounds.get(key, (ch["run"], -1))
        if run == ch["run"]:
            placed = max(placed, seen)
        return Pending(task_state(ch["state"]), ch["run"], ch["host"], ch["failures"], ch["round"],
                       placed)

    def kill(self, host: str, job_id: str, instance: int, run: int, grace_s: float,
             reason: str) -> None:
        self.kills.setdefault(host, []).append(
            {"job_id": job_id, "instance": instance, "run": run, "grace_period_s": grace_s,
             "reason": reason})

    def health_changed(self, job_id: str, instance: int, run: int, health: str,
                       reason: str) -> None:
        self.health.setdefault(job_id, []).append(
            {"instance": instance, "run": run, "health": health, "reason": reason})

    def health_of(self, job_id: str, instance: int, recorded: str) -> str:
        """The run's health as the book (`recorded`) plus this batch show it."""
        for entry in reversed(self.health.get(job_id, ())):
            if entry["instance"] == instance:
                return str(entry["health"])
        return recorded

    def __bool__(self) -> bool:
        return bool(self.changes) or bool(self.kills) or bool(self.health)
