"""Placement constraints: value types, parsing from job files, and a JSON round trip.

Two vocabularies parse into the same immutable value types:

Peloton's v0 form (``type`` may be omitted when exactly one payload key is given)::

    {type: LABEL_CONSTRAINT, labelConstraint: {kind: HOST|TASK,
        condition: CONDITION_LESS_THAN|CONDITION_EQUAL|CONDITION_GREATER_THAN,
        label: {key: k, value: v}, requirement: 1}}
    {type: AND_CONSTRAINT, andConstraint: {constraints: [...]}}
    {type: OR_CONSTRAINT, orConstraint: {constraints: [...]}}

A label constraint counts matching labels on a host and compares the count with
``requirement``. For ``kind: HOST`` the count is 1 when the host has label ``key=value``
(every host also carries ``hostname=<its name>``), else 0. For ``kind: TASK`` the count is
the number of tasks on the host carrying task label ``key=value`` (every task carries
``peloton.job_id=<job>``), counted when the task is placed: tasks already there plus
tasks placed earlier in the same round. So "at most one instance of job J per host" is
``{kind: TASK, condition: CONDITION_LESS_THAN, label: {key: peloton.job_id, value: J},
requirement: 1}``.

Simple forms (one key each)::

    {hostLabel: {key: zone, equals: us-east1}}     host label equals a value
    {hostLabel: {key: zone, in: [a, b]}}            ... is one of the values
    {hostLabel: {key: zone, notIn: [a, b]}}         ... is none of them (hosts without
                                                    the label match)
    {hostLabel: {key: gpu-model, exists: true}}     host has / lacks (false) the label
    {maxPerHost: 1}                                 at most N tasks of this job per host
    {spread: zone}                                  SOFT: balance the job's tasks across
                                                    the values of host label ``zone``
    {prefer: <hard constraint>, weight: 2}          SOFT: prefer hosts matching it
    [c1, c2, ...]                                   a list is an AND

Hard constraints are never violated by placement; soft ones (``spread``, ``prefer``) only
rank hosts, and may appear only at the top level or inside (nested) ANDs from the top:
a soft constraint inside an OR or a ``prefer`` has no meaning and is rejected.

``to_dict`` writes the canonical form (Peloton's form for label/AND/OR, the simple form
otherwise); ``parse_constraint(to_dict(c)) == c`` for every valid constraint.
Invalid input raises `ConstraintError` (a ValueError) naming the path and the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "ConstraintError",
    "LabelKind",
    "Condition",
    "LabelOp",
    "LabelConstraint",
    "HostLabelConstraint",
    "MaxPerHostConstraint",
    "AndConstraint",
    "OrConstraint",
    "SpreadConstraint",
    "PreferConstraint",
    "HardConstraint",
    "SoftConstraint",
    "Constraint",
    "JOB_LABEL",
    "HOSTNAME_LABEL",
    "parse_constraint",
    "split_constraint",
    "to_dict",
]

JOB_LABEL = "peloton.job_id"
"""The task label every task carries implicitly, valued with its job id."""
HOSTNAME_LABEL = "hostname"
"""The host label every host carries implicitly, valued with its name."""


class ConstraintError(ValueError):
    """An invalid constraint; ``path`` locates the problem, ``reason`` explains it."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class LabelKind(StrEnum):
    HOST = "HOST"
    TASK = "TASK"


class Condition(StrEnum):
    LESS_THAN = "CONDITION_LESS_THAN"
    EQUAL = "CONDITION_EQUAL"
    GREATER_THAN = "CONDITION_GREATER_THAN"

    def holds(self, count: int, requirement: int) -> bool:
        if self is Condition.LESS_THAN:
            return count < requirement
        if self is Condition.EQUAL:
            return count == requirement
        return count > requirement


class LabelOp(StrEnum):
    EQUALS = "equals"
    IN = "in"
    NOT_IN = "notIn"
    EXISTS = "exists"
    NOT_EXISTS = "notExists"


@dataclass(frozen=True, slots=True)
class LabelConstraint:
    """Peloton's label constraint: count of ``key=value`` labels ``condition`` requirement."""

    kind: LabelKind
    condition: Condition
    key: str
    value: str
    requirement: int

    @property
    def label(self) -> str:
        return f"{self.key}={self.value}"

    def __str__(self) -> str:
        if self.kind is LabelKind.HOST:
            has = (
                self.condition.holds(1, self.requirement),
                self.condition.holds(0, self.requirement),
            )
            if has == (True, False):
                return self.label
            if has == (False, True):
                return f"{self.key}!={self.value}"
            if has == (True, True):
                return "any host"
            return "no host"
        sym = {"CONDITION_LESS_THAN": "<", "CONDITION_EQUAL": "==", "CONDITION_GREATER_THAN": ">"}
        return f"tasks labelled {self.label} on host {sym[self.condition]} {self.requirement}"


