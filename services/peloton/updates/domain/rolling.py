"""The rolling-update planner: Peloton's UpdateSpec, plus maxUnavailable and a canary.

Inputs (plain values, no clock):
- `Update`: the update record the job manager persists: its `UpdateSettings`, the old and
  new instance count and config version, its `UpdateStatus` and its `Progress` (the
  instances it has touched, and which of them are done or failed).
- ``instances``: the job's instances now, ``{instance: InstanceView}``: the config version
  of the instance's latest run, that run's health (HEALTHY = running and passing its
  checks, or running when it has no check; STOPPED = stopped by a user, it runs nothing),
  the version the job manager drives it to
  (`goal_version`) and how many runs in a row failed at that goal.

`plan(update, instances) -> Plan` returns the next actions, the new update record and a
reason a person can read. Contract:
- Target: rolling forward, instances ``0..new_count-1`` at ``new_version``; rolling back,
  ``0..old_count-1`` at ``old_version``. Work is: ADD a missing instance, UPDATE one whose
  goal is not the target version, REMOVE one at or beyond the target count.
- Order (Peloton): adds, then updates, then removes; within each, instances already
  unavailable (not running, then unhealthy) before available ones, then by instance id.
- Budget: at most ``batch_size`` instances in flight (touched, not yet done or failed;
  0 = no limit). ``max_unavailable`` (None = no limit beyond the batch) caps instances
  down at once, counting those already down: an UPDATE that takes a healthy instance
  down is issued only while fewer than ``max_unavailable`` instances below the target
  count are down or in flight. Updating an instance that is already down, resetting the
  goal of one that already runs the target, adds and removes cost no availability.
- Done: REMOVE when the instance is gone; ADD/UPDATE when its latest run is at the target
  version and HEALTHY, or STOPPED at the target version (a stopped instance takes the new
  config without running; it runs it when started). A stopped instance is not down: the
  update did not take it down, so it costs no availability. Failed: its goal is the
  target and ``failures >= max_instance_retries`` (0 = retried for ever). Done and failed
  are final for a direction.
- Failure: when failed instances reach ``max_tolerable_instance_failures`` (0 = never),
  or when all work is settled with some failed, the update rolls back if
  ``rollback_on_failure`` and it is rolling forward (progress restarts for the way back),
  otherwise it ends FAILED. So does an update that cannot go on: work is held by
  ``max_unavailable``, nothing is in flight, and every instance down is a failed one.
  All work settled with none failed: SUCCEEDED / ROLLED_BACK.
- Canary (beyond Peloton): with ``canary = N``, rolling forward touches at most N
  instances, waits until they are settled, then pauses (reason says so); `resume`
  continues with the rest. Fewer than N instances of work: no pause.
- ``start_paused``: INITIALIZED goes to PAUSED; a resume starts the roll.
- Actions are idempotent requests ("instance i's goal is version v", "instance i goes"):
  the shell publishes them, then stores the returned record; re-planning from the old
  record after a crash issues the same actions again.
- Deterministic and pure: same inputs, same plan; nothing is read but the arguments.

Example (4 instances at v1 -> v2, batch 2, maxUnavailable 1, instance 3 not running):

    ====  =====================================  ==================================
    call  instances                              actions (reason)
    ====  =====================================  ==================================
    1     0,1,2 healthy v1; 3 not running v1     update 3 (already down: free);
                                                 0, 1, 2 wait (max-unavailable 1)
    2     3 healthy v2                           update 0 (1, 2 wait)
    3     0 not running v2                       none: 0 in flight, 1, 2 wait
    4     0 healthy v2                           update 1
    ====  =====================================  ==================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from peloton.updates.domain.states import INITIAL, Trigger, UpdateStatus, apply

__all__ = [
    "Health", "InstanceView", "ActionKind", "Action", "UpdateSettings", "UpdateSpecError",
    "Progress", "Update", "Plan", "plan", "command",
]


class Health(StrEnum):
    HEALTHY = "HEALTHY"
    UNHEALTHY = "UNHEALTHY"      # running, failing its health check
    NOT_RUNNING = "NOT_RUNNING"  # pending, starting, restarting, failed, killed
    STOPPED = "STOPPED"          # stopped by a user (job stop): updated without running


#: Unavailable first (Peloton: unavailable, killed, then available).
_RANK = {Health.STOPPED: 0, Health.NOT_RUNNING: 0, Health.UNHEALTHY: 1, Health.HEALTHY: 2}
_SERVES = frozenset({Health.HEALTHY, Health.STOPPED})  # done at the target; not down


@dataclass(frozen=True, slots=True)
class InstanceView:
    version: int
    health: Health
    goal_version: int | None = None
    failures: int = 0

    @property
    def goal(self) -> int:
        return self.version if self.goal_version is None else self.goal_version


class ActionKind(StrEnum):
    ADD = "add"
    UPDATE = "update"
    REMOVE = "remove"


@dataclass(frozen=True, slots=True)
class Action:
    kind: ActionKind
    instance: int
    version: int | None = None   # None for REMOVE

    def __str__(self) -> str:
        if self.kind is ActionKind.ADD:
            return f"start instance {self.instance} at version {self.version}"
        if self.kind is ActionKind.UPDATE:
            return f"replace instance {self.instance} with version {self.version}"
        return f"remove instance {self.instance}"


class UpdateSpecError(ValueError):
    def __init__(self, field_name: str, reason: str) -> None:
        super().__init__(f"{field_name}: {reason}")
        self.field = field_name
        self.reason = reason


_INT_FIELDS = {  # body key -> (attribute, aliases)
    "batchSize": ("batch_size", ()),
    "maxInstanceRetries": ("max_instance_retries", ("maxInstanceAttempts",)),
    "maxTolerableInstanceFailures": ("max_tolerable_instance_failures",
                                     ("maxFailureInstances",)),
    "canary": ("canary", ()),
}


@dataclass(frozen=True, slots=True)
class UpdateSettings:
    batch_size: int = 0
    max_unavailable: int | None = None
    max_instance_retries: int = 0
    max_tolerable_instance_failures: int = 0
    rollback_on_failure: bool = False
    start_paused: bool = False
    canary: int = 0

    def __post_init__(self) -> None:
        for key, (attr, _) in _INT_FIELDS.items():
            if getattr(self, attr) < 0:
                raise UpdateSpecError(key, "must be >= 0")
        if self.max_unavailable is not None and self.max_unavailable < 1:
            raise UpdateSpecError("maxUnavailable",
                                  "must be >= 1 (leave it out for no limit)")

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> UpdateSettings:
        """Peloton's UpdateSpec field names (camelCase) plus maxUnavailable and canary."""
        known = set(_INT_FIELDS) | {a for _, al in _INT_FIELDS.values() for a in al}
        known |= {"maxUnavailable", "rollbackOnFailure", "startPaused"}
        for key in body:
            if key not in known:
                raise UpdateSpecError(key, "unknown update setting")
        ints: dict[str, int] = {}
        for key, (attr, aliases) in _INT_FIELDS.items():
            name = next((k for k in (key, *aliases) if k in body), key)
            ints[attr] = _int(body.get(name, 0), name)
        raw = body.get("maxUnavailable")
        max_unavailable = None if raw is None else _int(raw, "maxUnavailable")
        flags = {k: body.get(k, False) for k in ("rollbackOnFailure", "startPaused")}
        for k, v in flags.items():
            if not isinstance(v, bool):
                raise UpdateSpecError(k, "must be true or false")
        return cls(max_unavailable=max_unavailable, rollback_on_failure=flags[
            "rollbackOnFailure"], start_paused=flags["startPaused"], **ints)

    def to_body(self) -> dict[str, Any]:
        out: dict[str, Any] = {key: getattr(self, attr) for key, (attr, _) in _INT_FIELDS.items()}
        out.update(rollbackOnFailure=self.rollback_on_failure, startPaused=self.start_paused)
        if self.max_unavailable is not None:
            out["maxUnavailable"] = self.max_unavailable
        return out


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UpdateSpecError(name, "must be an integer")
    return value


