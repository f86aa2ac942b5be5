"""A faster `__init__` for the frozen, slotted dataclasses the cores build by the million.

A frozen dataclass's generated `__init__` sets each field with `object.__setattr__` (it
has to get round the class's own `__setattr__`, which refuses): on the project's 2-core
machines a `Resources` (4 fields) cost about 1 us to build, and the resource and host
managers build several per fact (py-spy: frozen dataclass construction was 5-9% of their
busy time in `bench scale`). `quick_init(cls)` gives the class an `__init__` with the same
parameters and defaults that stores each field through its slot's descriptor, which is
what `object.__setattr__` ends in: about half the cost. Everything else the dataclass
made (the frozen `__setattr__`, `__eq__`, `__hash__`, `__repr__`, `replace`) is kept.

Supported: positional fields with or without a default or a default factory, `init=False`
fields, `__post_init__`. A class with InitVar, ClassVar or keyword-only fields is refused
(TypeError at decoration): none is decorated, and a refusal is better than a silent
difference. `ORIGINAL_INIT` keeps each class's generated `__init__` so tests can compare.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, TypeVar

__all__ = ["quick_init", "ORIGINAL_INIT"]

T = TypeVar("T")

ORIGINAL_INIT: dict[type, Any] = {}

_NOT_GIVEN = object()  # a default factory's parameter left out (called then)


def _slot_setter(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        slot = klass.__dict__.get(name)
        if isinstance(slot, types.MemberDescriptorType):
            return slot.__set__
    raise TypeError(f"{cls.__name__}.{name} is not a slot")


def quick_init(cls: type[T]) -> type[T]:
    """Replace the generated `__init__` of a frozen, slotted dataclass (see module doc)."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__}: quick_init takes a frozen, slotted dataclass")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if len(fields) != len(cls.__dataclass_fields__):  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__}: InitVar or ClassVar fields are not supported")
    ns: dict[str, Any] = {"_NOT_GIVEN": _NOT_GIVEN}
    args: list[str] = []
    body: list[str] = []
    for f in fields:
        if f.kw_only:
            raise TypeError(f"{cls.__name__}.{f.name}: keyword-only fields are not supported")
        name = f.name
        ns[f"_set_{name}"] = _slot_setter(cls, name)
        has_default = f.default is not dataclasses.MISSING
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_default:
            ns[f"_default_{name}"] = f.default
        if has_factory:
            ns[f"_factory_{name}"] = f.default_factory
        if f.init:
            if has_default:
                args.append(f"{name}=_default_{name}")
            elif has_factory:
                args.append(f"{name}=_NOT_GIVEN")
            else:
                args.append(name)
            value = (f"_factory_{name}() if {name} is _NOT_GIVEN else {name}"
                     if has_factory else name)
        elif has_default:
            value = f"_default_{name}"
        elif has_factory:
            value = f"_factory_{name}()"
        else:
            continue  # dataclass leaves such a field unset too
        body.append(f"    _set_{name}(self, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = f"def __init__(self, {', '.join(args)}):\n" + ("\n".join(body) or "    pass")
    exec(source, ns)  # noqa: S102 - generated from the class's own field names
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    ORIGINAL_INIT[cls] = cls.__init__  # type: ignore[misc]
    cls.__init__ = init  # type: ignore[misc,method-assign]
    return cls
