"""Garbage collection for a long-lived service holding a large, mostly acyclic state.

CPython's cyclic collector walks every tracked object in a full (generation 2) collection,
with the event loop stopped. A core holding tens of thousands of jobs and tasks is
millions of objects: a full collection then took 0.3-0.5 s (measured on the job and host
managers' snapshots of 27,000 tasks; it lands in whatever allocates at the time), and
under a steady load one came every few seconds, so the p99 of submit -> RUNNING was
made of these pauses (`bench scale`'s paced waves after a large burst).

Policy (`install`): as the worker starts (after the core's rebuild: a quiet moment), then
every `FREEZE_S`, a collection of what is not frozen runs (young objects and what survived
since the last freeze: cheap), then the survivors are frozen (`gc.freeze`): later
collections skip them. Garbage is still freed by reference counting
at once; only cycles that die after being frozen wait: every `THAW_S` everything is
thawed and collected in full once (one pause of that size per `THAW_S`, not per few
seconds). The youngest generation is collected every `GEN0_THRESHOLD` allocations instead
of CPython's 700 (`PELOTON_GC_THRESHOLD0` sets another): a service allocates thousands of
short-lived objects per batch, and collecting them every 700 cost about 5% of a burst's
throughput (`bench scale`'s 10,000-task wave at 10,000 hosts, three runs each side by
side: 2,037-2,091 tasks/s at 700, 2,125-2,255 at 20,000); a young collection of 20,000
objects is a pause of a millisecond or two. `PELOTON_GC_FREEZE=0` turns the policy off
(CPython's defaults throughout).

Outside Faust (`configure`, then `keep` as a task): the agents' shell, whose simulated
fleets hold thousands of hosts and their runs, and the benchmarks' client, whose follower
holds every task's history of a wave. Without it they spent a fifth of their CPU in
collections (`bench scale`, counted with `gc.callbacks`: each fleet process 2.8 of 13 CPU s,
the client 4.8 of 25, most of it full collections), against 4% in the services.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from typing import Any

from peloton.bus.envint import env_int

__all__ = ["install", "configure", "keep", "GcPolicy", "FREEZE_S", "THAW_S",
           "GEN0_THRESHOLD"]

log = logging.getLogger(__name__)

FREEZE_S = 5.0
THAW_S = 600.0
GEN0_THRESHOLD = 20_000


class GcPolicy:
    """The freeze/thaw schedule (module doc); `step` is called every `FREEZE_S`."""

    def __init__(self, thaw_s: float = THAW_S, clock: Any = time.monotonic) -> None:
        self.thaw_s = thaw_s
        self.clock = clock
        self.thawed_at = clock()
        self.full_collections = 0

    def step(self) -> None:
        now = self.clock()
        if now - self.thawed_at >= self.thaw_s:
            gc.unfreeze()
            started = time.perf_counter()
            gc.collect()
            self.full_collections += 1
            self.thawed_at = now
            log.info("full garbage collection: %.3f s", time.perf_counter() - started)
        else:
            gc.collect()
        gc.freeze()


def configure(environ: Any = os.environ) -> GcPolicy | None:
    """The young generation's threshold set and the policy to step (None: turned off,
    nothing changed)."""
    if environ.get("PELOTON_GC_FREEZE", "1") == "0":
        return None
    threshold = _gen0(environ)
    gc.set_threshold(threshold, *gc.get_threshold()[1:])
    return GcPolicy()


def install(app: Any, environ: Any = os.environ) -> GcPolicy | None:
    """Run the policy on `app`'s timer (a Faust app); None when turned off."""
    policy = configure(environ)
    if policy is None:
        return None
    step = _as_coroutine(policy)
    app.task(step)  # once as the worker starts (after the rebuild): a quiet moment
    app.timer(FREEZE_S, name="gc-freeze")(step)
    return policy


async def keep(policy: GcPolicy, interval_s: float = FREEZE_S, *, now: bool = True) -> None:
    """Outside Faust, as a task: a step now (`now`; else after the first interval), then
    one every `interval_s`, until cancelled."""
    if not now:
        await asyncio.sleep(interval_s)
    while True:
        policy.step()
        await asyncio.sleep(interval_s)


def _gen0(environ: Any) -> int:
    """PELOTON_GC_THRESHOLD0 (default `GEN0_THRESHOLD`): a positive integer (0 would turn
    automatic collection off altogether); anything else is refused by name."""
    value = env_int(environ, "PELOTON_GC_THRESHOLD0", GEN0_THRESHOLD, 1)
    assert value is not None  # the default is an integer
    return value


def _as_coroutine(policy: GcPolicy) -> Any:
    async def gc_freeze() -> None:
        policy.step()
    return gc_freeze
