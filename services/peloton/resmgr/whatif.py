"""What-if entitlement: run the production entitlement core on a hand-written scenario.

`entitlement_report(doc)` reads an already parsed YAML/JSON document::

    capacity: {cpu: 100, memory: 1000, disk: 6000, gpu: 0}
    slack_capacity: {cpu: 80}                     # optional: revocable cpus
    pools:                                        # name -> pool; parent is a name or root
      respool1: {parent: root, resources: {cpu: {reservation: 10, limit: 1000, share: 1}}}
      respool11: {parent: respool1, resources: [{kind: cpu, reservation: 10}],
                  slack_limit_percent: 20}
    usage:                                        # optional, leaf pools
      respool11: {demand: {cpu: 20}, slack_demand: {}, allocation: {}, slack_allocation: {}}

Pool entries accept the Peloton ResourcePoolConfig fields (`resources` as a list or a
mapping, `slackLimit`/`controllerLimit`, ...) plus `parent`. `allocation` is what
non-revocable tasks hold; `slack_allocation` what revocable tasks hold.

It returns `{"pools": {name: {"entitlement": {kind: x}, "slack_entitlement": {...},
"nonslack_entitlement": {...}}}, "warnings": [...]}` for every pool plus "root", in tree
order, values rounded to 6 decimals. Rule violations (limit below reservation, children
reserving more than their parent, ...) become warnings and the computation goes on;
a document that cannot be understood raises `PoolConfigError` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from peloton.model.resources import KINDS, Resources
from peloton.resmgr.domain.entitlement import PoolUsage, compute_entitlements
from peloton.resmgr.domain.poolconfig import PoolConfig, PoolConfigError, parse_pool_config
from peloton.resmgr.domain.pooltree import ROOT, PoolTree, build_tree, child_path

__all__ = ["PoolConfigError", "entitlement_report", "load_scenario"]

_TOP_FIELDS = {"capacity", "slack_capacity", "pools", "usage"}
_USAGE_FIELDS = ("demand", "slack_demand", "allocation", "slack_allocation")
_ROOT_NAMES = {"root", ROOT}


def entitlement_report(doc: Any) -> dict[str, Any]:
    """Compute every pool's entitlement for the scenario in `doc` (see module doc)."""
    tree, capacity, slack_capacity, usage, warnings = load_scenario(doc)
    result = compute_entitlements(tree, capacity, usage, slack_capacity)
    pools: dict[str, Any] = {}
    for path in tree.preorder:
        ent = result[path]
        pools[tree.node(path).name] = {
            "entitlement": _as_dict(ent.entitlement),
            "slack_entitlement": _as_dict(ent.slack_entitlement),
            "nonslack_entitlement": _as_dict(ent.nonslack_entitlement),
        }
    return {"pools": pools, "warnings": warnings}


