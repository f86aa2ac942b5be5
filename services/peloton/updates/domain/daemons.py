"""Daemon placement rule: one instance of a DAEMON job on every UP host that matches it.

Input: the hosts (`DaemonHost`: name, labels, maintenance state), the daemon job's hard
constraint (None: every host) and the job's instances that exist now (`DaemonInstance`:
instance id and host). Output (`DaemonPlan`):
- ``place``: new instances to start, one per UP matching host that has none; ids are the
  lowest ids no existing instance uses, handed out in host-name order.
- ``retire``: instances that must go and must not be restarted: their host left the
  cluster, is DRAINED or DOWN, or no longer matches the constraint; or a second
  instance on one host (the lowest id stays).
- ``draining``: instances on DRAINING hosts. They stay: the drain planner stops them
  last, once everything else has left the host, and they are not restarted there.
- ``keep``: the rest. Each instance is in exactly one of retire/draining/keep.
- ``reasons``: why each retired instance goes, by instance id.

The constraint is judged on host labels only (every host also has ``hostname=<name>``):
host-label constraints, Peloton HOST label constraints, AND and OR. Task-label
constraints and ``maxPerHost`` do not apply to a daemon (it has one instance per host by
definition) and soft preferences never exclude a host: all of these count as met.
Pure and deterministic: the result depends on the arguments only, not their order.

Example (constraint ``zone=a``):

    ==============================  ======================  =====================
    hosts                           instances               plan
    ==============================  ======================  =====================
    h1 UP a, h2 UP a, h3 UP b       0@h1                    place 1@h2
    h1 DRAINING a, h2 UP a          0@h1, 1@h2              draining 0; keep 1
    h2 UP a                         0@h1, 1@h2              retire 0 (h1 left)
    ==============================  ======================  =====================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from peloton.model.constraint import (
    HOSTNAME_LABEL,
    AndConstraint,
    HardConstraint,
    HostLabelConstraint,
    LabelConstraint,
    LabelKind,
    LabelOp,
    OrConstraint,
    PreferConstraint,
    SpreadConstraint,
)
from peloton.model.hoststate import HostState

__all__ = ["DaemonHost", "DaemonInstance", "DaemonPlan", "plan_daemons", "host_matches"]


@dataclass(frozen=True, slots=True)
class DaemonHost:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    state: HostState = HostState.UP


@dataclass(frozen=True, slots=True, order=True)
class DaemonInstance:
    instance: int
    host: str


@dataclass(frozen=True, slots=True)
class DaemonPlan:
    place: tuple[DaemonInstance, ...]
    retire: tuple[DaemonInstance, ...]
    draining: tuple[DaemonInstance, ...]
    keep: tuple[DaemonInstance, ...]
    reasons: Mapping[int, str]


def host_matches(c: HardConstraint | None, host: DaemonHost) -> bool:
    """Whether ``host``'s labels satisfy the host part of a daemon's constraint."""
    if c is None:
        return True
    labels = {**host.labels, HOSTNAME_LABEL: host.name}
    return _holds(c, labels)


def _holds(c: object, labels: Mapping[str, str]) -> bool:
    if isinstance(c, AndConstraint):
        return all(_holds(x, labels) for x in c.constraints)
    if isinstance(c, OrConstraint):
        parts = [x for x in c.constraints if not isinstance(x, SpreadConstraint | PreferConstraint)]
        return not parts or any(_holds(x, labels) for x in parts)
    if isinstance(c, HostLabelConstraint):
        value = labels.get(c.key)
        if c.op is LabelOp.EXISTS:
            return value is not None
        if c.op is LabelOp.NOT_EXISTS:
            return value is None
        inside = value is not None and value in c.values
        return not inside if c.op is LabelOp.NOT_IN else inside
    if isinstance(c, LabelConstraint) and c.kind is LabelKind.HOST:
        return c.condition.holds(int(labels.get(c.key) == c.value), c.requirement)
    return True   # task-label, maxPerHost, soft: not applicable to a daemon


def plan_daemons(hosts: Sequence[DaemonHost], constraint: HardConstraint | None,
                 instances: Sequence[DaemonInstance]) -> DaemonPlan:
    """Where the daemon job must run and which of its instances go (module doc)."""
    by_name = {h.name: h for h in hosts}
    retire: list[DaemonInstance] = []
    draining: list[DaemonInstance] = []
    keep: list[DaemonInstance] = []
    reasons: dict[int, str] = {}
    covered: set[str] = set()
    for inst in sorted(instances):
        host = by_name.get(inst.host)
        why = _why_retire(inst, host, constraint, covered)
        if why:
            retire.append(inst)
            reasons[inst.instance] = why
        elif host is not None and host.state is HostState.DRAINING:
            draining.append(inst)
        else:
            keep.append(inst)
        if not why:
            covered.add(inst.host)
    used = {i.instance for i in instances}
    place: list[DaemonInstance] = []
    next_id = 0
    for host in sorted(hosts, key=lambda h: h.name):
        if host.state is not HostState.UP or host.name in covered:
            continue
        if not host_matches(constraint, host):
            continue
        while next_id in used:
            next_id += 1
        place.append(DaemonInstance(next_id, host.name))
        used.add(next_id)
    return DaemonPlan(tuple(place), tuple(retire), tuple(draining), tuple(keep), reasons)


def _why_retire(inst: DaemonInstance, host: DaemonHost | None,
                constraint: HardConstraint | None, covered: set[str]) -> str:
    if host is None:
        return f"host {inst.host} left the cluster"
    if host.state in (HostState.DRAINED, HostState.DOWN):
        return f"host {inst.host} is {host.state.value} for maintenance"
    if not host_matches(constraint, host):
        return f"host {inst.host} no longer matches the daemon's constraint ({constraint})"
    if inst.host in covered:
        return f"host {inst.host} already runs a lower instance of this daemon"
    return ""
