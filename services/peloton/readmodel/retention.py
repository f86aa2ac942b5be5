"""How long the read model keeps history: the history tables and their TTL setting.

Contract:
- `HISTORY_TABLES` names every history table of schema.sql (one row per fact, keyed by
  the source position, with an `at` in ms since the epoch); latest-state tables are not in
  it and are kept whatever the setting (they hold one row per entity).
- `history_ttl_days(env)` reads PELOTON_HISTORY_TTL_DAYS: a whole number of days, default
  `DEFAULT_TTL_DAYS`; 0 keeps history forever. Anything else raises ValueError (a typo must
  not silently keep or drop data).
- `ttl_expression(days)` is the TTL the store gives each history table (None for 0):
  ClickHouse drops a row once its event time is older than `days` days, at insert time and
  on merges (OPTIMIZE ... FINAL forces one). `applied_ttl_days(engine_full)` reads back which
  of our TTLs a table has (0: none, None: a TTL this module did not write), so the store
  alters a table only when the setting changed (a changed TTL rewrites the table's parts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["HISTORY_TABLES", "DEFAULT_TTL_DAYS", "ENV", "history_ttl_days", "ttl_expression",
           "applied_ttl_days"]

HISTORY_TABLES: tuple[str, ...] = (
    "task_events", "host_events", "entitlement_history", "dead_letters", "preemptions",
    "host_offers", "task_waits", "job_events",
)
DEFAULT_TTL_DAYS = 30
ENV = "PELOTON_HISTORY_TTL_DAYS"
_MAX_DAYS = 36_500  # a century: beyond it, keep forever (0) says it better

_OURS = re.compile(r"\bTTL toDateTime\(intDiv\(at, 1000\)\) \+ toIntervalDay\((\d+)\)")


def history_ttl_days(env: Mapping[str, str]) -> int:
    """The history retention in days from the environment (0 = keep forever)."""
    raw = env.get(ENV, "").strip()
    if not raw:
        return DEFAULT_TTL_DAYS
    if not re.fullmatch(r"[0-9]{1,6}", raw) or int(raw) > _MAX_DAYS:
        raise ValueError(f"{ENV} must be a whole number of days from 0 (keep forever) to "
                         f"{_MAX_DAYS}, not {raw!r}")
    return int(raw)


def ttl_expression(days: int) -> str | None:
    """The TTL expression of a history table kept `days` days (None: kept forever)."""
    if not 0 <= days <= _MAX_DAYS:
        raise ValueError(f"history TTL {days} days out of range")
    return None if days == 0 else f"toDateTime(intDiv(at, 1000)) + toIntervalDay({days})"


def applied_ttl_days(engine_full: str) -> int | None:
    """The days of our TTL in a table's engine description; 0 when it has no TTL, None when
    it has a TTL this module did not write."""
    m = _OURS.search(engine_full)
    if m:
        return int(m.group(1))
    return None if re.search(r"\bTTL\b", engine_full) else 0
