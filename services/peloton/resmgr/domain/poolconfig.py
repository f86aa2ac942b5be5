"""One resource pool's configuration: per-kind reservation, limit, share and type.

A `PoolConfig` mirrors Peloton's `ResourcePoolConfig`: a list of per-kind resource
settings plus `slackLimit.maxPercent` (default 20) and `controllerLimit.maxPercent`
(absent = controller tasks are not limited). A kind missing from the config gets
reservation 0, limit 0, share 1, ELASTIC.

Two separate concerns live here:
- `parse_pool_config` turns an already parsed YAML/JSON mapping into a `PoolConfig`. It
  raises `PoolConfigError` when the document cannot be understood at all (wrong shapes,
  unknown fields or kinds, non-numbers). Every message names the field and the reason.
- `config_errors` lists the rule violations of a config that *was* understood
  (limit >= reservation >= 0, share > 0, percentages in [0, 100]). These are returned as
  strings, never raised, so tree operations can reject and the what-if can warn.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from peloton.model.resources import EPSILON, KINDS, Resources

__all__ = [
    "DEFAULT_SLACK_LIMIT_PERCENT",
    "PoolConfigError",
    "ReservationType",
    "ResourceSpec",
    "PoolConfig",
    "parse_pool_config",
    "config_errors",
]

DEFAULT_SLACK_LIMIT_PERCENT = 20.0


class PoolConfigError(ValueError):
    """A pool document that cannot be parsed; the message names the field and the reason."""


class ReservationType(StrEnum):
    """ELASTIC gives unused reservation away (up to demand); STATIC always holds it."""

    ELASTIC = "ELASTIC"
    STATIC = "STATIC"


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """Settings of one resource kind in one pool."""

    reservation: float = 0.0
    limit: float = 0.0
    share: float = 1.0
    type: ReservationType = ReservationType.ELASTIC


_MISSING = ResourceSpec()


@dataclass(frozen=True, slots=True)
class PoolConfig:
    """A pool's configuration; `specs` holds one `ResourceSpec` per kind in `KINDS` order."""

    name: str
    specs: tuple[ResourceSpec, ...] = (_MISSING,) * len(KINDS)
    slack_limit_percent: float = DEFAULT_SLACK_LIMIT_PERCENT
    controller_limit_percent: float | None = None
    description: str = ""

    @classmethod
    def create(
        cls,
        name: str,
        resources: Mapping[str, ResourceSpec] | None = None,
        *,
        slack_limit_percent: float = DEFAULT_SLACK_LIMIT_PERCENT,
        controller_limit_percent: float | None = None,
        description: str = "",
    ) -> PoolConfig:
        """Build from a {kind: ResourceSpec} mapping; missing kinds get the defaults."""
        resources = resources or {}
        unknown = set(resources) - set(KINDS)
        if unknown:
            raise PoolConfigError(f"resources: unknown kind(s) {', '.join(sorted(unknown))}")
        specs = tuple(resources.get(k, _MISSING) for k in KINDS)
        return cls(name, specs, slack_limit_percent, controller_limit_percent, description)

    @classmethod
    def uniform(
        cls,
        name: str,
        reservation: Resources,
        limit: Resources,
        share: float = 1.0,
        type: ReservationType = ReservationType.ELASTIC,
        **kwargs: Any,
    ) -> PoolConfig:
        """Same share and type for every kind; reservation and limit given as vectors."""
        specs = {k: ResourceSpec(reservation.get(k), limit.get(k), share, type) for k in KINDS}
        return cls.create(name, specs, **kwargs)

    def spec(self, kind: str) -> ResourceSpec:
        return self.specs[KINDS.index(kind)]

    @property
    def reservation(self) -> Resources:
        return Resources(*(s.reservation for s in self.specs))

    @property
    def limit(self) -> Resources:
        return Resources(*(s.limit for s in self.specs))

    @property
    def share(self) -> Resources:
        return Resources(*(s.share for s in self.specs))

    def slack_limit(self) -> Resources:
        """What revocable work may hold of memory, disk and gpu: slack% x reservation.

        cpu is 0: revocable cpus come from the cluster's slack capacity, not a carve-out.
        """
        f = self.slack_limit_percent / 100.0
        r = self.reservation
        return Resources(0.0, r.memory * f, r.disk * f, r.gpu * f)

    def controller_limit(self) -> Resources | None:
        """controller% x reservation, or None when controller tasks are unlimited."""
        if self.controller_limit_percent is None:
            return None
        return self.reservation.scale(self.controller_limit_percent / 100.0)

    def renamed(self, name: str) -> PoolConfig:
        return PoolConfig(
            name,
            self.specs,
            self.slack_limit_percent,
            self.controller_limit_percent,
            self.description,
        )


def config_errors(config: PoolConfig, where: str) -> list[str]:
    """Rule violations of one config, as "<where>: <field>: <reason>" strings (KINDS order)."""
    errors: list[str] = []
    if not config.name or "/" in config.name:
        errors.append(f"{where}: name: {config.name!r} must be non-empty and contain no '/'")
    elif config.name == "root":
        errors.append(f"{where}: name: 'root' is reserved for the implicit root pool")
    for kind, s in zip(KINDS, config.specs, strict=True):
        field = f"resources.{kind}"
        if s.reservation < 0:
            errors.append(f"{where}: {field}.reservation: {s.reservation:g} is negative")
        if s.limit < s.reservation - EPSILON:
            errors.append(
                f"{where}: {field}.limit: {s.limit:g} is below reservation {s.reservation:g}"
            )
        if s.share <= 0:
            errors.append(f"{where}: {field}.share: {s.share:g} must be positive")
    if not 0 <= config.slack_limit_percent <= 100:
        errors.append(
            f"{where}: slackLimit.maxPercent: {config.slack_limit_percent:g} is outside [0, 100]"
        )
    c = config.controller_limit_percent
    if c is not None and not 0 <= c <= 100:
        errors.append(f"{where}: controllerLimit.maxPercent: {c:g} is outside [0, 100]")
    return errors


