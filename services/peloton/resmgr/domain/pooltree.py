"""The resource pool tree as an immutable value, and the pure operations that change it.

Pools are identified by path: "/" is the implicit root, "/team-a/batch" a pool two levels
down. Everywhere a pool is referenced, a bare name ("batch") is accepted too when it is
unique in the tree; "root" means "/".

The root has no config of its own: its reservation and limit are the cluster capacity.
When the tree carries a capacity (`PoolTree.capacity`), top-level pools are validated
against it; when it is None (capacity not known yet) those two root checks are skipped.
Capacity may later shrink below what was validated (hosts lost): that is legal and the
entitlement calculation scales reservations down instead of failing.

Operations (`create_pool`, `update_pool`, `delete_pool`, `move_pool`) never mutate their
input. Each returns either a new `PoolTree` or a non-empty `list[str]` of errors of the
form "<path>: <field>: <reason>". They validate only what the change can break (the
changed pool, its parent's reservation sum, its children's limits), so a tree that went
out of bounds because capacity shrank can still be edited.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from peloton.model.resources import EPSILON, KINDS, Resources

from .poolconfig import PoolConfig, PoolConfigError, config_errors

__all__ = [
    "ROOT",
    "DEFAULT_POOL_PATH",
    "UNBOUNDED_LIMIT",
    "PoolNode",
    "PoolTree",
    "TreeResult",
    "child_path",
    "build_tree",
    "resolve_pool",
    "create_pool",
    "update_pool",
    "delete_pool",
    "move_pool",
    "validate_tree",
    "default_pool_config",
    "ensure_default_pool",
]

ROOT = "/"
DEFAULT_POOL_PATH = "/default"
#: The default pool's limit per kind when capacity is not known yet.
UNBOUNDED_LIMIT = 1e12


@dataclass(frozen=True, slots=True)
class PoolNode:
    """One pool: its path, its parent's path (None for the root), config, child paths."""

    path: str
    parent: str | None
    config: PoolConfig
    children: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return "root" if self.path == ROOT else self.config.name

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclass(frozen=True)
class PoolTree:
    """An immutable pool tree; `nodes` maps every path (including "/") to its node.

    Children are kept sorted by name, so every traversal is deterministic.
    """

    nodes: Mapping[str, PoolNode] = field(
        default_factory=lambda: {ROOT: PoolNode(ROOT, None, PoolConfig("root"))}
    )
    capacity: Resources | None = None

    @classmethod
    def empty(cls, capacity: Resources | None = None) -> PoolTree:
        return cls(capacity=capacity)

    def with_capacity(self, capacity: Resources | None) -> PoolTree:
        """Same pools, new cluster capacity; never fails (capacity may shrink)."""
        return replace(self, capacity=capacity)

    def __contains__(self, path: object) -> bool:
        return path in self.nodes

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, path: str) -> PoolNode:
        return self.nodes[path]

    def config(self, path: str) -> PoolConfig:
        return self.nodes[path].config

    def children(self, path: str) -> tuple[str, ...]:
        return self.nodes[path].children

    @cached_property
    def preorder(self) -> tuple[str, ...]:
        """Every path, parents before children, siblings by name; starts with "/"."""
        out: list[str] = []
        stack = [ROOT]
        while stack:
            path = stack.pop()
            out.append(path)
            stack.extend(reversed(self.nodes[path].children))
        return tuple(out)

    @cached_property
    def scratch(self) -> dict[str, object]:
        """Per-tree memo for data derived from this (immutable) tree, e.g. the
        entitlement core's array layout. Keyed by the computing module's name; never
        part of equality."""
        return {}

    def leaves(self) -> list[str]:
        """Leaf pools (the root is excluded, even in an empty tree), in preorder."""
        return [p for p in self.preorder if p != ROOT and not self.nodes[p].children]

    def subtree(self, path: str) -> Iterator[str]:
        """`path` and everything below it, in preorder."""
        stack = [path]
        while stack:
            p = stack.pop()
            yield p
            stack.extend(reversed(self.nodes[p].children))

    @cached_property
    def _by_name(self) -> Mapping[str, tuple[str, ...]]:
        index: dict[str, list[str]] = {}
        for path in self.preorder[1:]:
            index.setdefault(self.nodes[path].config.name, []).append(path)
        return {name: tuple(paths) for name, paths in index.items()}

    def resolve(self, ref: str) -> str | None:
        """The path `ref` names (a path, a unique bare name or "root"), else None."""
        found = resolve_pool(self, ref)
        return found if isinstance(found, str) else None

    def limit(self, path: str) -> Resources | None:
        """A pool's limit; the root's is the capacity (None when unknown = unbounded)."""
        return self.capacity if path == ROOT else self.nodes[path].config.limit

    def reservation(self, path: str) -> Resources | None:
        return self.capacity if path == ROOT else self.nodes[path].config.reservation


