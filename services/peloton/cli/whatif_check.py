"""Every problem of a what-if entitlement scenario at once (pure: no I/O).

`peloton.resmgr.whatif.load_scenario` stops at the first field it cannot understand; this
module walks the same document piece by piece (the top level, each capacity, each pool's
parent, settings and each of its resources, each usage entry) and asks the same parser
(`parse_pool_config`) about each piece alone, so a scenario with three mistakes gets three
messages, each naming its field as load_scenario would. An empty answer means the
document's shape is sound; the entitlement run may still warn about rule violations.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from peloton.model.resources import KINDS
from peloton.resmgr.domain.poolconfig import PoolConfigError, parse_pool_config

__all__ = ["scenario_problems"]

_TOP = ("capacity", "slack_capacity", "pools", "usage")
_USAGE = ("demand", "slack_demand", "allocation", "slack_allocation")
_ROOTS = {"root", "/"}


def _unknown(m: Mapping[Any, Any], known: tuple[str, ...] | set[str], where: str) -> list[str]:
    extra = set(map(str, m)) - set(known)
    return [f"{where}: unknown field(s) {', '.join(sorted(extra))}"] if extra else []


def _resources(raw: Any, where: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        return [f"{where}: must be a mapping of kind to amount"]
    out = []
    for kind, value in raw.items():
        if kind not in KINDS:
            out.append(f"{where}.{kind}: unknown kind (known: {', '.join(KINDS)})")
        elif isinstance(value, bool) or not isinstance(value, int | float):
            out.append(f"{where}.{kind}: must be a number, got {value!r}")
        elif not math.isfinite(value) or value < 0:
            out.append(f"{where}.{kind}: must be finite and >= 0, got {value!r}")
    return out


def _try(body: Mapping[str, Any], name: str, where: str) -> list[str]:
    try:
        parse_pool_config(body, name=name, where=where)
    except PoolConfigError as exc:
        return [str(exc)]
    return []


def _pool(name: str, body: dict[str, Any], where: str) -> list[str]:
    resources = body.pop("resources", None)
    out = _try(body, name, where)  # everything but the resources
    if isinstance(resources, list):
        seen: set[str] = set()
        for i, item in enumerate(resources):
            kind = item.get("kind") if isinstance(item, Mapping) else None
            if isinstance(kind, str) and kind in seen:
                out.append(f"{where}.resources[{i}].kind: {kind} given twice")
                continue
            seen.add(str(kind))
            out += [p.replace(f"{where}.resources[0]", f"{where}.resources[{i}]")
                    for p in _try({"resources": [item]}, name, where)]
    elif isinstance(resources, Mapping):
        for kind, item in resources.items():
            out += _try({"resources": {kind: item}}, name, where)
    elif resources is not None:
        out += _try({"resources": resources}, name, where)
    return out


def _cycles(parents: Mapping[str, str | None]) -> list[str]:
    out: list[str] = []
    reported: set[str] = set()
    for start in parents:
        chain: list[str] = []
        name: str | None = start
        while name is not None and name in parents and name not in chain:
            chain.append(name)
            name = parents[name]
        if name is not None and name in chain:
            cycle = chain[chain.index(name):]
            if not reported & set(cycle):
                reported |= set(cycle)
                out.append(f"pools.{start}.parent: cycle {' -> '.join([*cycle, name])}")
    return out


def scenario_problems(doc: Any) -> list[str]:
    """Every shape problem of a what-if scenario, as "field: reason"."""
    if not isinstance(doc, Mapping):
        return [f"document: must be a mapping, got {type(doc).__name__}"]
    out = _unknown(doc, _TOP, "document")
    if "capacity" not in doc:
        out.append("capacity: missing")
    elif not isinstance(doc["capacity"], Mapping):
        out.append("capacity: must be a mapping of kind to amount")
    else:
        out += _resources(doc["capacity"], "capacity")
    out += _resources(doc.get("slack_capacity"), "slack_capacity")
    pools = doc.get("pools")
    pools = {} if pools is None else pools
    parents: dict[str, str | None] = {}
    if not isinstance(pools, Mapping):
        out.append("pools: must be a mapping of pool name to pool")
        pools = {}
    for name, raw in pools.items():
        where = f"pools.{name}"
        if not isinstance(name, str) or not name or "/" in name:
            out.append(f"{where}: pool names must be non-empty strings without '/'")
            continue
        if name in _ROOTS:
            out.append(f"{where}: 'root' is the implicit root and cannot be defined")
            continue
        if not isinstance(raw, Mapping):
            out.append(f"{where}: must be a mapping, got {type(raw).__name__}")
            continue
        body = dict(raw)
        parent = body.pop("parent", "root")
        if not isinstance(parent, str):
            out.append(f"{where}.parent: must be a pool name or root, got {parent!r}")
        elif parent not in _ROOTS and parent not in pools:
            out.append(f"{where}.parent: unknown pool {parent!r}")
        else:
            parents[name] = None if parent in _ROOTS else parent
        out += _pool(name, body, where)
    out += _cycles(parents)
    usage = doc.get("usage")
    usage = {} if usage is None else usage
    if not isinstance(usage, Mapping):
        return [*out, "usage: must be a mapping of pool name to usage"]
    for name, raw in usage.items():
        where = f"usage.{name}"
        if name not in pools:
            out.append(f"{where}: unknown pool {name!r}")
        elif not isinstance(raw, Mapping):
            out.append(f"{where}: must be a mapping, got {type(raw).__name__}")
        else:
            out += _unknown(raw, _USAGE, where)
            for f in _USAGE:
                out += _resources(raw.get(f), f"{where}.{f}")
    return out