@dataclass(frozen=True, slots=True)
class Progress:
    """What the update did in its current direction (reset when it turns back)."""

    touched: Mapping[int, ActionKind] = field(default_factory=dict)
    done: frozenset[int] = frozenset()
    failed: frozenset[int] = frozenset()
    canary_done: bool = False
    pause_reason: str = ""

    @property
    def in_flight(self) -> list[int]:
        return sorted(i for i in self.touched if i not in self.done and i not in self.failed)


@dataclass(frozen=True, slots=True)
class Update:
    settings: UpdateSettings
    old_count: int
    old_version: int
    new_count: int
    new_version: int
    status: UpdateStatus = INITIAL
    progress: Progress = field(default_factory=Progress)
    only: frozenset[int] = frozenset()
    """Roll only these instances (a restart of some instances); empty: every instance.
    Adds and removes are not limited (an update that changes the count rolls all)."""

    @property
    def target(self) -> tuple[int, int]:
        """(instance count, config version) the update drives the job to now."""
        if self.status.backward:
            return self.old_count, self.old_version
        return self.new_count, self.new_version

    def to_dict(self) -> dict[str, Any]:
        p = self.progress
        return {
            "settings": self.settings.to_body(), "old_count": self.old_count,
            "old_version": self.old_version, "new_count": self.new_count,
            "new_version": self.new_version, "status": self.status.to_dict(),
            "progress": {"touched": [[i, k.value] for i, k in sorted(p.touched.items())],
                         "done": sorted(p.done), "failed": sorted(p.failed),
                         "canary_done": p.canary_done, "pause_reason": p.pause_reason},
            "only": sorted(self.only),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Update:
        p = d["progress"]
        progress = Progress({int(i): ActionKind(k) for i, k in p["touched"]},
                            frozenset(int(i) for i in p["done"]),
                            frozenset(int(i) for i in p["failed"]),
                            bool(p["canary_done"]), str(p["pause_reason"]))
        return cls(UpdateSettings.from_body(d["settings"]), int(d["old_count"]),
                   int(d["old_version"]), int(d["new_count"]), int(d["new_version"]),
                   UpdateStatus.from_dict(d["status"]), progress,
                   frozenset(int(i) for i in d.get("only", ())))


@dataclass(frozen=True, slots=True)
class Plan:
    update: Update
    actions: tuple[Action, ...]
    reason: str


def command(update: Update, trigger: Trigger) -> Update:
    """A user's pause/resume/abort/rollback (or IllegalUpdateTransition). A rollback
    restarts progress for the way back; a pause records why the update waits."""
    status = apply(update.status, trigger)
    progress = update.progress
    if trigger is Trigger.ROLLBACK:
        progress = Progress(canary_done=progress.canary_done)
    elif trigger is Trigger.PAUSE:
        progress = replace(progress, pause_reason="paused by a user; resume to continue")
    elif trigger is Trigger.RESUME:
        progress = replace(progress, pause_reason="")
    return replace(update, status=status, progress=progress)


def plan(update: Update, instances: Mapping[int, InstanceView]) -> Plan:
    """The next actions for ``update`` given the job's instances (see the module doc)."""
    status = update.status
    if status.terminal:
        return Plan(update, (), f"the update is {status.state.value}: nothing to do")
    if status == INITIAL:
        if update.settings.start_paused:
            why = "started paused: resume to begin"
            return Plan(replace(update, status=apply(status, Trigger.START_PAUSED),
                                progress=replace(update.progress, pause_reason=why)), (), why)
        update = replace(update, status=apply(status, Trigger.START))
    if update.status.resume_to is not None:
        return Plan(update, (), update.progress.pause_reason or "paused")
    return _roll(update, instances)


def _roll(update: Update, instances: Mapping[int, InstanceView]) -> Plan:
    count, version = update.target
    update = replace(update, progress=_settle(update, instances))
    progress, settings = update.progress, update.settings
    tolerance = settings.max_tolerable_instance_failures
    if tolerance and len(progress.failed) >= tolerance:
        return _on_failure(update, instances, f"{len(progress.failed)} instance(s) failed "
                           f"(tolerance {tolerance}): {_ids(progress.failed)}")
    work = _work(update, instances)
    in_flight = progress.in_flight
    if not work and not in_flight:
        if progress.failed:
            return _on_failure(update, instances, f"{len(progress.failed)} instance(s) "
                               f"failed: {_ids(progress.failed)}")
        done = apply(update.status, Trigger.COMPLETE)
        return Plan(replace(update, status=done), (),
                    f"{done.state.value}: {count} instance(s) at version {version}")
    limit = len(work)
    if not update.status.backward and settings.canary and not progress.canary_done:
        left = settings.canary - len(progress.touched)
        if left <= 0:
            if in_flight:
                return Plan(update, (), f"canary: waiting for {_ids(in_flight)} to run "
                            f"version {version} healthily")
            why = (f"canary: {len(progress.touched)} instance(s) updated to version "
                   f"{version}; paused for review, resume to continue")
            paused = replace(update, status=apply(update.status, Trigger.PAUSE),
                             progress=replace(progress, canary_done=True, pause_reason=why))
            return Plan(paused, (), why)
        limit = left
    room = _batch_room(settings, in_flight)
    return _fill(update, instances, work, min(limit, room), limit < room)


def _batch_room(settings: UpdateSettings, in_flight: Sequence[int]) -> int:
    if not settings.batch_size:
        return 1 << 62
    return max(settings.batch_size - len(in_flight), 0)


def _fill(update: Update, instances: Mapping[int, InstanceView],
          work: list[Action], room: int, by_canary: bool) -> Plan:
    count, version = update.target
    progress, cap = update.progress, update.settings.max_unavailable
    down = _down(update, instances)
    actions: list[Action] = []
    held: list[int] = []
    for action in work:
        if len(actions) >= room:
            break
        view = instances.get(action.instance)
        costly = (action.kind is ActionKind.UPDATE and view is not None
                  and action.instance not in down and view.version != version
                  and view.health is not Health.STOPPED)
        if costly and cap is not None and len(down) >= cap:
            held.append(action.instance)
            continue
        if costly:
            down.add(action.instance)
        actions.append(action)
    if held and not actions and not progress.in_flight and down <= progress.failed:
        return _on_failure(update, instances, f"failed instance(s) {_ids(down)} use up "
                           f"max-unavailable {cap}: the update cannot go on")
    touched = dict(progress.touched)
    touched.update((a.instance, a.kind) for a in actions)
    new = replace(update, progress=replace(progress, touched=touched))
    return Plan(new, tuple(actions), _reason(new, actions, held, work, room, down, by_canary))


def _reason(update: Update, actions: list[Action], held: list[int], work: list[Action],
            room: int, down: set[int], limited_by_canary: bool) -> str:
    count, version = update.target
    way = "rolling back" if update.status.backward else "rolling forward"
    parts = [f"{way} to version {version} ({count} instance(s))"]
    if actions:
        parts.append("now: " + "; ".join(str(a) for a in actions))
    in_flight = [i for i in update.progress.in_flight
                 if i not in {a.instance for a in actions}]
    if in_flight:
        parts.append(f"waiting for instance(s) {_ids(in_flight)} to run version {version} "
                     "healthily")
    if held:
        parts.append(f"max-unavailable {update.settings.max_unavailable} reached "
                     f"(down or in flight: {_ids(down)}): instance(s) {_ids(held)} wait")
    left = len(work) - len(actions) - len(held)
    if left and room == len(actions):
        limit = ("the canary" if limited_by_canary
                 else f"the batch (batch size {update.settings.batch_size})")
        parts.append(f"{left} more instance(s) wait for room in {limit}")
    return "; ".join(p for p in parts if p)


def _settle(update: Update, instances: Mapping[int, InstanceView]) -> Progress:
    """Mark touched instances done or failed (both final for this direction)."""
    _, version = update.target
    progress, retries = update.progress, update.settings.max_instance_retries
    done, failed = set(progress.done), set(progress.failed)
    for i in progress.in_flight:
        view = instances.get(i)
        if progress.touched[i] is ActionKind.REMOVE:
            if view is None:
                done.add(i)
        elif view is not None and view.version == version and view.health in _SERVES:
            done.add(i)
        elif view is not None and view.goal == version and retries and view.failures >= retries:
            failed.add(i)
    return replace(progress, done=frozenset(done), failed=frozenset(failed))


def _work(update: Update, instances: Mapping[int, InstanceView]) -> list[Action]:
    """Untouched work in Peloton's order: adds, updates, removes; unavailable first."""
    count, version = update.target
    touched = update.progress.touched

    def rank(i: int) -> tuple[int, int]:
        return _RANK[instances[i].health], i

    adds = [Action(ActionKind.ADD, i, version) for i in range(count)
            if i not in instances and i not in touched]
    stale = sorted((i for i in instances if i < count and i not in touched
                    and instances[i].goal != version
                    and (not update.only or i in update.only)), key=rank)
    gone = sorted((i for i in instances if i >= count and i not in touched), key=rank)
    return (adds + [Action(ActionKind.UPDATE, i, version) for i in stale]
            + [Action(ActionKind.REMOVE, i) for i in gone])


def _down(update: Update, instances: Mapping[int, InstanceView]) -> set[int]:
    """Instances below the target count that are down now or will be (in-flight
    updates); instances being added were never up and do not count."""
    count, _ = update.target
    touched = update.progress.touched
    down = {i for i, v in instances.items() if i < count and v.health not in _SERVES
            and touched.get(i) is not ActionKind.ADD}
    down |= {i for i in update.progress.in_flight if touched[i] is ActionKind.UPDATE
             and not (i in instances and instances[i].health is Health.STOPPED)}
    return down


def _on_failure(update: Update, instances: Mapping[int, InstanceView], why: str) -> Plan:
    if update.settings.rollback_on_failure and not update.status.backward:
        back = replace(update, status=apply(update.status, Trigger.ROLLBACK),
                       progress=Progress(canary_done=update.progress.canary_done))
        turned = _roll(back, instances)
        return replace(turned, reason=f"rolling back after failures: {why}; {turned.reason}")
    failed = replace(update, status=apply(update.status, Trigger.FAIL))
    return Plan(failed, (), f"FAILED: {why}")


def _ids(ids: Sequence[int] | set[int] | frozenset[int]) -> str:
    return ", ".join(str(i) for i in sorted(ids))
