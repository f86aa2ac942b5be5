"""`quick_init`: the same objects as the dataclass's own `__init__`, built faster.

Every class the cores decorate is compared with its generated `__init__` on random
arguments (hypothesis), and small classes cover what those do not use (default
factories, `init=False`, `__post_init__`) and what is refused.
"""

from __future__ import annotations

import dataclasses
from dataclasses import FrozenInstanceError, InitVar, dataclass, field
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

import peloton.agent.status
import peloton.hostmgr.domain.records
import peloton.jobmgr.domain.records
import peloton.model.resources
import peloton.model.spec
import peloton.resmgr.domain.admission
import peloton.resmgr.domain.ledger  # noqa: F401 - each module decorates its classes
from peloton.model.quickinit import ORIGINAL_INIT, quick_init
from peloton.model.resources import Resources

DECORATED = sorted(ORIGINAL_INIT, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def _state(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name, "<unset>") for f in dataclasses.fields(obj)}


def _built_both_ways(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    quick = cls(*args, **kwargs)
    original = object.__new__(cls)
    ORIGINAL_INIT[cls](original, *args, **kwargs)
    return quick, original


_values = st.one_of(st.none(), st.integers(), st.floats(allow_nan=False), st.text(max_size=4),
                    st.booleans(), st.tuples(st.integers()))


def test_the_cores_hot_records_are_decorated() -> None:
    names = {c.__qualname__ for c in DECORATED}
    assert {"Resources", "TaskSpec", "JobSpec", "RunAlloc", "Pending", "TaskStatus", "Gang",
            "PoolAllocation", "_Change", "_RunFact"} <= names


@pytest.mark.parametrize("cls", DECORATED, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
@given(data=st.data())
def test_same_object_as_the_generated_init(cls: type, data: st.DataObject) -> None:
    fields = [f for f in dataclasses.fields(cls) if f.init]
    required = [f for f in fields if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]
    optional = fields[len(required):]
    n_optional = data.draw(st.integers(0, len(optional)))
    args = tuple(data.draw(_values) for _ in required[:]) + tuple(
        data.draw(_values) for _ in optional[:n_optional])
    by_name = data.draw(st.booleans())
    kwargs: dict[str, Any] = {}
    if by_name:  # the same values, passed by keyword
        kwargs = {f.name: v for f, v in zip(fields, args, strict=False)}
        args = ()
    quick, original = _built_both_ways(cls, args, kwargs)
    assert _state(quick) == _state(original)
    assert quick == original
    with pytest.raises(FrozenInstanceError):
        setattr(quick, fields[0].name, 1)


def test_argument_errors_are_the_generated_inits() -> None:
    with pytest.raises(TypeError):
        Resources(1.0, 2.0, 3.0, 4.0, 5.0)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Resources(1.0, cpu=2.0)  # type: ignore[misc]
    with pytest.raises(TypeError):
        Resources(watts=3.0)  # type: ignore[call-arg]


@quick_init
@dataclass(frozen=True, slots=True)
class _Shapes:
    a: int
    b: str = "b"
    c: list[int] = field(default_factory=list)
    d: dict[str, int] = field(default_factory=dict, init=False)
    e: int = field(default=5, init=False)
    f: int = field(init=False, repr=False)  # dataclass leaves it unset: so do we

    def __post_init__(self) -> None:
        object.__setattr__(self, "f", self.a * 2)


@pytest.mark.parametrize("args, kwargs", [
    ((1,), {}), ((1, "x"), {}), ((1, "x", [3]), {}), ((), {"a": 2, "c": [1]}),
])
def test_factories_init_false_and_post_init(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    quick, original = _built_both_ways(_Shapes, args, kwargs)
    assert _state(quick) == _state(original)
    assert quick.f == quick.a * 2
    other = _Shapes(*args, **kwargs)
    assert other.d is not quick.d  # a factory's value is new for each object
    if len(args) < 3 and "c" not in kwargs:
        assert other.c is not quick.c


def test_refuses_what_it_does_not_build_alike() -> None:
    @dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        a: int
        b: InitVar[int] = 0

    @dataclass(frozen=True, slots=True)
    class WithClassVar:
        a: int
        b: ClassVar[int] = 0

    @dataclass(frozen=True, slots=True, kw_only=True)
    class KeywordOnly:
        a: int

    for cls in (NotFrozen, NoSlots, WithInitVar, WithClassVar, KeywordOnly):
        with pytest.raises(TypeError):
            quick_init(cls)
