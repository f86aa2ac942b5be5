"""The event loop the long-running processes run on: uvloop's (libuv), where installed.

Every service, agent (and simulated agent fleet) and the API spend about a tenth of their
busy time (py-spy, a 10,000-task burst) in the event loop's own machinery: socket reads
and writes to the broker, callbacks, timers, the hand-over between Faust's consumer thread
and the service's loop. uvloop does that work in C. Measured side by side (`peloton bench
burst --jobs 2200 --hosts 1000`, 10,000 small-job tasks at once, 2-core machine, six
alternating pairs): 3% more tasks/s on average, less than the machine's own spread (each
pair -5% to +12%); an idle 10,000-host cluster's services and simulated agents about 10%
less CPU (docs/performance.md, "The event loop").

`install()` makes every event loop created afterwards in the process (the service's, and
those of the threads Faust and mode start) a uvloop loop, by setting the event loop
policy. The process entry points call it before they make a loop or a Faust app (a Faust
app keeps the loop it was made with): `peloton serve ...` (every service process),
`AgentShell.run` (agents, simulated fleets) and `run_api`; each process logs the loop it
runs on and its interpreter ("<who>: running on the uvloop event loop, CPython 3.11.2
(...)"); never an import: a library user's loop is left alone. `PELOTON_UVLOOP=0` keeps
asyncio's own loop (the same behaviour, slower), and so does a platform without uvloop
(it does not build on Windows). The snapshot child (`snapshotfork`) never touches the loop
it was forked with, which is what uvloop asks of a forked process.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from peloton.interpreter import interpreter

__all__ = ["ENV", "announce", "install", "loop_name", "running_on"]

log = logging.getLogger(__name__)

ENV = "PELOTON_UVLOOP"


def install() -> str:
    """Make the event loops created from now on uvloop's, unless `PELOTON_UVLOOP=0` or
    uvloop is not installed; returns the name of the loop new loops will be
    ("uvloop" or "asyncio")."""
    if os.environ.get(ENV, "1").strip() == "0":
        return "asyncio"
    try:
        import uvloop
    except ImportError:
        log.info("uvloop is not installed: running on asyncio's own event loop")
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


def announce(app: Any, who: str) -> None:
    """Have Faust app `app` log, once its worker runs, which loop it runs on, and on which
    Python (`peloton.interpreter`)."""

    async def event_loop_said() -> None:
        log.info("%s", running_on(who, asyncio.get_running_loop()))

    app.task(event_loop_said)


def running_on(who: str, loop: asyncio.AbstractEventLoop) -> str:
    """The start line of process `who`: its loop and its interpreter."""
    return f"{who}: running on the {loop_name(loop)} event loop, {interpreter()}"


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """"uvloop" for a uvloop loop, else "asyncio" (for log lines and tests)."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