#: What a tree operation returns: the new tree, or the list of reasons it was rejected.
TreeResult = PoolTree | list[str]


def child_path(parent: str, name: str) -> str:
    return ROOT + name if parent == ROOT else f"{parent}/{name}"


def resolve_pool(tree: PoolTree, ref: str) -> str | list[str]:
    """Resolve a path or a bare unique name to a path, or explain why it cannot."""
    if ref in (ROOT, "root"):
        return ROOT
    if ref.startswith("/"):
        path = ref.rstrip("/")
        if path in tree.nodes:
            return path
        return [f"{ref}: pool: no pool at this path"]
    paths = tree._by_name.get(ref, ())
    if len(paths) == 1:
        return paths[0]
    if not paths:
        return [f"{ref}: pool: no pool with this name"]
    return [f"{ref}: pool: name is ambiguous ({', '.join(paths)}); use a path"]


# ------------------------------------------------------------------------- operations


def create_pool(tree: PoolTree, parent_ref: str, config: PoolConfig) -> TreeResult:
    """Add a new leaf pool `config.name` under `parent_ref`."""
    parent = resolve_pool(tree, parent_ref)
    if isinstance(parent, list):
        return [e.replace(": pool:", ": parent:", 1) for e in parent]
    path = child_path(parent, config.name)
    errors = config_errors(config, path)
    if errors:
        return errors
    if path in tree.nodes:
        return [f"{path}: name: {config.name!r} is already used under {parent}"]
    nodes = dict(tree.nodes)
    nodes[path] = PoolNode(path, parent, config)
    _set_children(nodes, parent, (*nodes[parent].children, path))
    new = PoolTree(nodes, tree.capacity)
    errors = _limit_vs_parent(new, path) + _children_sum(new, parent)
    return errors or new


def update_pool(tree: PoolTree, ref: str, config: PoolConfig) -> TreeResult:
    """Replace a pool's config; a different `config.name` renames it (paths below follow)."""
    path = resolve_pool(tree, ref)
    if isinstance(path, list):
        return path
    if path == ROOT:
        return ["/: pool: the root pool cannot be changed; its size is the cluster capacity"]
    node = tree.nodes[path]
    new_path = child_path(node.parent or ROOT, config.name)
    errors = config_errors(config, new_path)
    if errors:
        return errors
    if new_path != path and new_path in tree.nodes:
        return [f"{new_path}: name: {config.name!r} is already used under {node.parent}"]
    nodes = dict(tree.nodes)
    nodes[path] = replace(node, config=config)
    if new_path != path:
        _relocate(nodes, path, new_path, node.parent or ROOT)
    new = PoolTree(nodes, tree.capacity)
    errors = _limit_vs_parent(new, new_path) + _children_sum(new, node.parent or ROOT)
    errors += _children_sum(new, new_path)
    for child in new.children(new_path):
        errors += _limit_vs_parent(new, child)
    return errors or new


def delete_pool(tree: PoolTree, ref: str, *, has_tasks: bool = False) -> TreeResult:
    """Remove a leaf pool that holds no tasks (the caller knows about tasks)."""
    path = resolve_pool(tree, ref)
    if isinstance(path, list):
        return path
    if path == ROOT:
        return ["/: pool: the root pool cannot be deleted"]
    node = tree.nodes[path]
    if node.children:
        return [f"{path}: children: pool has child pools ({', '.join(node.children)})"]
    if has_tasks:
        return [f"{path}: tasks: pool still has tasks"]
    nodes = dict(tree.nodes)
    del nodes[path]
    parent = node.parent or ROOT
    _set_children(nodes, parent, tuple(c for c in nodes[parent].children if c != path))
    return PoolTree(nodes, tree.capacity)


def move_pool(tree: PoolTree, ref: str, new_parent_ref: str) -> TreeResult:
    """Move a pool (with its subtree) under another parent, re-validating at the target."""
    path = resolve_pool(tree, ref)
    if isinstance(path, list):
        return path
    target = resolve_pool(tree, new_parent_ref)
    if isinstance(target, list):
        return [e.replace(": pool:", ": parent:", 1) for e in target]
    if path == ROOT:
        return ["/: pool: the root pool cannot be moved"]
    if target == path or target.startswith(path + "/"):
        return [f"{path}: parent: cannot move a pool under itself ({target})"]
    node = tree.nodes[path]
    new_path = child_path(target, node.config.name)
    if new_path == path:
        return tree
    if new_path in tree.nodes:
        return [f"{new_path}: name: {node.config.name!r} is already used under {target}"]
    nodes = dict(tree.nodes)
    _relocate(nodes, path, new_path, target)
    new = PoolTree(nodes, tree.capacity)
    errors = _limit_vs_parent(new, new_path) + _children_sum(new, target)
    return errors or new


