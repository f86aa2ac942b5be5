"""Vectorised evaluation of hard constraints over candidate hosts.

`limits` answers, for each candidate host, "how many tasks of this group may go here,
one after another, with the constraint holding for each when it is placed". A task-label
constraint whose label the group's tasks carry changes as the group lands (each placed
task raises the count), so:

- LESS_THAN r with count c allows r - c tasks (never below 0);
- EQUAL r allows 1 task when c == r (the next would see r + 1), else 0;
- GREATER_THAN r allows any number when c > r, else 0.

Host-label constraints and task-label constraints on labels the group does not carry are
all-or-nothing per host (0 or BIG). AND takes the minimum of its parts, OR the maximum:
the OR then holds for at least that many steps, which may under-use a host (an OR whose
branch becomes true only after some steps) but never breaks the constraint.

`host_names` reads from a constraint the hosts it allows by name (`hostname` is a label
every host carries), so the engine filters a pinned run's group over those hosts only.
"""

from __future__ import annotations

import numpy as np

from peloton.model.constraint import (
    HOSTNAME_LABEL,
    JOB_LABEL,
    AndConstraint,
    Condition,
    HardConstraint,
    HostLabelConstraint,
    LabelConstraint,
    LabelKind,
    LabelOp,
    MaxPerHostConstraint,
    OrConstraint,
    PreferConstraint,
    SpreadConstraint,
)
from peloton.placement.domain.framework import BIG, CycleState, TaskGroup
from peloton.placement.domain.hostindex import BoolArray, IntArray

__all__ = ["limits", "holds_now", "is_static", "task_labels", "hard_parts", "host_names"]


def hard_parts(c: AndConstraint | OrConstraint) -> list[HardConstraint]:
    """The hard children of an AND/OR (soft ones never constrain; split_constraint has
    already moved them out of the hard part a group carries)."""
    return [x for x in c.constraints if not isinstance(x, SpreadConstraint | PreferConstraint)]


def limits(state: CycleState, c: HardConstraint, group: TaskGroup, hosts: IntArray) -> IntArray:
    """Per host in ``hosts``: tasks of ``group`` the constraint allows there (0..BIG)."""
    if isinstance(c, AndConstraint | OrConstraint):
        parts = [limits(state, child, group, hosts) for child in hard_parts(c)]
        combine = np.minimum if isinstance(c, AndConstraint) else np.maximum
        out = parts[0]
        for part in parts[1:]:
            out = combine(out, part)
        return out
    if isinstance(c, HostLabelConstraint):
        return np.where(_host_label_mask(state, c, hosts), BIG, 0)
    if isinstance(c, MaxPerHostConstraint):
        c = LabelConstraint(
            LabelKind.TASK, Condition.LESS_THAN, JOB_LABEL, group.job_id, c.count
        )
    if c.kind is LabelKind.HOST:
        codes, _ = state.table.label_codes(c.key)
        count = (codes[hosts] == state.table.code_of(c.key, c.value)).astype(np.int64)
        return np.where(_compare(c.condition, count, c.requirement), BIG, 0)
    count = state.task_counts(c.label)[hosts]
    if c.label not in group.labels:
        return np.where(_compare(c.condition, count, c.requirement), BIG, 0)
    if c.condition is Condition.LESS_THAN:
        return np.maximum(c.requirement - count, 0)
    if c.condition is Condition.EQUAL:
        return (count == c.requirement).astype(np.int64)
    return np.where(count > c.requirement, BIG, 0)


def holds_now(state: CycleState, c: HardConstraint, group: TaskGroup, hosts: IntArray) -> BoolArray:
    """Whether one task of ``group`` could go on each host right now."""
    out: BoolArray = limits(state, c, group, hosts) > 0
    return out


def is_static(c: HardConstraint) -> bool:
    """True when ``c`` reads host labels only (its answer never changes in a round)."""
    if isinstance(c, AndConstraint | OrConstraint):
        return all(is_static(child) for child in hard_parts(c))
    if isinstance(c, HostLabelConstraint):
        return True
    if isinstance(c, MaxPerHostConstraint):
        return False
    return c.kind is LabelKind.HOST


def task_labels(c: HardConstraint, job_id: str) -> set[str]:
    """The ``key=value`` task labels whose counts ``c`` reads."""
    if isinstance(c, AndConstraint | OrConstraint):
        out: set[str] = set()
        for child in hard_parts(c):
            out |= task_labels(child, job_id)
        return out
    if isinstance(c, MaxPerHostConstraint):
        return {f"{JOB_LABEL}={job_id}"}
    if isinstance(c, LabelConstraint) and c.kind is LabelKind.TASK:
        return {c.label}
    return set()


def host_names(c: HardConstraint) -> frozenset[str] | None:
    """The host names ``c`` can only hold on (None: it does not restrict hosts by name).

    A superset is fine (the constraint itself is still evaluated on them): `hostname`
    equal to or in some names, or such a HOST label constraint, names them; an AND names
    what its named parts have in common; anything else restricts nothing by name.
    """
    if isinstance(c, AndConstraint):
        named = [n for n in map(host_names, hard_parts(c)) if n is not None]
        return frozenset.intersection(*named) if named else None
    if isinstance(c, HostLabelConstraint) and c.key == HOSTNAME_LABEL:
        if c.op in (LabelOp.EQUALS, LabelOp.IN):
            return frozenset(c.values)
    elif (isinstance(c, LabelConstraint) and c.kind is LabelKind.HOST and c.key == HOSTNAME_LABEL
          and c.condition.holds(1, c.requirement) and not c.condition.holds(0, c.requirement)):
        return frozenset((c.value,))
    return None


def _host_label_mask(state: CycleState, c: HostLabelConstraint, hosts: IntArray) -> BoolArray:
    codes, vocab = state.table.label_codes(c.key)
    sub = codes[hosts]
    if c.op is LabelOp.EXISTS:
        return sub >= 0
    if c.op is LabelOp.NOT_EXISTS:
        return sub < 0
    # a lookup table over codes (slot 0: hosts without the label) beats np.isin
    member = np.zeros(len(vocab) + 1, dtype=bool)
    member[[vocab[v] + 1 for v in c.values if v in vocab]] = True
    if c.op is LabelOp.NOT_IN:
        member = ~member
    out: BoolArray = member[sub + 1]
    return out


def _compare(cond: Condition, count: IntArray, requirement: int) -> BoolArray:
    if cond is Condition.LESS_THAN:
        return count < requirement
    if cond is Condition.EQUAL:
        return count == requirement
    return count > requirement