def load_scenario(
    doc: Any,
) -> tuple[PoolTree, Resources, Resources, dict[str, PoolUsage], list[str]]:
    """Parse a scenario into (tree, capacity, slack capacity, usage by path, warnings)."""
    if not isinstance(doc, Mapping):
        raise PoolConfigError(f"document: must be a mapping, got {type(doc).__name__}")
    unknown = set(doc) - _TOP_FIELDS
    if unknown:
        raise PoolConfigError(f"document: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    if "capacity" not in doc:
        raise PoolConfigError("capacity: missing")
    if not isinstance(doc["capacity"], Mapping):
        raise PoolConfigError("capacity: must be a mapping of kind to amount")
    capacity = _resources(doc["capacity"], "capacity")
    slack_capacity = _resources(doc.get("slack_capacity"), "slack_capacity")
    pools_doc = doc.get("pools")
    pools_doc = {} if pools_doc is None else pools_doc
    if not isinstance(pools_doc, Mapping):
        raise PoolConfigError("pools: must be a mapping of pool name to pool")
    parents, configs = _parse_pools(pools_doc)
    paths = _paths(parents)
    entries = [(_parent_path(parents[name], paths), configs[name]) for name in configs]
    tree, warnings = build_tree(entries, capacity)
    usage_doc = doc.get("usage")
    usage, usage_warnings = _parse_usage({} if usage_doc is None else usage_doc, paths, tree)
    return tree, capacity, slack_capacity, usage, warnings + usage_warnings


def _parse_pools(
    pools_doc: Mapping[Any, Any],
) -> tuple[dict[str, str | None], dict[str, PoolConfig]]:
    parents: dict[str, str | None] = {}
    configs: dict[str, PoolConfig] = {}
    for name, raw in pools_doc.items():
        where = f"pools.{name}"
        if not isinstance(name, str) or not name or "/" in name:
            raise PoolConfigError(f"{where}: pool names must be non-empty strings without '/'")
        if name in _ROOT_NAMES:
            raise PoolConfigError(f"{where}: 'root' is the implicit root and cannot be defined")
        if not isinstance(raw, Mapping):
            raise PoolConfigError(f"{where}: must be a mapping, got {type(raw).__name__}")
        body = dict(raw)
        parent = body.pop("parent", "root")
        if not isinstance(parent, str):
            raise PoolConfigError(f"{where}.parent: must be a pool name or root, got {parent!r}")
        if parent not in _ROOT_NAMES and parent not in pools_doc:
            raise PoolConfigError(f"{where}.parent: unknown pool {parent!r}")
        parents[name] = None if parent in _ROOT_NAMES else parent
        configs[name] = parse_pool_config(body, name=name, where=where)
    return parents, configs


def _parent_path(parent: str | None, paths: Mapping[str, str]) -> str:
    return ROOT if parent is None else paths[parent]


def _paths(parents: Mapping[str, str | None]) -> dict[str, str]:
    """Each pool's path, following parent names up to the root; cycles are an error."""
    paths: dict[str, str] = {}
    for start in parents:
        chain: list[str] = []
        name: str | None = start
        while name is not None and name not in paths:
            if name in chain:
                cycle = " -> ".join([*chain[chain.index(name) :], name])
                raise PoolConfigError(f"pools.{start}.parent: cycle {cycle}")
            chain.append(name)
            name = parents[name]
        base = ROOT if name is None else paths[name]
        for member in reversed(chain):
            base = child_path(base, member)
            paths[member] = base
    return paths


def _parse_usage(
    usage_doc: Any, paths: Mapping[str, str], tree: PoolTree
) -> tuple[dict[str, PoolUsage], list[str]]:
    if not isinstance(usage_doc, Mapping):
        raise PoolConfigError("usage: must be a mapping of pool name to usage")
    usage: dict[str, PoolUsage] = {}
    warnings: list[str] = []
    for name, raw in usage_doc.items():
        where = f"usage.{name}"
        if name not in paths:
            raise PoolConfigError(f"{where}: unknown pool {name!r}")
        if not isinstance(raw, Mapping):
            raise PoolConfigError(f"{where}: must be a mapping, got {type(raw).__name__}")
        unknown = set(raw) - set(_USAGE_FIELDS)
        if unknown:
            raise PoolConfigError(
                f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}"
            )
        values = {f: _resources(raw.get(f), f"{where}.{f}") for f in _USAGE_FIELDS}
        path = paths[name]
        if not tree.node(path).is_leaf:
            warnings.append(f"{where}: {path} is not a leaf pool; its usage is ignored")
            continue
        usage[path] = PoolUsage(**values)
    return usage, warnings


def _resources(raw: Any, where: str) -> Resources:
    if raw is None:
        return Resources()
    if not isinstance(raw, Mapping):
        raise PoolConfigError(f"{where}: must be a mapping of kind to amount")
    for kind, value in raw.items():
        if kind not in KINDS:
            raise PoolConfigError(f"{where}.{kind}: unknown kind (known: {', '.join(KINDS)})")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PoolConfigError(f"{where}.{kind}: must be a number, got {value!r}")
        if not math.isfinite(value) or value < 0:
            raise PoolConfigError(f"{where}.{kind}: must be finite and >= 0, got {value!r}")
    return Resources.from_mapping(raw)


def _as_dict(r: Resources) -> dict[str, float]:
    return {k: round(v, 6) + 0.0 for k, v in r.items()}