def build_tree(
    entries: Iterable[tuple[str, PoolConfig]], capacity: Resources | None = None
) -> tuple[PoolTree, list[str]]:
    """Build a whole tree at once from (parent path, config) pairs in any order.

    Structural problems (a parent path that is not in the tree, the same path twice)
    raise `PoolConfigError`; rule violations come back as the second element (the same
    list `validate_tree` gives), so callers decide whether to reject or only warn.
    Linear in the number of pools, unlike repeated `create_pool`.
    """
    nodes: dict[str, PoolNode] = {ROOT: PoolNode(ROOT, None, PoolConfig("root"))}
    kids: dict[str, list[str]] = {}
    for parent, config in entries:
        path = child_path(parent, config.name)
        if path in nodes:
            raise PoolConfigError(f"{path}: name: {config.name!r} given twice under {parent}")
        nodes[path] = PoolNode(path, parent, config)
        kids.setdefault(parent, []).append(path)
    for parent, children in kids.items():
        if parent not in nodes:
            raise PoolConfigError(f"{children[0]}: parent: no pool at {parent}")
        nodes[parent] = replace(nodes[parent], children=tuple(sorted(children)))
    tree = PoolTree(nodes, capacity)
    if len(tree.preorder) != len(nodes):  # only possible via a malformed parent chain
        raise PoolConfigError("pools: some pools are not connected to the root")
    return tree, validate_tree(tree)


def validate_tree(tree: PoolTree) -> list[str]:
    """Every rule violation in the tree, in preorder; [] for a valid tree."""
    errors: list[str] = []
    for path in tree.preorder:
        if path != ROOT:
            errors += config_errors(tree.config(path), path)
            errors += _limit_vs_parent(tree, path)
        errors += _children_sum(tree, path)
    return errors


def default_pool_config(capacity: Resources | None = None) -> PoolConfig:
    """The pool the service creates at start: reservation 0, limit capacity, share 1."""
    limit = capacity if capacity is not None else Resources(*(UNBOUNDED_LIMIT,) * len(KINDS))
    return PoolConfig.uniform("default", Resources.zero(), limit)


def ensure_default_pool(tree: PoolTree) -> TreeResult:
    """`tree` with "/default" added if it is missing (idempotent)."""
    if DEFAULT_POOL_PATH in tree.nodes:
        return tree
    return create_pool(tree, ROOT, default_pool_config(tree.capacity))


# --------------------------------------------------------------------------- helpers


def _set_children(nodes: dict[str, PoolNode], path: str, children: Sequence[str]) -> None:
    nodes[path] = replace(nodes[path], children=tuple(sorted(children)))


def _relocate(nodes: dict[str, PoolNode], old: str, new: str, new_parent: str) -> None:
    """Rename the subtree at `old` to `new` under `new_parent`, fixing every link."""
    old_parent = nodes[old].parent or ROOT
    _set_children(nodes, old_parent, [c for c in nodes[old_parent].children if c != old])
    subtree = [old]
    i = 0
    while i < len(subtree):
        subtree.extend(nodes[subtree[i]].children)
        i += 1
    for path in subtree:
        node = nodes.pop(path)
        moved = new + path[len(old) :]
        parent = new_parent if path == old else new + (node.parent or "")[len(old) :]
        children = tuple(new + c[len(old) :] for c in node.children)
        nodes[moved] = PoolNode(moved, parent, node.config, children)
    _set_children(nodes, new_parent, (*nodes[new_parent].children, new))


def _limit_vs_parent(tree: PoolTree, path: str) -> list[str]:
    node = tree.nodes[path]
    parent = node.parent or ROOT
    parent_limit = tree.limit(parent)
    if parent_limit is None:
        return []
    what = "cluster capacity" if parent == ROOT else f"parent {parent} limit"
    limit = node.config.limit
    return [
        f"{path}: resources.{k}.limit: {limit.get(k):g} exceeds {what} {parent_limit.get(k):g}"
        for k in limit.exceeding(parent_limit)
    ]


def _children_sum(tree: PoolTree, path: str) -> list[str]:
    own = tree.reservation(path)
    children = tree.nodes[path].children
    if own is None or not children:
        return []
    total = Resources.zero()
    for child in children:
        total = total + tree.nodes[child].config.reservation
    what = "the cluster capacity" if path == ROOT else "its reservation"
    return [
        f"{path}: resources.{k}.reservation: children reserve {total.get(k):g} in total, "
        f"more than {what} {own.get(k):g}"
        for k in KINDS
        if total.get(k) > own.get(k) + EPSILON
    ]
