"""Readiness: a service says when it has joined its consumer group and consumes.

Where PELOTON_READY_FILE is set (the minicluster sets it per process), the file is written
once partitions are assigned and, for a shell, once its own start-up is done (its producer
started); the minicluster waits for these files before it reports up. The same moment
passes a service's "consuming" readiness check (/readyz). Faust completes the first
rebalance before it starts its fetcher and the shell's services: a shell that said ready
then could still fail to start (its broker gone meanwhile) or not yet publish.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faust

__all__ = ["announce_ready"]

log = logging.getLogger(__name__)


def announce_ready(app: faust.App, name: str,
                   on_ready: Callable[[], None] | None = None,
                   after_start: bool = False) -> Callable[[], None]:
    """On every completed rebalance: log, call `on_ready` (the health server's "consuming"
    check, see peloton.bus.health), write PELOTON_READY_FILE if set. With `after_start`,
    not before the returned `started` was called (at the end of the service's start-up);
    if the rebalance completed first, `started` announces it."""
    state = {"started": not after_start, "assigned": False}

    def announce() -> None:
        log.info("%s: partitions assigned, consuming", name)
        if on_ready is not None:
            on_ready()
        marker = os.environ.get("PELOTON_READY_FILE")
        if marker:
            Path(marker).parent.mkdir(parents=True, exist_ok=True)
            Path(marker).write_text(str(os.getpid()))

    @app.on_rebalance_complete.connect  # type: ignore[arg-type]
    async def _ready(sender: Any, **kwargs: Any) -> None:
        state["assigned"] = True
        if state["started"]:
            announce()

    def started() -> None:
        if not state["started"]:
            state["started"] = True
            if state["assigned"]:
                announce()

    return started
