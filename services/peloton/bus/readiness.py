"""Readiness: a service says when it has joined its consumer group and consumes.

Where PELOTON_READY_FILE is set (the minicluster sets it per process), the file is written
once partitions are assigned; the minicluster waits for these files before it reports up.
The same moment passes a service's "consuming" readiness check (/readyz).
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
                   on_ready: Callable[[], None] | None = None) -> None:
    """On every completed rebalance: log, call `on_ready` (the health server's "consuming"
    check, see peloton.bus.health), write PELOTON_READY_FILE if set."""
    @app.on_rebalance_complete.connect  # type: ignore[arg-type]
    async def _ready(sender: Any, **kwargs: Any) -> None:
        log.info("%s: partitions assigned, consuming", name)
        if on_ready is not None:
            on_ready()
        marker = os.environ.get("PELOTON_READY_FILE")
        if marker:
            Path(marker).parent.mkdir(parents=True, exist_ok=True)
            Path(marker).write_text(str(os.getpid()))
