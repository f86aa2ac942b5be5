"""Job and task specs as frozen typed values, decoded once from a JobCreated body.

The shell (or a core's fold, at its edge) turns a JobCreated body into a `JobSpec` with
`JobSpec.from_body`; cores read typed fields and never index the body. `spec.task(i)` is
the one lookup of an instance's task spec; `spec.gang_id(i, run)` is the one gang rule:
instances 0..gang_size-1 of a job with gang_size > 1 form one gang on their first run; a
retried member (run > 1) is scheduled alone, because the rest of its gang already runs.
`to_body` gives the exact body back (round trip), so snapshots and events can carry it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from peloton.model.quickinit import quick_init
from peloton.model.resources import Resources

__all__ = ["TaskSpec", "JobSpec", "JobType", "LONG_RUNNING"]


class JobType:
    """Job type names as JobSubmitted/JobCreated carry them."""

    BATCH = "BATCH"
    SERVICE = "SERVICE"
    STATEFUL = "STATEFUL"
    DAEMON = "DAEMON"


#: Job types whose instances run until stopped: an ended run is restarted (with backoff).
LONG_RUNNING = frozenset({JobType.SERVICE, JobType.STATEFUL, JobType.DAEMON})


@quick_init
@dataclass(frozen=True, slots=True)
class TaskSpec:
    """A fully merged, validated task config (schema record peloton.events.TaskSpec)."""

    resources: Resources
    command: str
    env: Mapping[str, str] = field(default_factory=dict)
    constraint_json: str | None = None
    max_failures: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    ports: tuple[str, ...] = ()
    kill_grace_period_s: float = 0.0
    controller: bool = False
    """A controller task (instance 0 only): the job's end follows it (JobCreated.v2)."""
    revocable: bool = False
    """Runs on revocable (slack) resources; only in preemptible jobs (JobCreated.v2)."""
    body: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The record this spec was decoded from (fields of newer schema versions included)."""

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> TaskSpec:
        return cls(
            resources=Resources.from_mapping(body["resources"]),
            command=body["command"],
            env=dict(body.get("env") or {}),
            constraint_json=body.get("constraint_json"),
            max_failures=int(body.get("max_failures", 0)),
            labels=dict(body.get("labels") or {}),
            ports=tuple(body.get("ports") or ()),
            kill_grace_period_s=float(body.get("kill_grace_period_s", 0.0)),
            controller=bool(body.get("controller", False)),
            revocable=bool(body.get("revocable", False)),
            body=dict(body),
        )

    def to_body(self) -> dict[str, Any]:
        out = dict(self.body)
        out.update({
            "resources": self.resources.as_dict(), "command": self.command,
            "env": dict(self.env), "constraint_json": self.constraint_json,
            "max_failures": self.max_failures, "labels": dict(self.labels),
            "ports": list(self.ports), "kill_grace_period_s": self.kill_grace_period_s,
            "controller": self.controller, "revocable": self.revocable})
        return out

    def get(self, name: str, default: Any = None) -> Any:
        """A field of a newer schema version that this class does not name yet."""
        return self.body.get(name, default)


@quick_init
@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job as the job manager accepted it (schema record peloton.events.JobCreated)."""

    job_id: str
    at: int
    name: str
    owner: str
    type: str
    respool: str
    labels: Mapping[str, str]
    instance_count: int
    priority: int
    preemptible: bool
    revocable: bool
    gang_size: int
    placement_strategy: str
    default_task: TaskSpec
    instance_tasks: Mapping[int, TaskSpec] = field(default_factory=dict)
    body: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> JobSpec:
        default = TaskSpec.from_body(body["default_task"])
        overrides = {int(k): TaskSpec.from_body(v)
                     for k, v in (body.get("instance_tasks") or {}).items()}
        return cls(
            job_id=_text(body["job_id"], "job_id"), at=int(body["at"]),
            name=_text(body["name"], "name"), owner=_text(body.get("owner", ""), "owner"),
            type=body.get("type", JobType.BATCH),
            respool=_text(body["respool"], "respool"), labels=dict(body.get("labels") or {}),
            instance_count=int(body["instance_count"]), priority=int(body["priority"]),
            preemptible=bool(body["preemptible"]), revocable=bool(body["revocable"]),
            gang_size=int(body["gang_size"]), placement_strategy=body["placement_strategy"],
            default_task=default, instance_tasks=overrides,
            body=dict(body),
        )

    def to_body(self) -> dict[str, Any]:
        out = dict(self.body)
        out.update({
            "job_id": self.job_id, "at": self.at, "name": self.name, "owner": self.owner,
            "type": self.type, "respool": self.respool, "labels": dict(self.labels),
            "instance_count": self.instance_count, "priority": self.priority,
            "preemptible": self.preemptible, "revocable": self.revocable,
            "gang_size": self.gang_size, "placement_strategy": self.placement_strategy,
            "default_task": self.default_task.to_body(),
            "instance_tasks": {str(k): v.to_body()
                               for k, v in sorted(self.instance_tasks.items())}})
        return out

    def task(self, instance: int) -> TaskSpec:
        """The task spec of one instance (its override, else the default)."""
        return self.instance_tasks.get(instance, self.default_task)

    def has_override(self, instance: int) -> bool:
        return instance in self.instance_tasks

    def gang_id(self, instance: int, run: int = 1) -> str | None:
        """The gang this run is scheduled with, or None when it is scheduled alone."""
        if self.gang_size > 1 and instance < self.gang_size and run == 1:
            return f"{self.job_id}/gang"
        return None

    def gang_members(self, instance: int, run: int = 1) -> int:
        """How many runs must be admitted and placed together with this one (>= 1)."""
        return self.gang_size if self.gang_id(instance, run) is not None else 1

    def resources(self, instance: int) -> Resources:
        return self.task(instance).resources

    def get(self, name: str, default: Any = None) -> Any:
        """A field of a newer schema version that this class does not name yet."""
        return self.body.get(name, default)


def _text(value: Any, name: str) -> str:
    """A string field of a spec body (events are typed by Avro; a snapshot's JSON is not:
    a wrong type is refused here, as TypeError, rather than deep inside a core)."""
    if not isinstance(value, str):
        raise TypeError(f"job spec {name}: expected a string, got {type(value).__name__}")
    return value
