"""The resource vector shared by every scheduling core.

`Resources` is an immutable vector over the four schedulable kinds (cpu in cores, memory
and disk in MB, gpu in devices). Arithmetic is element-wise; comparisons used for fitting
are explicit methods (`fits_in`) rather than operators, because "a <= b" on vectors is a
partial order and reads ambiguously.

Floating point: quantities are floats; `EPSILON` is the tolerance every core uses when
asking "does this fit" so that 0.1 + 0.2 cpus fits in 0.3.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from peloton.model.quickinit import quick_init

__all__ = ["KINDS", "EPSILON", "Resources"]

KINDS: tuple[str, ...] = ("cpu", "memory", "disk", "gpu")
_KIND_SET = frozenset(KINDS)
EPSILON = 1e-6


@quick_init
@dataclass(frozen=True, slots=True)
class Resources:
    cpu: float = 0.0
    memory: float = 0.0
    disk: float = 0.0
    gpu: float = 0.0

    @classmethod
    def zero(cls) -> Resources:
        return _ZERO

    @classmethod
    def from_mapping(cls, values: Mapping[str, float] | None) -> Resources:
        """Build from a {kind: amount} mapping; unknown kinds are an error, missing are 0."""
        if not values:
            return _ZERO
        if type(values) is not dict or not values.keys() <= _KIND_SET:
            unknown = set(values) - _KIND_SET  # (TypeError if not a collection of names)
            if unknown:
                raise ValueError(f"unknown resource kind(s): {', '.join(sorted(unknown))}")
        get = values.get
        return cls(float(get("cpu", 0.0)), float(get("memory", 0.0)),
                   float(get("disk", 0.0)), float(get("gpu", 0.0)))

    def as_dict(self) -> dict[str, float]:
        return {"cpu": self.cpu, "memory": self.memory, "disk": self.disk, "gpu": self.gpu}

    def get(self, kind: str) -> float:
        return float(getattr(self, kind))

    def items(self) -> Iterator[tuple[str, float]]:
        yield from self.as_dict().items()

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu + other.cpu,
            self.memory + other.memory,
            self.disk + other.disk,
            self.gpu + other.gpu,
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu - other.cpu,
            self.memory - other.memory,
            self.disk - other.disk,
            self.gpu - other.gpu,
        )

    def scale(self, factor: float) -> Resources:
        return Resources(
            self.cpu * factor, self.memory * factor, self.disk * factor, self.gpu * factor
        )

    def min(self, other: Resources) -> Resources:
        return Resources(
            min(self.cpu, other.cpu),
            min(self.memory, other.memory),
            min(self.disk, other.disk),
            min(self.gpu, other.gpu),
        )

    def max(self, other: Resources) -> Resources:
        return Resources(
            max(self.cpu, other.cpu),
            max(self.memory, other.memory),
            max(self.disk, other.disk),
            max(self.gpu, other.gpu),
        )

    def clamp_non_negative(self) -> Resources:
        return self.max(_ZERO)

    def fits_in(self, other: Resources) -> bool:
        """True when every kind of self is at most the same kind of other (within EPSILON)."""
        return (
            self.cpu <= other.cpu + EPSILON
            and self.memory <= other.memory + EPSILON
            and self.disk <= other.disk + EPSILON
            and self.gpu <= other.gpu + EPSILON
        )

    def exceeding(self, other: Resources) -> list[str]:
        """The kinds in which self is above other (beyond EPSILON), in KINDS order."""
        return [k for k in KINDS if self.get(k) > other.get(k) + EPSILON]

    def is_zero(self) -> bool:
        return all(abs(v) <= EPSILON for _, v in self.items())

    def __str__(self) -> str:
        return (
            f"cpu={self.cpu:g} memory={self.memory:g}MB disk={self.disk:g}MB gpu={self.gpu:g}"
        )


_ZERO = Resources()
