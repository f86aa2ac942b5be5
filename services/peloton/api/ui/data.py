"""Reads the web UI needs that the Store does not offer, over the read model's tables.

- `pool_history(store, pool, since_ms, until_ms, points)`: one pool's entitlement,
  allocation and demand per entitlement cycle (table entitlement_history), oldest first,
  thinned to at most `points` evenly spaced cycles (the newest is always kept).
- `preemptions(store, limit)`: preempted runs, newest first, with the preemptor (table
  preemptions) and the victim pool's deficit at that moment: allocation minus
  entitlement per resource kind (positive parts only) of the pool's latest entitlement
  cycle at or before the preemption (ASOF join on entitlement_history; {} when none).
- `filter_jobs(jobs, owner, pool, labels)`: the jobs page's filters (the Store filters
  on state only): owner exact, pool exact or a descendant ("/a" matches "/a/b"), every
  label selector key=value must match.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from peloton.readmodel.store import Store

__all__ = ["pool_history", "preemptions", "filter_jobs", "deficit", "thin"]


def _maps(row: dict[str, Any], *keys: str) -> dict[str, Any]:
    for k in keys:
        row[k] = {str(kind): float(v) for kind, v in (row.get(k) or {}).items()}
    return row


def thin(rows: list[dict[str, Any]], points: int) -> list[dict[str, Any]]:
    """At most `points` rows, evenly spaced, first and last kept (points >= 2)."""
    if len(rows) <= points:
        return rows
    step = (len(rows) - 1) / (points - 1)
    return [rows[round(i * step)] for i in range(points)]


def pool_history(store: Store, pool: str, since_ms: int, until_ms: int,
                 points: int = 300) -> list[dict[str, Any]]:
    rows = store._query(
        """SELECT at, cycle, entitlement, allocation, demand, reservation, limit
           FROM {db}.entitlement_history FINAL
           WHERE pool = {pool:String} AND at >= {since:Int64} AND at <= {until:Int64}
           ORDER BY at, cycle""", pool=pool, since=since_ms, until=until_ms)
    out = [_maps(r, "entitlement", "allocation", "demand", "reservation", "limit")
           for r in rows]
    return thin(out, max(2, points))


def deficit(allocation: Mapping[str, float],
            entitlement: Mapping[str, float]) -> dict[str, float]:
    """allocation - entitlement per kind, where positive (a pool over its share)."""
    out = {}
    for kind, used in allocation.items():
        over = float(used) - float(entitlement.get(kind, 0.0))
        if over > 1e-9:
            out[kind] = over
    return out


def preemptions(store: Store, limit: int = 200) -> list[dict[str, Any]]:
    rows = store._query(
        """SELECT p.job_id AS job_id, p.instance AS instance, p.run AS run, p.at AS at,
                  p.pool AS pool, p.reason AS reason, p.detail AS detail,
                  p.preemptor AS preemptor, e.at AS cycle_at,
                  e.entitlement AS entitlement, e.allocation AS allocation
           FROM (SELECT * FROM {db}.preemptions FINAL
                 ORDER BY at DESC, job_id, instance, run LIMIT {limit:UInt32}) AS p
           ASOF LEFT JOIN (SELECT pool, at, entitlement, allocation
                           FROM {db}.entitlement_history FINAL) AS e
             ON p.pool = e.pool AND p.at >= e.at
           ORDER BY at DESC, job_id, instance, run""", limit=max(0, limit))
    for r in rows:
        _maps(r, "entitlement", "allocation")
        r["deficit"] = deficit(r["allocation"], r["entitlement"])
        if not r["entitlement"]:
            r["cycle_at"] = None
    return rows


def _in_pool(respool: str, pool: str) -> bool:
    pool = pool.rstrip("/") or "/"
    return pool == "/" or respool == pool or respool.startswith(pool + "/")


def filter_jobs(jobs: Iterable[dict[str, Any]], owner: str = "", pool: str = "",
                labels: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    labels = labels or {}
    return [j for j in jobs
            if (not owner or j.get("owner") == owner)
            and (not pool or _in_pool(str(j.get("respool", "")), pool))
            and all((j.get("labels") or {}).get(k) == v for k, v in labels.items())]