@dataclass(frozen=True, slots=True)
class HostLabelConstraint:
    """Simple host label test; ``values`` is empty for EXISTS/NOT_EXISTS, one for EQUALS."""

    key: str
    op: LabelOp
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # IN/NOT_IN are sets: keep one canonical order so equal constraints compare equal.
        if self.op in (LabelOp.IN, LabelOp.NOT_IN):
            object.__setattr__(self, "values", tuple(sorted(set(self.values))))

    def __str__(self) -> str:
        if self.op is LabelOp.EQUALS:
            return f"{self.key}={self.values[0]}"
        if self.op is LabelOp.IN:
            return f"{self.key} in [{', '.join(self.values)}]"
        if self.op is LabelOp.NOT_IN:
            return f"{self.key} not in [{', '.join(self.values)}]"
        if self.op is LabelOp.EXISTS:
            return f"has label {self.key}"
        return f"lacks label {self.key}"


@dataclass(frozen=True, slots=True)
class MaxPerHostConstraint:
    """At most ``count`` tasks of the task's own job on one host (a TASK label cap)."""

    count: int

    def __str__(self) -> str:
        return f"at most {self.count} task(s) of the job per host"


@dataclass(frozen=True, slots=True)
class AndConstraint:
    constraints: tuple[Constraint, ...]

    def __str__(self) -> str:
        return " and ".join(_paren(c) for c in self.constraints)


@dataclass(frozen=True, slots=True)
class OrConstraint:
    constraints: tuple[Constraint, ...]

    def __str__(self) -> str:
        return " or ".join(_paren(c) for c in self.constraints)


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """Soft: balance the job's tasks across the values of host label ``key``."""

    key: str

    def __str__(self) -> str:
        return f"spread over {self.key}"


@dataclass(frozen=True, slots=True)
class PreferConstraint:
    """Soft: hosts satisfying ``constraint`` score ``weight`` more."""

    constraint: HardConstraint
    weight: float = 1.0

    def __str__(self) -> str:
        return f"prefer {_paren(self.constraint)} (weight {self.weight:g})"


HardConstraint = (
    LabelConstraint | HostLabelConstraint | MaxPerHostConstraint | AndConstraint | OrConstraint
)
SoftConstraint = SpreadConstraint | PreferConstraint
Constraint = HardConstraint | SoftConstraint


def _paren(c: Constraint) -> str:
    return f"({c})" if isinstance(c, AndConstraint | OrConstraint) else str(c)


# --------------------------------------------------------------------------- splitting


def split_constraint(
    constraint: Constraint | None,
) -> tuple[HardConstraint | None, tuple[SoftConstraint, ...]]:
    """Separate the hard part from the soft preferences.

    Top-level ANDs are flattened; a soft constraint anywhere else raises ConstraintError.
    The hard part is None when there is none, a single constraint when there is one, and
    an AndConstraint otherwise.
    """
    hard: list[HardConstraint] = []
    soft: list[SoftConstraint] = []
    _split_into(constraint, "constraint", hard, soft)
    if not hard:
        return None, tuple(soft)
    if len(hard) == 1:
        return hard[0], tuple(soft)
    return AndConstraint(tuple(hard)), tuple(soft)


def _split_into(
    c: Constraint | None, path: str, hard: list[HardConstraint], soft: list[SoftConstraint]
) -> None:
    if c is None:
        return
    if isinstance(c, PreferConstraint):
        _check_hard(c.constraint, f"{path}.prefer")
        soft.append(c)
    elif isinstance(c, SpreadConstraint):
        soft.append(c)
    elif isinstance(c, AndConstraint):
        for i, child in enumerate(c.constraints):
            _split_into(child, f"{path}.andConstraint.constraints[{i}]", hard, soft)
    else:
        _check_hard(c, path)
        hard.append(c)


def _check_hard(c: Constraint, path: str) -> HardConstraint:
    """Return ``c`` typed as hard, or raise if a soft constraint hides in it."""
    if isinstance(c, SpreadConstraint | PreferConstraint):
        raise ConstraintError(
            path, f"{type(c).__name__} is soft; soft constraints may only appear at the "
            "top level or inside ANDs from the top"
        )
    if isinstance(c, AndConstraint):
        for i, child in enumerate(c.constraints):
            _check_hard(child, f"{path}.andConstraint.constraints[{i}]")
    elif isinstance(c, OrConstraint):
        for i, child in enumerate(c.constraints):
            _check_hard(child, f"{path}.orConstraint.constraints[{i}]")
    return c


# --------------------------------------------------------------------------- parsing

