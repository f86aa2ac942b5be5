"""Paths into a JSON tree, for tests that corrupt a snapshot one field at a time (not a
test module). A path is a tuple of dict keys and list indexes from the root."""

from __future__ import annotations

from typing import Any

__all__ = ["json_paths", "parent_of"]


def json_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into `value`, the root's own `()` first, then depth first."""
    found = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            found += json_paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += json_paths(v, (*prefix, i))
    return found


def parent_of(tree: Any, path: tuple[Any, ...]) -> Any:
    """The dict or list that holds the value at `path` (a path other than the root's):
    `parent_of(tree, path)[path[-1]]` is that value."""
    where = tree
    for key in path[:-1]:
        where = where[key]
    return where