# ---------------------------------------------------------------------------- parsing

_TOP_FIELDS = {
    "name",
    "resources",
    "slackLimit",
    "controllerLimit",
    "slack_limit_percent",
    "controller_limit_percent",
    "policy",
    "description",
    "owningTeam",
    "ldapGroups",
}
_SPEC_FIELDS = {"kind", "reservation", "limit", "share", "type"}


def parse_pool_config(doc: Any, *, name: str | None = None, where: str = "pool") -> PoolConfig:
    """Parse a Peloton-style ResourcePoolConfig mapping.

    `resources` may be Peloton's list form (`[{kind: cpu, reservation: 10, ...}]`) or a
    mapping form (`{cpu: {reservation: 10, ...}}`). Percentages may be given as
    `slackLimit: {maxPercent: 30}` or `slack_limit_percent: 30` (same for controller).
    `name` overrides/replaces the document's `name`. Raises `PoolConfigError` naming
    `where` and the field on any shape problem; rule violations are left to
    `config_errors`.
    """
    m = _mapping(doc, where)
    unknown = set(m) - _TOP_FIELDS
    if unknown:
        raise PoolConfigError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    pool_name = name if name is not None else m.get("name")
    if not isinstance(pool_name, str):
        raise PoolConfigError(f"{where}.name: must be a string, got {pool_name!r}")
    specs = _parse_resources(m.get("resources"), f"{where}.resources")
    slack = _percent(m, "slackLimit", "slack_limit_percent", where)
    controller = _percent(m, "controllerLimit", "controller_limit_percent", where)
    policy = m.get("policy", "PriorityFIFO")
    if policy != "PriorityFIFO":
        raise PoolConfigError(f"{where}.policy: only PriorityFIFO is supported, got {policy!r}")
    description = m.get("description", "")
    if not isinstance(description, str):
        raise PoolConfigError(f"{where}.description: must be a string")
    return PoolConfig.create(
        pool_name,
        specs,
        slack_limit_percent=DEFAULT_SLACK_LIMIT_PERCENT if slack is None else slack,
        controller_limit_percent=controller,
        description=description,
    )


def _parse_resources(raw: Any, where: str) -> dict[str, ResourceSpec]:
    if raw is None:
        return {}
    entries: list[tuple[str, Any, str]] = []
    if isinstance(raw, list):
        for i, item in enumerate(raw):
            item_map = _mapping(item, f"{where}[{i}]")
            kind = item_map.get("kind")
            if not isinstance(kind, str):
                raise PoolConfigError(f"{where}[{i}].kind: missing or not a string")
            entries.append((kind, item_map, f"{where}[{i}]"))
    elif isinstance(raw, Mapping):
        for kind, item in raw.items():
            entries.append((str(kind), item, f"{where}.{kind}"))
    else:
        raise PoolConfigError(f"{where}: must be a list or a mapping, got {type(raw).__name__}")
    specs: dict[str, ResourceSpec] = {}
    for kind, item, at in entries:
        if kind not in KINDS:
            raise PoolConfigError(f"{at}.kind: unknown kind {kind!r} (known: {', '.join(KINDS)})")
        if kind in specs:
            raise PoolConfigError(f"{at}.kind: {kind} given twice")
        specs[kind] = _parse_spec(item, at)
    return specs


def _parse_spec(raw: Any, where: str) -> ResourceSpec:
    m = _mapping(raw, where)
    unknown = set(m) - _SPEC_FIELDS
    if unknown:
        raise PoolConfigError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    type_raw = m.get("type", "ELASTIC")
    try:
        rtype = ReservationType(str(type_raw).upper())
    except ValueError:
        raise PoolConfigError(
            f"{where}.type: must be ELASTIC or STATIC, got {type_raw!r}"
        ) from None
    return ResourceSpec(
        reservation=_number(m.get("reservation", 0.0), f"{where}.reservation"),
        limit=_number(m.get("limit", 0.0), f"{where}.limit"),
        share=_number(m.get("share", 1.0), f"{where}.share"),
        type=rtype,
    )


def _percent(m: Mapping[str, Any], nested: str, flat: str, where: str) -> float | None:
    if nested in m and flat in m:
        raise PoolConfigError(f"{where}: give either {nested} or {flat}, not both")
    if flat in m:
        return _number(m[flat], f"{where}.{flat}")
    if nested in m:
        inner = _mapping(m[nested], f"{where}.{nested}")
        extra = set(inner) - {"maxPercent"}
        if extra:
            raise PoolConfigError(f"{where}.{nested}: unknown field(s) {', '.join(sorted(extra))}")
        if "maxPercent" not in inner:
            raise PoolConfigError(f"{where}.{nested}.maxPercent: missing")
        return _number(inner["maxPercent"], f"{where}.{nested}.maxPercent")
    return None


def _mapping(raw: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise PoolConfigError(f"{where}: must be a mapping, got {type(raw).__name__}")
    return raw


def _number(raw: Any, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise PoolConfigError(f"{where}: must be a number, got {raw!r}")
    value = float(raw)
    if not math.isfinite(value):
        raise PoolConfigError(f"{where}: must be finite, got {raw!r}")
    return value
