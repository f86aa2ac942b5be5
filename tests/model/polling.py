"""Polling for tests that wait on processes, files or an HTTP API (import as `from polling
import wait_for`; tests/model is on pytest's pythonpath)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

__all__ = ["wait_for"]


def wait_for(check: Callable[[], Any], timeout: float = 60.0, interval: float = 0.3,
             what: str = "condition") -> Any:
    """Poll check() until it returns something truthy; fail with the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")
