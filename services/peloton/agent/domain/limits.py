"""A task's cpu and memory limits, and how its end is worded when memory ran out (pure).

Units: a launch's `memory` is in MB, read as MiB (2**20 bytes, what `memLimitMb` means
to users); `cpu` is in cores. A value <= 0 means "no limit" for that kind.

cgroup v2 (`peloton.agent.cgroups`): `memory.max` is the limit in bytes; `cpu.max` is
"<quota> <period>" in microseconds, quota = cpu x period (at least the kernel's 1000 us
minimum), "max <period>" when unlimited. A task was killed for memory when its cgroup's
`memory.events` counts an `oom_kill`.

rlimits (no usable cgroup v2): memory is RLIMIT_DATA per process, so an allocation past
the limit fails (malloc returns NULL) instead of the kernel killing anything. How the
task then dies is up to it; `rlimit_oom_evidence` recognises the usual ways: a Python
MemoryError, the C/C++/Go/Java "out of memory" messages, "Cannot allocate memory"
(ENOMEM) on its stderr. A bare SIGSEGV/SIGABRT is only "possibly" out of memory (an
unchecked NULL from malloc looks like any other crash). This is a best guess from the
task's own output, stated as such in the message.

Determinism: functions of their arguments only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "MIB",
    "CPU_PERIOD_US",
    "MIN_CPU_QUOTA_US",
    "TaskLimits",
    "memory_bytes",
    "cpu_max",
    "oom_kills",
    "rlimit_oom_evidence",
    "oom_message",
]

MIB = 1 << 20
CPU_PERIOD_US = 100_000
MIN_CPU_QUOTA_US = 1_000

# What runtimes print when an allocation fails (checked on the tail of the task's stderr).
_OOM_PATTERNS: tuple[tuple[str, re.Pattern[bytes]], ...] = (
    ("MemoryError", re.compile(rb"\bMemoryError\b")),
    ("std::bad_alloc", re.compile(rb"std::bad_alloc")),
    ("java.lang.OutOfMemoryError", re.compile(rb"java\.lang\.OutOfMemoryError")),
    ("out of memory", re.compile(rb"out of memory", re.IGNORECASE)),
    ("Cannot allocate memory", re.compile(rb"Cannot allocate memory")),
)
_SIGSEGV, _SIGABRT = 11, 6


@dataclass(frozen=True, slots=True)
class TaskLimits:
    """One run's limits: memory in bytes, cpu in cores; None = not limited."""

    memory_bytes: int | None = None
    cpu: float | None = None

    @classmethod
    def of(cls, cpu: float, memory_mb: float) -> TaskLimits:
        return cls(memory_bytes(memory_mb), cpu if cpu > 0 else None)

    @property
    def memory_mib(self) -> float | None:
        return None if self.memory_bytes is None else self.memory_bytes / MIB


def memory_bytes(memory_mb: float) -> int | None:
    """The memory limit in bytes for `memory_mb` MiB; None when <= 0 (unlimited)."""
    if memory_mb <= 0:
        return None
    return max(1, round(memory_mb * MIB))


def cpu_max(cpu: float | None, period_us: int = CPU_PERIOD_US) -> str:
    """The cgroup v2 `cpu.max` line for `cpu` cores."""
    if cpu is None or cpu <= 0:
        return f"max {period_us}"
    return f"{max(MIN_CPU_QUOTA_US, round(cpu * period_us))} {period_us}"


def oom_kills(memory_events: str) -> int:
    """The `oom_kill` count of a cgroup v2 `memory.events` file (0 when absent)."""
    for line in memory_events.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "oom_kill" and parts[1].isdigit():
            return int(parts[1])
    return 0


def rlimit_oom_evidence(returncode: int, stderr_tail: bytes) -> tuple[str, bool] | None:
    """(evidence, certain) that a task under a memory rlimit died of it, else None.

    A task that exited 0 did not die. `certain` is True for an allocation-failure
    message on stderr, False for a bare SIGSEGV/SIGABRT.
    """
    if returncode == 0:
        return None
    for name, pattern in _OOM_PATTERNS:
        if pattern.search(stderr_tail):
            return f"the task reported {name}", True
    if -returncode in (_SIGSEGV, _SIGABRT):
        return f"signal {-returncode} after a failed allocation is likely", False
    return None


def oom_message(limit_bytes: int, mechanism: str, outcome: str, detail: str = "",
                certain: bool = True) -> str:
    """The status message of a run that ran out of memory, e.g.
    "out of memory: exceeded 64 MiB limit (cgroup memory.max); killed by signal 9
    (SIGKILL)"."""
    size = f"{limit_bytes / MIB:g} MiB"
    why = f"{mechanism}; {detail}" if detail else mechanism
    if certain:
        return f"out of memory: exceeded {size} limit ({why}); {outcome}"
    return f"possibly out of memory: {size} limit ({why}); {outcome}"