_TYPES = {
    "LABEL_CONSTRAINT": "labelConstraint",
    "AND_CONSTRAINT": "andConstraint",
    "OR_CONSTRAINT": "orConstraint",
}
_SIMPLE = ("hostLabel", "maxPerHost", "spread", "prefer")


def parse_constraint(obj: Any, path: str = "constraint") -> Constraint:
    """Parse a constraint from decoded YAML/JSON; raises ConstraintError(path: reason)."""
    result = _parse(obj, path)
    split_constraint(result)  # rejects misplaced soft constraints
    return result


def _parse(obj: Any, path: str) -> Constraint:
    if isinstance(obj, list | tuple):
        return AndConstraint(_parse_list(obj, path))
    if not isinstance(obj, Mapping):
        raise ConstraintError(path, f"must be a mapping or a list, got {_kind(obj)}")
    keys = sorted(str(k) for k in obj)
    simple = [k for k in keys if k in _SIMPLE]
    if simple:
        return _parse_simple(obj, path, simple)
    return _parse_peloton(obj, path, keys)


def _parse_list(items: Sequence[Any], path: str) -> tuple[Constraint, ...]:
    if not items:
        raise ConstraintError(path, "must list at least one constraint")
    return tuple(_parse(item, f"{path}[{i}]") for i, item in enumerate(items))


def _parse_peloton(obj: Mapping[str, Any], path: str, keys: list[str]) -> Constraint:
    payloads = [k for k in keys if k in _TYPES.values()]
    unknown = [k for k in keys if k != "type" and k not in _TYPES.values()]
    if unknown:
        raise ConstraintError(
            f"{path}.{unknown[0]}",
            "unknown field (expected type with labelConstraint, andConstraint or "
            f"orConstraint, or one of {', '.join(_SIMPLE)})",
        )
    ctype = obj.get("type")
    if ctype is None:
        if len(payloads) != 1:
            raise ConstraintError(
                path, "needs a type (LABEL_CONSTRAINT, AND_CONSTRAINT, OR_CONSTRAINT) "
                "or a simple form (hostLabel, maxPerHost, spread, prefer)"
            )
        field = payloads[0]
    else:
        if ctype not in _TYPES:
            raise ConstraintError(
                f"{path}.type", f"unknown type {ctype!r} (expected {', '.join(_TYPES)})"
            )
        field = _TYPES[ctype]
        extra = [p for p in payloads if p != field]
        if extra:
            raise ConstraintError(f"{path}.{extra[0]}", f"does not go with type {ctype}")
        if field not in obj:
            raise ConstraintError(f"{path}.{field}", f"is required for type {ctype}")
    body = obj[field]
    sub = f"{path}.{field}"
    if field == "labelConstraint":
        return _parse_label(body, sub)
    inner = _mapping(body, sub, required={"constraints"}, optional=set())
    items = inner["constraints"]
    if not isinstance(items, list):
        raise ConstraintError(f"{sub}.constraints", f"must be a list, got {_kind(items)}")
    children = _parse_list(items, f"{sub}.constraints")
    return AndConstraint(children) if field == "andConstraint" else OrConstraint(children)


def _parse_label(body: Any, path: str) -> LabelConstraint:
    m = _mapping(body, path, required={"kind", "condition", "label"}, optional={"requirement"})
    kind_raw = m["kind"]
    try:
        kind = LabelKind(kind_raw)
    except ValueError:
        raise ConstraintError(
            f"{path}.kind", f"unknown kind {kind_raw!r} (expected HOST or TASK)"
        ) from None
    cond_raw = m["condition"]
    cond_name = cond_raw if not isinstance(cond_raw, str) or cond_raw.startswith(
        "CONDITION_") else f"CONDITION_{cond_raw}"
    try:
        condition = Condition(cond_name)
    except ValueError:
        raise ConstraintError(
            f"{path}.condition",
            f"unknown condition {cond_raw!r} (expected {', '.join(c.value for c in Condition)})",
        ) from None
    label = _mapping(m["label"], f"{path}.label", required={"key", "value"}, optional=set())
    key = _label_text(label["key"], f"{path}.label.key", allow_empty=False)
    value = _label_text(label["value"], f"{path}.label.value", allow_empty=True)
    requirement = m.get("requirement", 0)
    if isinstance(requirement, bool) or not isinstance(requirement, int) or requirement < 0:
        raise ConstraintError(
            f"{path}.requirement", f"must be a non-negative integer, got {requirement!r}"
        )
    return LabelConstraint(kind, condition, key, value, requirement)


