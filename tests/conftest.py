"""Suite-wide settings.

The read-model scenarios date their events near the epoch (t = 1 000 ms, ...), so the
history tables' TTL (PELOTON_HISTORY_TTL_DAYS, default 30 days: readmodel/retention.py)
would drop their rows as they are inserted. The suite keeps history forever unless a test
sets the TTL itself (tests/readmodel/test_readmodel_retention.py does); clusters the suite
starts inherit the setting.
"""

from __future__ import annotations

import os

os.environ.setdefault("PELOTON_HISTORY_TTL_DAYS", "0")
