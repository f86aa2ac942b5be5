"""The API's resources as dataclasses. `from_dict` takes the API's JSON object: fields it
does not name are ignored there but kept whole in `raw` (newer servers may add fields)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["Job", "Task", "TaskTransition", "Pool", "Host", "Update", "Page", "WatchEvent"]

M = TypeVar("M", bound="Model")
T = TypeVar("T")


@dataclass
class Model:
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls: type[M], data: dict[str, Any]) -> M:
        names = {f.name for f in dataclasses.fields(cls)} - {"raw"}
        return cls(raw=dict(data), **{k: v for k, v in data.items() if k in names})


@dataclass
class Job(Model):
    job_id: str = ""
    name: str = ""
    owner: str = ""
    type: str = ""
    respool: str = ""
    instance_count: int = 0
    priority: int = 0
    preemptible: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    description: str = ""
    state: str = ""
    previous_state: str | None = None
    submitted_at: int | None = None
    created_at: int | None = None
    updated_at: int = 0
    rejection_reasons: list[str] = field(default_factory=list)
    task_counts: dict[str, int] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class TaskTransition(Model):
    run: int = 0
    state: str = ""
    previous_state: str = ""
    reason: str = ""
    host: str | None = None
    exit_code: int | None = None
    failures: int = 0
    at: int = 0
    config_version: int = 1


@dataclass
class Task(Model):
    instance: int = 0
    run: int = 0
    state: str = ""
    previous_state: str = ""
    host: str | None = None
    reason: str = ""
    exit_code: int | None = None
    failures: int = 0
    updated_at: int = 0
    config_version: int = 1
    health: str | None = None
    sandbox: str | None = None
    history: list[TaskTransition] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        task = super().from_dict(data)
        task.history = [TaskTransition.from_dict(h) for h in data.get("history") or []]
        return task


@dataclass
class Pool(Model):
    pool: str = ""
    parent: str | None = None
    cycle: int = 0
    at: int = 0
    capacity: dict[str, float] = field(default_factory=dict)
    reservation: dict[str, float] = field(default_factory=dict)
    limit: dict[str, float] = field(default_factory=dict)
    entitlement: dict[str, float] = field(default_factory=dict)
    allocation: dict[str, float] = field(default_factory=dict)
    demand: dict[str, float] = field(default_factory=dict)
    share: dict[str, float] = field(default_factory=dict)
    config: dict[str, Any] | None = None


@dataclass
class Host(Model):
    host: str = ""
    state: str = ""
    capacity: dict[str, float] = field(default_factory=dict)
    free: dict[str, float] | None = None
    labels: dict[str, str] = field(default_factory=dict)
    maintenance_state: str = "UP"
    maintenance_reason: str = ""
    runs: list[dict[str, Any]] = field(default_factory=list)
    task_count: int = 0


@dataclass
class Update(Model):
    job_id: str = ""
    update_id: str = ""
    state: str = ""
    previous_state: str | None = None
    reason: str = ""
    instances: int = 0
    done: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    in_flight: list[int] = field(default_factory=list)
    created_at: int = 0
    updated_at: int | None = None


@dataclass
class Page(Generic[T]):
    """One page of a list: pass `next_cursor` back as `cursor` (None: the last page)."""
    items: list[T]
    next_cursor: str | None


@dataclass
class WatchEvent:
    """One Server-Sent Event: `event` is "job", "task" or "host"; `data` its JSON; `id`
    the resume point (send it back as last_event_id)."""
    event: str
    data: dict[str, Any]
    id: str | None


class SSEParser:
    """Lines of a text/event-stream in, WatchEvents out (comments and retry ignored)."""

    def __init__(self) -> None:
        self._event = "message"
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, line: str) -> WatchEvent | None:
        line = line.rstrip("\r\n")
        if not line:
            if not self._data:
                self._event = "message"
                return None
            ev = WatchEvent(self._event, json.loads("\n".join(self._data)), self._id)
            self._event, self._data = "message", []
            return ev
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value
        return None