def _parse_simple(obj: Mapping[str, Any], path: str, simple: list[str]) -> Constraint:
    if len(simple) > 1:
        raise ConstraintError(path, f"give one of {', '.join(simple)} per constraint, not both")
    form = simple[0]
    allowed = {form, "weight"} if form == "prefer" else {form}
    for key in sorted(str(k) for k in obj):
        if key not in allowed:
            raise ConstraintError(f"{path}.{key}", f"unknown field next to {form}")
    sub = f"{path}.{form}"
    body = obj[form]
    if form == "hostLabel":
        return _parse_host_label(body, sub)
    if form == "maxPerHost":
        if isinstance(body, bool) or not isinstance(body, int) or body < 1:
            raise ConstraintError(sub, f"must be a positive integer, got {body!r}")
        return MaxPerHostConstraint(body)
    if form == "spread":
        if isinstance(body, Mapping):
            body = _mapping(body, sub, required={"key"}, optional=set())["key"]
            sub = f"{sub}.key"
        return SpreadConstraint(_label_text(body, sub, allow_empty=False))
    weight = obj.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
        raise ConstraintError(f"{path}.weight", f"must be a positive number, got {weight!r}")
    return PreferConstraint(_check_hard(_parse(body, sub), sub), float(weight))


def _parse_host_label(body: Any, path: str) -> HostLabelConstraint:
    ops = {"equals", "in", "notIn", "exists"}
    m = _mapping(body, path, required={"key"}, optional=ops)
    key = _label_text(m["key"], f"{path}.key", allow_empty=False)
    given = sorted(k for k in m if k in ops)
    if len(given) != 1:
        raise ConstraintError(
            path, "needs exactly one of equals, in, notIn, exists"
            + (f" (got {', '.join(given)})" if given else "")
        )
    op = given[0]
    sub = f"{path}.{op}"
    if op == "exists":
        flag = m[op]
        if not isinstance(flag, bool):
            raise ConstraintError(sub, f"must be true or false, got {flag!r}")
        return HostLabelConstraint(key, LabelOp.EXISTS if flag else LabelOp.NOT_EXISTS)
    if op == "equals":
        return HostLabelConstraint(key, LabelOp.EQUALS, (_label_text(m[op], sub, True),))
    values = m[op]
    if not isinstance(values, list) or not values:
        raise ConstraintError(sub, f"must be a non-empty list of values, got {values!r}")
    texts = tuple(_label_text(v, f"{sub}[{i}]", True) for i, v in enumerate(values))
    return HostLabelConstraint(key, LabelOp(op), tuple(sorted(set(texts))))


def _mapping(obj: Any, path: str, required: set[str], optional: set[str]) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise ConstraintError(path, f"must be a mapping, got {_kind(obj)}")
    for key in sorted(str(k) for k in obj):
        if key not in required and key not in optional:
            expected = ", ".join(sorted(required | optional))
            raise ConstraintError(f"{path}.{key}", f"unknown field (expected {expected})")
    for key in sorted(required):
        if key not in obj:
            raise ConstraintError(f"{path}.{key}", "is required")
    return obj


def _label_text(value: Any, path: str, allow_empty: bool) -> str:
    """Label keys and values are strings; YAML integers (rack: 12) are taken as text."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ConstraintError(path, f"must be a string, got {_kind(value)} {value!r}")
    text = str(value)
    if not text and not allow_empty:
        raise ConstraintError(path, "must not be empty")
    return text


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


# --------------------------------------------------------------------------- to_dict


def to_dict(c: Constraint) -> dict[str, Any]:
    """The canonical JSON-ready form; ``parse_constraint(to_dict(c)) == c``."""
    if isinstance(c, LabelConstraint):
        return {
            "type": "LABEL_CONSTRAINT",
            "labelConstraint": {
                "kind": c.kind.value,
                "condition": c.condition.value,
                "label": {"key": c.key, "value": c.value},
                "requirement": c.requirement,
            },
        }
    if isinstance(c, AndConstraint):
        return {"type": "AND_CONSTRAINT",
                "andConstraint": {"constraints": [to_dict(x) for x in c.constraints]}}
    if isinstance(c, OrConstraint):
        return {"type": "OR_CONSTRAINT",
                "orConstraint": {"constraints": [to_dict(x) for x in c.constraints]}}
    if isinstance(c, HostLabelConstraint):
        body: dict[str, Any] = {"key": c.key}
        if c.op is LabelOp.EXISTS or c.op is LabelOp.NOT_EXISTS:
            body["exists"] = c.op is LabelOp.EXISTS
        elif c.op is LabelOp.EQUALS:
            body["equals"] = c.values[0]
        else:
            body[c.op.value] = list(c.values)
        return {"hostLabel": body}
    if isinstance(c, MaxPerHostConstraint):
        return {"maxPerHost": c.count}
    if isinstance(c, SpreadConstraint):
        return {"spread": c.key}
    return {"prefer": to_dict(c.constraint), "weight": c.weight}

