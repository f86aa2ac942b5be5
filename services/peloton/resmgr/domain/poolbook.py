"""The resource pool registry: the tree folded from the resmgr's pool facts, and the
decisions on pool requests (pure).

Contract:
- `fold(type, body)` applies ResourcePoolCreated / Updated / Deleted / RequestRejected.
  Facts are absolute (they carry each changed pool as it is afterwards), so folding never
  re-validates and never fails; a fact whose request_id was already folded is skipped.
  The book starts with /default (reservation 0, limit unbounded), so replaying the log
  from its start rebuilds the same tree on every instance.
- `decide(type, body, capacity, busy_pools, now_ms)` answers one request with one fact
  (created, updated, deleted, or rejected with every reason) using the pure pooltree
  operations. It decides against the folded tree *plus this instance's own decisions not
  yet folded back* (speculation), so back-to-back requests such as "create a parent, then
  its child" are decided in order. A request whose answer is already folded or speculated
  is not decided again (requests may be delivered twice).
- Speculation ends when the fact with the same request_id is folded (whoever published
  it: the log is the truth). `unconfirmed(now_ms, after_ms)` lists the speculated facts
  that have not come back in time; a new leader publishes them again (a predecessor may
  have died between deciding and publishing), which is safe since facts are idempotent.

Rules beyond pooltree's (limits within the parent's, sibling reservations within the
parent's, unique names, moves re-validated): a pool with tasks (`busy_pools`) cannot be
deleted nor get child pools (jobs run in leaf pools); /default cannot be deleted (jobs
without a respool go there). Top-level pools are checked against the capacity passed to
`decide` (None: not known yet, so those two root checks are skipped).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from peloton.model.event import Event
from peloton.model.resources import KINDS, Resources

from .poolconfig import (
    PoolConfig,
    PoolConfigError,
    ReservationType,
    ResourceSpec,
    config_errors,
    parse_pool_config,
)
from .pooltree import (
    DEFAULT_POOL_PATH,
    ROOT,
    PoolTree,
    build_tree,
    child_path,
    create_pool,
    default_pool_config,
    delete_pool,
    move_pool,
    update_pool,
)

__all__ = [
    "POOL_FACTS",
    "POOL_REQUESTS",
    "PoolBook",
    "config_record",
    "config_from_record",
    "normalize_path",
    "parse_pool_document",
    "split_path",
]

POOL_REQUESTS = ("ResourcePoolCreateRequested", "ResourcePoolUpdateRequested",
                 "ResourcePoolDeleteRequested")
POOL_FACTS = ("ResourcePoolCreated", "ResourcePoolUpdated", "ResourcePoolDeleted",
              "ResourcePoolRequestRejected")
_OPERATION = dict(zip(POOL_REQUESTS, ("CREATE", "UPDATE", "DELETE"), strict=True))


# ------------------------------------------------------------------ config <-> record


def config_record(config: PoolConfig) -> dict[str, Any]:
    """A PoolConfig as the events' PoolConfig record (every kind listed, KINDS order)."""
    return {
        "name": config.name,
        "description": config.description,
        "resources": [
            {"kind": k, "reservation": s.reservation, "limit": s.limit, "share": s.share,
             "type": s.type.value}
            for k, s in zip(KINDS, config.specs, strict=True)
        ],
        "slack_limit_percent": config.slack_limit_percent,
        "controller_limit_percent": config.controller_limit_percent,
    }


def config_from_record(rec: Mapping[str, Any]) -> PoolConfig:
    """The inverse of `config_record` (kinds missing from the record get the defaults)."""
    specs = {
        r["kind"]: ResourceSpec(r["reservation"], r["limit"], r["share"],
                                ReservationType(r["type"]))
        for r in rec["resources"]
    }
    return PoolConfig.create(
        rec["name"], specs, slack_limit_percent=rec["slack_limit_percent"],
        controller_limit_percent=rec["controller_limit_percent"],
        description=rec["description"])


