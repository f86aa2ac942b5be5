"""How much state a core holds: entries in every container reachable from it.

`footprint(core)` walks the core's attributes (``__dict__`` and ``__slots__``, private ones
included: caches are memory too) through dicts, lists, sets and tuples, and through
objects defined in `peloton`, and returns the number of container entries it met (an
`array.array` or a `deque` counts its items: compact tables are state too). It
counts each object once (shared objects are not counted twice) and never walks into
anything outside `peloton` (an asyncio loop, a codec), so the figure measures the core's
own bookkeeping. It is a size to compare over time (flat or growing), not bytes.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterable
from typing import Any

__all__ = ["footprint", "footprints"]

_ATOMS = (str, bytes, int, float, bool, type(None))


def footprint(root: Any) -> int:
    seen: set[int] = set()
    stack: list[Any] = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if isinstance(obj, _ATOMS) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, dict):
            total += len(obj)
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset, deque)):
            total += len(obj)
            stack.extend(obj)
        elif isinstance(obj, array):
            total += len(obj)
        elif _ours(obj):
            stack.extend(_attributes(obj))
    return total


def footprints(cores: dict[str, Any]) -> dict[str, int]:
    """`footprint` of each named core."""
    return {name: footprint(core) for name, core in sorted(cores.items())}


def _ours(obj: Any) -> bool:
    module = getattr(type(obj), "__module__", "") or ""
    return module == "peloton" or module.startswith("peloton.")


def _attributes(obj: Any) -> Iterable[Any]:
    found: list[Any] = list(getattr(obj, "__dict__", {}).values())
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if slot in ("__dict__", "__weakref__"):
                continue
            try:
                found.append(getattr(obj, slot))
            except AttributeError:
                continue
    return found
