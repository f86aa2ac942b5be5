"""Suite-wide settings.

The read-model scenarios date their events near the epoch (t = 1 000 ms, ...), so the
history tables' TTL (PELOTON_HISTORY_TTL_DAYS, default 30 days: readmodel/retention.py)
would drop their rows as they are inserted. The suite keeps history forever unless a test
sets the TTL itself (tests/readmodel/test_readmodel_retention.py does); clusters the suite
starts inherit the setting.

A test that invokes a `peloton serve` command in-process runs its callback, which makes
uvloop the event loop policy (peloton.bus.eventloop); every test leaves the policy as it
found it, so the tests after it run on the loop they would alone.

The suite runs on every core (`task test`: pytest-xdist, `--dist loadfile`, so a module's
fixtures, a minicluster say, start once). Workers take modules in collection order, so the
long ones go first (a module of minicluster tests, then one of real-server tests, then the
rest, each group in its usual order): the short modules at the end fill the gaps instead
of one worker finishing a minicluster module alone while the other idles.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("PELOTON_HISTORY_TTL_DAYS", "0")


#: collection order: modules with any of these marks first (lower rank first)
RANKS = ("e2e", "integration")


def module_rank(item: pytest.Item) -> int:
    """0 for a module marked e2e, 1 for one marked integration, 2 for the rest."""
    module = item.getparent(pytest.Module)
    marks = {m.name for m in (module.iter_markers() if module else ())}
    return next((rank for rank, name in enumerate(RANKS) if name in marks), len(RANKS))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long modules first (module docstring); a stable sort keeps each module's tests
    together and in order."""
    items.sort(key=module_rank)


@pytest.fixture(autouse=True)
def _event_loop_policy_kept() -> Iterator[None]:
    before = asyncio.get_event_loop_policy()
    yield
    asyncio.set_event_loop_policy(before)