def normalize_path(path: str) -> str:
    """"/a/b/" -> "/a/b"; a path must start with "/" (ValueError otherwise)."""
    if not path.startswith("/"):
        raise ValueError(f"{path}: pool: a pool path starts with '/' (e.g. /team-a/batch)")
    parts = [p for p in path.split("/") if p]
    return ROOT + "/".join(parts)


def split_path(path: str) -> tuple[str, str]:
    """(parent path, name) of a normalized non-root path."""
    parent, _, name = path.rpartition("/")
    return parent or ROOT, name


def parse_pool_document(doc: Any, path: str) -> tuple[dict[str, Any] | None, str | None,
                                                     list[str]]:
    """Check a ResourcePoolConfig document meant for the pool at `path` (normalized).

    Returns (PoolConfig record, parent, problems): `parent` is the document's optional
    `parent` field, normalized (None when absent); the document's optional `name` must be
    the path's last segment. problems are "field: reason" strings (parse errors, then the
    config's own rule violations); the record is None when there are any.
    """
    if not isinstance(doc, Mapping):
        return None, None, [f"body: must be a mapping, got {type(doc).__name__}"]
    fields = dict(doc)
    problems: list[str] = []
    parent = fields.pop("parent", None)
    if parent is not None:
        try:
            parent = normalize_path(parent if str(parent).startswith("/") else f"/{parent}")
        except ValueError:
            problems.append(f"parent: must be a pool path, got {parent!r}")
            parent = None
    name = split_path(path)[1]
    if "name" in fields and fields["name"] != name:
        problems.append(f"name: {fields['name']!r} does not match the path's name {name!r}")
    fields["name"] = name
    try:
        config = parse_pool_config(fields, where="config")
    except PoolConfigError as exc:
        return None, parent, [*problems, str(exc).removeprefix("config.")]
    problems += [e.removeprefix(f"{path}: ") for e in config_errors(config, path)]
    return (None if problems else config_record(config)), parent, problems


# ------------------------------------------------------------------------- the book


@dataclass(frozen=True, slots=True)
class _Speculation:
    request_id: str
    event: Event
    decided_at: int


