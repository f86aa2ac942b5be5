"""Restart backoff for service instances (Peloton's rule), as a small pure value.

Contract:
- `restart_delay_ms(n)`: the wait before restarting an instance whose last ``n`` runs in a
  row failed: 0 for n <= 0, else ``min(30 s * 2**(n-1), 60 min)`` (Peloton's goal-state
  engine: 30 s, 60 s, 2 min, 4 min, ..., 32 min, then 60 min for ever).
- `RestartBackoff` remembers the failure streak and since when the current run has been
  healthy. A run that stayed healthy for at least `reset_after_ms` (default 10 min, the
  same window as Kubernetes' CrashLoopBackOff) resets the streak: its exit counts as the
  first failure of a new streak. A run that never became healthy, or exited sooner, adds
  to the streak.
- Pure and deterministic: time comes in as ms, values are frozen, every method returns
  a new value. `to_dict`/`from_dict` round-trip for snapshots.

Examples (failures in a row -> delay before the next restart):

    =====  ========
    n      delay
    =====  ========
    0      0
    1      30 s
    2      60 s
    3      2 min
    7      32 min
    8      60 min (cap)
    50     60 min
    =====  ========
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "BASE_DELAY_MS", "MAX_DELAY_MS", "RESET_AFTER_MS", "restart_delay_ms", "RestartBackoff",
]

BASE_DELAY_MS = 30_000
MAX_DELAY_MS = 60 * 60_000
RESET_AFTER_MS = 10 * 60_000
# 30 s * 2**7 already exceeds the cap: larger exponents need not be computed
_MAX_EXPONENT = 7


def restart_delay_ms(failures: int) -> int:
    """Wait before restarting after ``failures`` failed runs in a row (0 when none)."""
    if failures <= 0:
        return 0
    return min(BASE_DELAY_MS * 2 ** min(failures - 1, _MAX_EXPONENT), MAX_DELAY_MS)


@dataclass(frozen=True, slots=True)
class RestartBackoff:
    """One instance's failure streak; `healthy_since_ms` is set while a run is healthy."""

    failures: int = 0
    healthy_since_ms: int | None = None
    reset_after_ms: int = RESET_AFTER_MS

    def became_healthy(self, now_ms: int) -> RestartBackoff:
        """The current run passed its first health check (or runs, without a check).
        Idempotent: a repeated report keeps the first time."""
        if self.healthy_since_ms is not None:
            return self
        return replace(self, healthy_since_ms=now_ms)

    def exited(self, now_ms: int) -> RestartBackoff:
        """The current run ended badly (exit, failed health check, lost): extend or
        restart the streak."""
        healthy_for = (now_ms - self.healthy_since_ms
                       if self.healthy_since_ms is not None else -1)
        failures = 1 if healthy_for >= self.reset_after_ms else self.failures + 1
        return replace(self, failures=failures, healthy_since_ms=None)

    def settled(self, now_ms: int) -> RestartBackoff:
        """Forget the streak once the current run has been healthy long enough (so a
        snapshot of a long-running instance shows 0 failures)."""
        if (self.healthy_since_ms is not None
                and now_ms - self.healthy_since_ms >= self.reset_after_ms):
            return replace(self, failures=0)
        return self

    def delay_ms(self) -> int:
        return restart_delay_ms(self.failures)

    def restart_at_ms(self, exited_ms: int) -> int:
        """When the next run may start, for a run that ended at ``exited_ms``."""
        return exited_ms + self.delay_ms()

    def to_dict(self) -> dict[str, Any]:
        return {"failures": self.failures, "healthy_since_ms": self.healthy_since_ms,
                "reset_after_ms": self.reset_after_ms}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RestartBackoff:
        since = d["healthy_since_ms"]
        return cls(failures=int(d["failures"]),
                   healthy_since_ms=None if since is None else int(since),
                   reset_after_ms=int(d["reset_after_ms"]))
