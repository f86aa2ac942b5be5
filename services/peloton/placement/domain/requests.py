"""Task requests for the engine, built from typed job specs and cached (pure).

`Requests.get(spec, instance, run, version=v)` is the engine's `TaskRequest` for one run:
`spec` is the spec of the run's config version `v` (the board picks it: JobCreated's for
version 1, a JobSpecChanged's for later ones), the task spec is `spec.task(instance)`
and the gang is `spec.gang_id(instance, run)` (the one gang rule: a retried gang member
is placed alone). A run pinned to a host (`pinned_host`)
gets the hard constraint `hostname == <host>` ANDed with its task constraint (pins.py).
A run's request is built once while it waits (a cached request serves the instance's
run only with the same gang, pin and version: two runs of one instance may differ);
the parsed parts of a task spec (resources, ports, constraint, labels) are shared
by every instance with that spec, which also lets the engine group identical tasks
cheaply. Caches only: dropping them changes no decision.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from peloton.model.constraint import Constraint, parse_constraint
from peloton.model.ids import task_id as make_task_id
from peloton.model.resources import Resources
from peloton.model.spec import JobSpec
from peloton.placement.domain.pins import pin_constraint
from peloton.placement.domain.types import Strategy, TaskRequest

__all__ = ["Requests", "Request"]

_MAX_CONSTRAINTS = 10_000


class Request(NamedTuple):
    request: TaskRequest
    spec_resources: dict[str, float]
    """The task spec's resources, as PlacementMade carries them."""
    pinned_host: str | None = None
    """The only host the run may go to (its request's constraint says so)."""
    version: int = 1
    """The job config version whose task spec the request was built from."""


@dataclass(frozen=True, slots=True)
class _SpecParts:
    resources: Resources
    ports: tuple[str, ...]
    constraint: Constraint | None
    labels: Mapping[str, str]
    revocable: bool
    spec_resources: dict[str, float]


class Requests:
    def __init__(self) -> None:
        self._requests: dict[str, dict[tuple[int, bool], Request]] = {}  # by job
        self._parts: dict[str, dict[tuple[int, int | None], _SpecParts]] = {}  # by job
        self._constraints: dict[str, Constraint] = {}
        self._pinned: dict[tuple[str, Constraint | None], Constraint] = {}

    def get(self, spec: JobSpec, instance: int, run: int, alone: bool = False,
            pinned_host: str | None = None, version: int = 1) -> Request:
        """The run's request; `alone` places a gang member without its gang (its gang
        already went ahead, see PlacementBoard._gang_gone); `pinned_host` the only host
        it may go to; `spec` is the spec of the run's config `version`."""
        gang = None if alone else spec.gang_id(instance, run)
        per_job = self._requests.setdefault(spec.job_id, {})
        which = (instance, gang is not None)
        cached = per_job.get(which)
        if (cached is None or cached.pinned_host != pinned_host
                or cached.version != version):  # the pin and version are in the key
            parts = self._spec_parts(spec, instance, version)
            constraint = parts.constraint
            if pinned_host is not None:
                constraint = self._pin(pinned_host, constraint)
            cached = per_job[which] = Request(TaskRequest(
                make_task_id(spec.job_id, instance), spec.job_id, parts.resources,
                parts.ports, constraint, parts.labels, gang,
                1 if gang is None else spec.gang_members(instance, run),
                Strategy(spec.placement_strategy),
                parts.revocable, spec.priority), parts.spec_resources, pinned_host, version)
        return cached

    def _pin(self, host: str, constraint: Constraint | None) -> Constraint:
        """`pin_constraint`, shared by the runs with the same pin and task constraint
        (so the engine groups them by object identity, cheaply)."""
        key = (host, constraint)
        found = self._pinned.get(key)
        if found is None:
            if len(self._pinned) >= _MAX_CONSTRAINTS:
                self._pinned.clear()
            found = self._pinned[key] = pin_constraint(host, constraint)
        return found

    def revocable(self, spec: JobSpec, instance: int, version: int = 1) -> bool:
        return self._spec_parts(spec, instance, version).revocable

    def check(self, spec: JobSpec, version: int = 1) -> None:
        """Parse every task spec of the job now (ValueError/TypeError/KeyError if one
        cannot be read), as a restored board must be able to place any of its runs."""
        Strategy(spec.placement_strategy)
        for instance in (-1, *spec.instance_tasks):
            task = spec.task(instance)
            if not all(isinstance(p, str) for p in task.ports) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in task.labels.items()):
                raise TypeError(f"job {spec.job_id}: port names and labels must be strings")
            self._spec_parts(spec, instance, version)

    def forget_run(self, job_id: str, instance: int) -> None:
        """The run reached its host or ended: its request is built again if needed."""
        per_job = self._requests.get(job_id)
        if per_job:
            per_job.pop((instance, False), None)
            per_job.pop((instance, True), None)

    def forget_job(self, job_id: str) -> None:
        self._requests.pop(job_id, None)
        self._parts.pop(job_id, None)

    def _spec_parts(self, spec: JobSpec, instance: int, version: int = 1) -> _SpecParts:
        per_job = self._parts.setdefault(spec.job_id, {})
        which = (version, instance if spec.has_override(instance) else None)
        parts = per_job.get(which)
        if parts is None:
            task = spec.task(instance)
            raw = task.constraint_json
            constraint = None
            if raw:
                constraint = self._constraints.get(raw)
                if constraint is None:
                    if len(self._constraints) >= _MAX_CONSTRAINTS:
                        self._constraints.clear()
                    constraint = self._constraints[raw] = parse_constraint(json.loads(raw))
            parts = per_job[which] = _SpecParts(
                task.resources, tuple(p.partition(":")[0] for p in task.ports), constraint,
                dict(task.labels), spec.revocable or task.revocable, task.resources.as_dict())
        return parts