class PoolBook:
    """Pools by path, folded from facts; see the module docstring."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[str, PoolConfig]] = {
            DEFAULT_POOL_PATH: (ROOT, default_pool_config())}
        self.applied: set[str] = set()
        self.version = 0  # bumps on every change of the folded tree
        self._tree: PoolTree | None = None
        self._speculation: dict[str, _Speculation] = {}  # request_id -> decision, in order
        self._resent: dict[str, int] = {}

    # ---- fold -----------------------------------------------------------------------
    @property
    def tree(self) -> PoolTree:
        """The folded tree (built lazily; no capacity attached)."""
        if self._tree is None:
            self._tree = _build(self.entries)
        return self._tree

    def fold(self, etype: str, body: Mapping[str, Any]) -> None:
        if etype not in POOL_FACTS:
            return
        rid = body["request_id"]
        self._speculation.pop(rid, None)
        self._resent.pop(rid, None)
        if rid in self.applied:
            return
        self.applied.add(rid)
        if _apply(self.entries, etype, body):
            self._tree = None
            self.version += 1

    # ---- decide ---------------------------------------------------------------------
    def decide(self, etype: str, body: Mapping[str, Any], capacity: Resources | None,
               busy_pools: Collection[str], now_ms: int) -> list[Event]:
        """One fact answering the request, speculated at once (see the module doc)."""
        rid = body["request_id"]
        if etype not in POOL_REQUESTS or rid in self.applied or rid in self._speculation:
            return []
        tree = _build(self._working_entries()).with_capacity(capacity)
        outcome: Event | list[str]
        try:
            path = normalize_path(body["path"])
        except ValueError as exc:
            outcome = [str(exc)]
        else:
            if etype == "ResourcePoolCreateRequested":
                outcome = self._create(tree, path, body, busy_pools, now_ms)
            elif etype == "ResourcePoolUpdateRequested":
                outcome = self._update(tree, path, body, busy_pools, now_ms)
            else:
                outcome = self._delete(tree, path, body, busy_pools, now_ms)
        if isinstance(outcome, list):
            outcome = Event("ResourcePoolRequestRejected", body["path"], {
                "request_id": rid, "at": now_ms, "path": body["path"],
                "operation": _OPERATION[etype], "reasons": outcome})
        return [self._speculate(outcome, now_ms)]

    def unconfirmed(self, now_ms: int, after_ms: int) -> list[Event]:
        """Speculated facts not folded back within `after_ms` (each again every after_ms)."""
        out = []
        for rid, spec in self._speculation.items():
            last = self._resent.get(rid, spec.decided_at)
            if now_ms - last >= after_ms:
                self._resent[rid] = now_ms
                out.append(spec.event)
        return out

    def resend_marks(self) -> dict[str, int]:
        """When each speculated fact was last resent (a copy; see `set_resend_marks`)."""
        return dict(self._resent)

    def set_resend_marks(self, marks: Mapping[str, int]) -> None:
        """Put back marks taken by `resend_marks` (a resend that was not published);
        marks of speculations that ended meanwhile are left out."""
        self._resent = {rid: at for rid, at in marks.items() if rid in self._speculation}

    # ---- snapshot -------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The book as plain JSON-able data: folded pools, applied request ids, and this
        instance's speculated decisions (they expire by being resent, see the module doc)."""
        return {
            "entries": [[path, parent, config_record(config)]
                        for path, (parent, config) in sorted(self.entries.items())],
            "applied": sorted(self.applied),
            "version": self.version,
            "speculation": [[s.request_id, s.event.type, s.event.key, s.event.body,
                             s.decided_at] for s in self._speculation.values()],
            "resent": dict(self._resent),
        }

    @classmethod
    def restore(cls, data: Mapping[str, Any]) -> PoolBook:
        """A book from `snapshot()` data; KeyError/TypeError/ValueError on bad data."""
        book = cls()
        book.entries = {str(path): (str(parent), config_from_record(rec))
                        for path, parent, rec in data["entries"]}
        book.applied = {str(r) for r in data["applied"]}
        book.version = int(data["version"])
        book._speculation = {
            str(rid): _Speculation(str(rid), Event(str(t), str(k), dict(body)), int(at))
            for rid, t, k, body, at in data["speculation"]}
        book._resent = {str(r): int(at) for r, at in data["resent"].items()}
        return book

    def _speculate(self, event: Event, now_ms: int) -> Event:
        rid = event.body["request_id"]
        self._speculation[rid] = _Speculation(rid, event, now_ms)
        return event

    def _working_entries(self) -> dict[str, tuple[str, PoolConfig]]:
        if not self._speculation:
            return self.entries
        entries = dict(self.entries)
        for spec in self._speculation.values():
            _apply(entries, spec.event.type, spec.event.body)
        return entries

    def _create(self, tree: PoolTree, path: str, body: Mapping[str, Any],
                busy_pools: Collection[str], now_ms: int) -> Event | list[str]:
        if path == ROOT:
            return ["/: pool: the root pool always exists"]
        parent, name = split_path(path)
        if parent not in tree:
            return [f"{path}: parent: no pool at {parent}"]
        if parent in busy_pools:
            return [_holds_tasks(path, parent)]
        config = _config(body, path, name)
        if isinstance(config, list):
            return config
        result = create_pool(tree, parent, config)
        if isinstance(result, list):
            return result
        return Event("ResourcePoolCreated", path, {
            "request_id": body["request_id"], "at": now_ms,
            "pool": _record(path, parent, config)})

    def _update(self, tree: PoolTree, path: str, body: Mapping[str, Any],
                busy_pools: Collection[str], now_ms: int) -> Event | list[str]:
        if path not in tree or path == ROOT:
            why = "the root pool cannot be changed" if path == ROOT else "no pool at this path"
            return [f"{path}: pool: {why}"]
        current = tree.node(path).parent or ROOT
        before = list(tree.subtree(path))
        target = body.get("parent")
        new_path = path
        if target is not None:
            try:
                target = normalize_path(target)
            except ValueError as exc:
                return [str(exc).replace(": pool:", ": parent:", 1)]
            if target != current:
                if target not in tree:
                    return [f"{path}: parent: no pool at {target}"]
                if target in busy_pools:
                    return [_holds_tasks(path, target)]
                moved = move_pool(tree, path, target)
                if isinstance(moved, list):
                    return moved
                tree, new_path = moved, child_path(target, split_path(path)[1])
        config = _config(body, path, split_path(new_path)[1])
        if isinstance(config, list):
            return config
        result = update_pool(tree, new_path, config)
        if isinstance(result, list):
            return result
        pools = [_record(p, result.node(p).parent or ROOT, result.config(p))
                 for p in result.subtree(new_path)]
        removed = [] if new_path == path else before
        return Event("ResourcePoolUpdated", path, {
            "request_id": body["request_id"], "at": now_ms, "path": path, "pools": pools,
            "removed": sorted(removed)})

    def _delete(self, tree: PoolTree, path: str, body: Mapping[str, Any],
                busy_pools: Collection[str], now_ms: int) -> Event | list[str]:
        if path == DEFAULT_POOL_PATH:
            return [f"{path}: pool: the default pool cannot be deleted (jobs without a "
                    "respool go there)"]
        if path not in tree and path != ROOT:
            return [f"{path}: pool: no pool at this path"]
        result = delete_pool(tree, path, has_tasks=path in busy_pools)
        if isinstance(result, list):
            return result
        return Event("ResourcePoolDeleted", path, {
            "request_id": body["request_id"], "at": now_ms, "path": path})

