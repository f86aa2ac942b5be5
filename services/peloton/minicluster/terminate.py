"""SIGTERM ends a benchmark the way Ctrl-C does: by an exception, so its clusters go down.

A benchmark starts a minicluster (broker, etcd, the services, simulated agents) and takes
it down in a `finally` (`burst.fleet_cluster`, `bench.py`, `restartbench.py`). Python's
default SIGTERM action ends the process at once, skipping every `finally`: a `timeout`,
CI or a supervisor that stopped `peloton bench scale` left the whole cluster running
(and its ports taken). `exit_on_sigterm()` makes SIGTERM raise `SystemExit(143)` (128 +
15, the status a shell reports for it) in the main thread instead; asyncio re-raises it
out of `asyncio.run`, the `finally` blocks run, and the process exits with 143.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

__all__ = ["SIGTERM_STATUS", "exit_on_sigterm"]

SIGTERM_STATUS = 128 + signal.SIGTERM


def _raise(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(SIGTERM_STATUS)


def exit_on_sigterm() -> bool:
    """Install the handler (module doc); False when not in the main thread (Python lets
    only the main thread set signal handlers; nothing changes then)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGTERM, _raise)
    return True
