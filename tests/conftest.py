"""Suite-wide settings.

The read-model scenarios date their events near the epoch (t = 1 000 ms, ...), so the
history tables' TTL (PELOTON_HISTORY_TTL_DAYS, default 30 days: readmodel/retention.py)
would drop their rows as they are inserted. The suite keeps history forever unless a test
sets the TTL itself (tests/readmodel/test_readmodel_retention.py does); clusters the suite
starts inherit the setting.

A test that invokes a `peloton serve` command in-process runs its callback, which makes
uvloop the event loop policy (peloton.bus.eventloop); every test leaves the policy as it
found it, so the tests after it run on the loop they would alone.

The suite runs on every core, at most 4 (`task test`: pytest-xdist, `--dist loadfile`, so a module's
fixtures, a minicluster say, start once; xdist hands out the modules with the most tests
first). Putting the minicluster modules first instead was slower (13 min 30 s against
12 min 31-42 s on a 2-core machine): two clusters at once leave no core to the unit tests.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("PELOTON_HISTORY_TTL_DAYS", "0")


@pytest.fixture(autouse=True)
def _event_loop_policy_kept() -> Iterator[None]:
    before = asyncio.get_event_loop_policy()
    yield
    asyncio.set_event_loop_policy(before)