def _holds_tasks(path: str, parent: str) -> str:
    return (f"{path}: parent: {parent} holds tasks; jobs run in leaf pools, so a pool with "
            "tasks cannot get child pools")


def _config(body: Mapping[str, Any], path: str, name: str) -> PoolConfig | list[str]:
    """The request's config named `name`, or why it cannot be read (the topic is public:
    any Kafka client may publish an unknown kind or type)."""
    try:
        return config_from_record(body["config"]).renamed(name)
    except ValueError as exc:  # PoolConfigError, or an unknown reservation type
        return [f"{path}: config: {exc}"]


def _record(path: str, parent: str, config: PoolConfig) -> dict[str, Any]:
    return {"path": path, "parent": parent, "config": config_record(config)}


def _apply(entries: dict[str, tuple[str, PoolConfig]], etype: str,
           body: Mapping[str, Any]) -> bool:
    """Apply one fact to `entries`; True when the tree changed."""
    if etype == "ResourcePoolCreated":
        pool = body["pool"]
        entries[pool["path"]] = (pool["parent"], config_from_record(pool["config"]))
        return True
    if etype == "ResourcePoolUpdated":
        for path in body["removed"]:
            entries.pop(path, None)
        for pool in body["pools"]:
            entries[pool["path"]] = (pool["parent"], config_from_record(pool["config"]))
        return True
    if etype == "ResourcePoolDeleted":
        return entries.pop(body["path"], None) is not None
    return False


def _build(entries: Mapping[str, tuple[str, PoolConfig]]) -> PoolTree:
    """The tree of `entries`, parents first; entries not connected to the root are left
    out (only possible with a corrupt log), so building never fails."""
    kept: dict[str, tuple[str, PoolConfig]] = {}
    for path in sorted(entries, key=lambda p: (p.count("/"), p)):
        parent, config = entries[path]
        if (parent == ROOT or parent in kept) and child_path(parent, config.name) == path:
            kept[path] = (parent, config)
    tree, _ = build_tree(_pairs(kept))
    return tree


def _pairs(entries: Mapping[str, tuple[str, PoolConfig]]) -> Iterable[tuple[str, PoolConfig]]:
    return ((parent, config) for parent, config in entries.values())
