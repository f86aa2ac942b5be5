"""How a paced wave's latency and CPU moved while it ran: its first quarter against its last.

A paced wave offers the same load from its first second to its last, so a cluster that
keeps up shows the same submit -> RUNNING in its last quarter as in its first. Where the
latency climbs instead, something grew while the load did not: on the dev broker that is
the broker itself (0.4 core at the start of the goal's wave, 0.6-0.7 at its end, with two
instances of each: docs/performance.md, "A paced wave's drift"; each of its fetches that
returns records lists every batch the partition holds: "The dev broker's climb, found"),
and on a machine already full it takes the services' share.

`quarters` splits the wave's tasks by when their job was submitted (first and last
quarter of the submissions' span) and gives each quarter's p50/p99 submit -> RUNNING;
`CpuTimeline` samples the processes' CPU while the wave runs and `cores_between` gives
the cores busy per service over a span; `drift` puts both quarters side by side. Pure but
for `CpuTimeline` (a thread reading /proc through the sampler it is given).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from peloton.minicluster.load import percentile

__all__ = ["quarters", "cores_between", "drift", "CpuTimeline", "Sample"]

#: (wall time s, {process: CPU seconds so far})
Sample = tuple[float, dict[str, float]]


def _windows(tasks: Sequence[tuple[int, int]]) -> dict[str, tuple[float, float]] | None:
    """The first and the last quarter (ms) of the span from the first submission to the
    last (None: no task, or no span); a task is in "first" when submitted before its end,
    in "last" from its start on."""
    if not tasks:
        return None
    t0 = min(t for t, _ in tasks)
    t1 = max(t for t, _ in tasks)
    if t1 <= t0:
        return None
    q = (t1 - t0) / 4
    return {"first": (t0, t0 + q), "last": (t1 - q, t1)}


def quarters(tasks: Sequence[tuple[int, int]]) -> dict[str, tuple[int, int, int] | None]:
    """`tasks`: (submitted_at ms, ms to RUNNING) per task. {"first": (p50, p99, tasks),
    "last": ...} of the tasks submitted in the first and the last quarter of the span from
    the first submission to the last (None: no task there, or no span)."""
    windows = _windows(tasks)
    if windows is None:
        return {"first": None, "last": None}
    (_, first_end), (last_start, _) = windows["first"], windows["last"]

    def figures(ms: list[int]) -> tuple[int, int, int] | None:
        if not ms:
            return None
        return (round(percentile(ms, 50) or 0), round(percentile(ms, 99) or 0), len(ms))

    return {"first": figures([ms for t, ms in tasks if t < first_end]),
            "last": figures([ms for t, ms in tasks if t >= last_start])}


def cores_between(samples: Sequence[Sample], start: float, end: float,
                  spent: Callable[[dict[str, float], dict[str, float]], dict[str, float]],
                  ) -> dict[str, float]:
    """Cores busy per service and in all, from the last sample at or before `start` to the
    first at or after `end` ({} when the samples do not cover the span). `spent(a, b)`:
    the CPU seconds per service between two samples (the bench's `cpu_per_thousand` of
    1,000 tasks, `total` included)."""
    before = [s for s in samples if s[0] <= start]
    after = [s for s in samples if s[0] >= end]
    if not before or not after or after[0][0] <= before[-1][0]:
        return {}
    (ta, a), (tb, b) = before[-1], after[0]
    return {svc: round(cpu / (tb - ta), 2) for svc, cpu in spent(a, b).items()}


def drift(tasks: Sequence[tuple[int, int]], samples: Sequence[Sample],
          spent: Callable[[dict[str, float], dict[str, float]], dict[str, float]],
          ) -> dict[str, Any]:
    """The wave's first quarter against its last (module doc): p50/p99 submit -> RUNNING
    and cores busy (the broker's and the machine's) while each quarter's jobs were
    submitted."""
    if not tasks:
        return {}
    q, windows = quarters(tasks), _windows(tasks)
    out: dict[str, Any] = {}
    for name in ("first", "last"):
        figs = q[name]
        cores = ({} if windows is None else
                 cores_between(samples, windows[name][0] / 1000, windows[name][1] / 1000, spent))
        out[f"{name} quarter"] = {
            "p50_ms": figs[0] if figs else None, "p99_ms": figs[1] if figs else None,
            "tasks": figs[2] if figs else 0,
            "broker_cores": cores.get("broker"), "machine_cores": cores.get("total")}
    return out


class CpuTimeline:
    """Samples `sample()` (CPU seconds so far per process) every `interval_s` in a thread
    while used as a context manager; `samples` holds (wall time, sample) in order, one
    taken on entry and one on exit."""

    def __init__(self, sample: Callable[[], dict[str, float]], interval_s: float = 0.5,
                 clock: Callable[[], float] = time.time) -> None:
        self.sample, self.interval_s, self.clock = sample, interval_s, clock
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _take(self) -> None:
        self.samples.append((self.clock(), self.sample()))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def __enter__(self) -> CpuTimeline:
        self._take()
        self._thread = threading.Thread(target=self._run, name="cpu-timeline", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._take()
