"""History and time travel over the read model: state as of a past instant, pool series.

Contract:
- `parse_instant(text, now_ms)`: ms since the epoch (digits), ISO 8601 (a time without
  an offset is UTC), `now`, or relative to now: `-90s`, `-15m`, `-1h`, `-2d`, `-1w`
  (also `+`). Anything else raises ValueError with a message naming the accepted forms.
- `plan_series(frm, to, step, cycles)`: the series' step (ms) and how it was chosen. At
  most `MAX_POINTS` points are answered: with no `step`, the raw cycles when there are at
  most MAX_POINTS of them, else the smallest whole second that keeps the buckets within
  MAX_POINTS; a given `step` that would make more buckets is a ValueError.
- `History(query)` reads with the store's query function (`Store._query`: SQL with `{db}`
  and ClickHouse parameters -> list of dicts). Every answer is computed only from facts
  whose event time `at` is at or before the instant asked, ordered the way the
  latest-state tables order them (see schema.sql), so the state at t equals what the live
  queries answered when the store held only the facts up to t:
  - `job_at(job_id, at)`: the job's state, previous state, rejection reasons and task
    counts from `job_events` and `task_events`; its spec (name, owner, pool, config) is
    the newest one (a spec change is not kept as history); a kill request shows only if
    made by then. None when the job has no fact at all; `first_seen(job_id)` says when
    the earliest fact was (so a caller can tell "did not exist yet" from "unknown").
  - `tasks_at(job_id, at)`: each task's newest transition by then (state, run, host,
    reason of the transition, exit code, failures) with its history up to then; sandbox
    and health are not history and are None.
  - `pools_at(at)`: the pools of the newest entitlement cycle published by then
    (`entitlement_history`), with the cycle's reservation and limit; `config` is None.
  - `hosts_at(at)`: each host registered by then: state REGISTERED/UP/LOST from its
    registration, loss and heartbeat facts by then (a heartbeat only the newest of which
    is kept: an offer by then after the registration counts as one), its maintenance
    state from `host_events` (UP before any), and capacity/free/availability from its
    newest offer by then (`host_offers`).
  - `cluster_at(at)`: job counts by state, task counts by state, the pools' entitlement,
    allocation and demand, and the hosts' states, all as of `at`.
  - `pool_series(pool, frm, to, step)`: one point per entitlement cycle of the pool in
    [frm, to] (or, with a step, the last cycle of each step-long bucket counted from
    `frm`): at, cycle, entitlement, allocation, demand, reservation, limit per resource.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["History", "parse_instant", "plan_series", "MAX_POINTS", "INSTANT_FORMS"]

Query = Callable[..., list[dict[str, Any]]]

MAX_POINTS = 500
INSTANT_FORMS = ("ms since the epoch (e.g. 1700000000000), ISO 8601 "
                 "(e.g. 2026-11-23T10:00:00Z), now, or relative to now (e.g. -90s, -15m, "
                 "-1h, -2d, -1w)")
_RELATIVE = re.compile(r"^([+-])(\d{1,9})(ms|s|m|h|d|w)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000,
            "w": 7 * 86_400_000}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def parse_instant(text: str, now_ms: int) -> int:
    """An instant in ms since the epoch (see the module docstring)."""
    raw = text.strip()
    if not raw:
        raise ValueError(f"empty time: give {INSTANT_FORMS}")
    if raw.isdigit():
        value = int(raw)
        if value > _MAX_MS:
            raise ValueError(f"{raw[:40]} is beyond year 9999 (ms since the epoch?)")
        return value
    if raw.lower() == "now":
        return now_ms
    m = _RELATIVE.match(raw.lower())
    if m:
        delta = int(m.group(2)) * _UNIT_MS[m.group(3)]
        value = now_ms - delta if m.group(1) == "-" else now_ms + delta
        if not 0 <= value <= _MAX_MS:
            raise ValueError(f"{raw} is out of range")
        return value
    try:
        parsed = datetime.fromisoformat(raw.replace("z", "Z"))
    except ValueError:
        raise ValueError(f"not a time: {raw[:40]!r}; give {INSTANT_FORMS}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    value = (parsed - _EPOCH) // timedelta(milliseconds=1)
    if value < 0:
        raise ValueError(f"{raw[:40]} is before 1970")
    return value


def plan_series(frm: int, to: int, step: int | None, cycles: int) -> tuple[int | None, str]:
    """(step in ms or None for raw cycles, how the series was sampled)."""
    if to < frm:
        raise ValueError("`from` is after `to`")
    span = to - frm + 1
    if step is not None:
        if step < 1:
            raise ValueError("step must be at least 1 ms")
        if -(-span // step) > MAX_POINTS:
            raise ValueError(f"step {step} ms makes more than {MAX_POINTS} points over "
                             f"{span} ms: use a step of at least {-(-span // MAX_POINTS)} ms")
        return step, f"last cycle in each {step} ms step from `from`"
    if cycles <= MAX_POINTS:
        return None, "every cycle"
    chosen = -(-span // MAX_POINTS)
    chosen = -(-chosen // 1000) * 1000  # a whole second
    return chosen, (f"{cycles} cycles > {MAX_POINTS} points: last cycle in each "
                    f"{chosen} ms step from `from`")


# ---- SQL -------------------------------------------------------------------------------
_JOB_STATE_AT = """
SELECT argMax(tuple(state, previous_state, task_counts, reasons, at),
              tuple(tier, src_offset, src_index)) AS fact,
       count() AS facts, min(at) AS first_at
FROM {db}.job_events FINAL
WHERE job_id = {job_id:String} AND at <= {at:Int64}
"""

_JOB_FIRST = """
SELECT min(at) AS first_at, count() AS facts FROM {db}.job_events FINAL
WHERE job_id = {job_id:String}
"""

_JOB_FACETS = """
SELECT facet, at, name, owner, description, type, respool, instance_count, priority,
    preemptible, labels, config_json, kill_instances, reasons
FROM {db}.jobs FINAL WHERE job_id = {job_id:String}
"""

_TASKS_AT = """
SELECT instance,
    argMax(tuple(run, state, previous_state, host, reason, exit_code, failures, at,
                 config_version), tuple(run, src_offset, src_index)) AS t
FROM {db}.task_events FINAL
WHERE job_id = {job_id:String} AND at <= {at:Int64}
GROUP BY instance ORDER BY instance
"""

_TASK_EVENTS_AT = """
SELECT instance, run, state, previous_state, reason, host, exit_code, failures, at,
    config_version
FROM {db}.task_events FINAL
WHERE job_id = {job_id:String} AND at <= {at:Int64}
ORDER BY instance, run, src_offset, src_index
"""

_JOB_STATES_AT = """
SELECT job_id,
    argMax(state, tuple(tier, src_offset, src_index)) AS state
FROM {db}.job_events FINAL WHERE at <= {at:Int64}
GROUP BY job_id
"""

_TASK_STATES_AT = """
SELECT state, count() AS n FROM (
    SELECT job_id, instance,
        argMax(state, tuple(run, src_offset, src_index)) AS state
    FROM {db}.task_events FINAL WHERE at <= {at:Int64}
    GROUP BY job_id, instance)
GROUP BY state ORDER BY state
"""

_POOL_COLUMNS = ("pool", "parent", "cycle", "at", "capacity", "reservation", "limit",
                 "entitlement", "slack_entitlement", "nonslack_entitlement", "allocation",
                 "demand")

_POOLS_AT = """
SELECT {cols} FROM {db}.entitlement_history FINAL
WHERE (src_topic, src_partition, src_offset) = (
    SELECT argMax((src_topic, src_partition, src_offset), (at, src_offset))
    FROM {db}.entitlement_history FINAL WHERE at <= {at:Int64})
ORDER BY pool
"""

_SERIES_COUNT = """
SELECT count() AS n FROM {db}.entitlement_history FINAL
WHERE pool = {pool:String} AND at BETWEEN {frm:Int64} AND {to:Int64}
"""

_SERIES_RAW = """
SELECT at, cycle, entitlement, allocation, demand, reservation, limit
FROM {db}.entitlement_history FINAL
WHERE pool = {pool:String} AND at BETWEEN {frm:Int64} AND {to:Int64}
ORDER BY at, src_offset, src_index
"""

_SERIES_STEPPED = """
SELECT intDiv(at - {frm:Int64}, {step:Int64}) AS bucket,
    argMax(tuple(at, cycle, entitlement, allocation, demand, reservation, limit),
           tuple(at, src_offset, src_index)) AS p,
    count() AS cycles
FROM {db}.entitlement_history FINAL
WHERE pool = {pool:String} AND at BETWEEN {frm:Int64} AND {to:Int64}
GROUP BY bucket ORDER BY bucket
"""

_HOSTS_AT = """
SELECT host,
    countIf(facet = 'registration' AND at <= {at:Int64}) AS has_reg,
    anyIf(at, facet = 'registration') AS reg_at,
    anyIf(incarnation, facet = 'registration') AS reg_incarnation,
    anyIf(capacity, facet = 'registration') AS reg_capacity,
    anyIf(labels, facet = 'registration') AS reg_labels,
    countIf(facet = 'heartbeat') AS any_hb,
    anyIf(at, facet = 'heartbeat') AS hb_at,
    countIf(facet = 'lost' AND at <= {at:Int64}) AS has_lost,
    anyIf(at, facet = 'lost') AS lost_at,
    anyIf(incarnation, facet = 'lost') AS lost_incarnation
FROM {db}.hosts FINAL
GROUP BY host ORDER BY host
"""

_OFFERS_AT = """
SELECT host, argMax(tuple(at, capacity, free, available), tuple(at, src_offset, src_index))
    AS o
FROM {db}.host_offers FINAL WHERE at <= {at:Int64}
GROUP BY host
"""

_MAINTENANCE_AT = """
SELECT host, argMax(tuple(state, reason, deadline, at), tuple(at, src_offset)) AS m
FROM {db}.host_events FINAL WHERE kind = 'STATE_CHANGED' AND at <= {at:Int64}
GROUP BY host
"""


class History:
    """State as of a past instant, over the store's query function (module docstring)."""

    def __init__(self, query: Query) -> None:
        self._q = query

    # ---- jobs -----------------------------------------------------------------------
    def first_seen(self, job_id: str) -> int | None:
        row = self._q(_JOB_FIRST, job_id=job_id)[0]
        return int(row["first_at"]) if row["facts"] else None

    def job_at(self, job_id: str, at: int) -> dict[str, Any] | None:
        row = self._q(_JOB_STATE_AT, job_id=job_id, at=at)[0]
        if not row["facts"]:
            return None
        state, previous, _reported, reasons, state_at = row["fact"]
        facets = {f["facet"]: f for f in self._q(_JOB_FACETS, job_id=job_id)}
        spec = facets.get("spec", {})
        submitted, created, kill = (facets.get(k) for k in ("submitted", "created", "kill"))
        counts = self.task_counts_at(job_id, at)
        seen = [state_at] + [f["at"] for f in (submitted, created, spec, kill)
                             if f is not None and f["at"] <= at]
        kill_request = None
        if kill is not None and kill["at"] <= at:
            kill_request = {"at": kill["at"], "instances": list(kill["kill_instances"]),
                            "reason": kill["reasons"][0] if kill["reasons"] else ""}
        job = {
            "job_id": job_id, "name": spec.get("name", ""), "owner": spec.get("owner", ""),
            "type": spec.get("type", ""), "respool": spec.get("respool", ""),
            "instance_count": spec.get("instance_count", 0),
            "priority": spec.get("priority", 0),
            "preemptible": bool(spec.get("preemptible", False)),
            "labels": dict(spec.get("labels", {})),
            "description": submitted["description"] if submitted else "",
            "state": state or "SUBMITTED", "previous_state": previous or None,
            "submitted_at": submitted["at"] if submitted and submitted["at"] <= at else None,
            "created_at": created["at"] if created and created["at"] <= at else None,
            "updated_at": max(seen), "rejection_reasons": list(reasons),
            "kill_request": kill_request,
            "config": json.loads(spec["config_json"]) if spec.get("config_json") else {},
            "task_counts": counts, "as_of": at,
        }
        if job["type"] == "DAEMON":
            job["instance_count"] = sum(counts.values())
        return job

    def task_counts_at(self, job_id: str, at: int) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for r in self._q(_TASKS_AT, job_id=job_id, at=at):
            out[r["t"][1]] += 1
        return dict(sorted(out.items()))

    def tasks_at(self, job_id: str, at: int) -> list[dict[str, Any]]:
        history: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for h in self._q(_TASK_EVENTS_AT, job_id=job_id, at=at):
            history[h.pop("instance")].append(h)
        tasks = []
        for r in self._q(_TASKS_AT, job_id=job_id, at=at):
            run, state, previous, host, reason, exit_code, failures, t_at, cfg = r["t"]
            tasks.append({
                "instance": r["instance"], "run": run, "state": state,
                "previous_state": previous, "host": host, "reason": reason,
                "exit_code": exit_code, "failures": failures, "updated_at": t_at,
                "config_version": cfg, "sandbox": None, "health": None,
                "history": history.get(r["instance"], [])})
        return tasks

    # ---- pools ----------------------------------------------------------------------
    def pools_at(self, at: int) -> list[dict[str, Any]]:
        cols = ", ".join(f"`{c}`" for c in _POOL_COLUMNS)
        rows = self._q(_POOLS_AT.replace("{cols}", cols), at=at)
        for r in rows:
            r["share"], r["config"] = {}, None
        return rows

    def pool_series(self, pool: str, frm: int, to: int,
                    step: int | None = None) -> dict[str, Any]:
        cycles = int(self._q(_SERIES_COUNT, pool=pool, frm=frm, to=to)[0]["n"])
        chosen, how = plan_series(frm, to, step, cycles)
        points: list[dict[str, Any]] = []
        if chosen is None:
            for r in self._q(_SERIES_RAW, pool=pool, frm=frm, to=to):
                points.append({**_point(r), "cycles": 1})
        else:
            for r in self._q(_SERIES_STEPPED, pool=pool, frm=frm, to=to, step=chosen):
                a, cycle, ent, alloc, demand, rsv, lim = r["p"]
                points.append({**_point({"at": a, "cycle": cycle, "entitlement": ent,
                                         "allocation": alloc, "demand": demand,
                                         "reservation": rsv, "limit": lim}),
                               "cycles": int(r["cycles"])})
        return {"pool": pool, "from": frm, "to": to, "step_ms": chosen, "sampling": how,
                "cycles": cycles, "max_points": MAX_POINTS, "points": points}

    # ---- hosts, cluster -------------------------------------------------------------
    def hosts_at(self, at: int) -> list[dict[str, Any]]:
        offers = {r["host"]: r["o"] for r in self._q(_OFFERS_AT, at=at)}
        maint = {r["host"]: r["m"] for r in self._q(_MAINTENANCE_AT, at=at)}
        out = []
        for h in self._q(_HOSTS_AT, at=at):
            offer = offers.get(h["host"])
            if not h["has_reg"] and offer is None:
                continue  # not known to the host manager yet
            facts: list[tuple[int, int, str]] = []
            if h["has_reg"]:
                facts.append((h["reg_at"], 0, "REGISTERED"))
            if h["any_hb"] and h["hb_at"] <= at:
                facts.append((h["hb_at"], 1, "UP"))
            elif offer is not None and (not h["has_reg"] or offer[0] > h["reg_at"]):
                facts.append((offer[0], 1, "UP"))
            stale = bool(h["has_reg"] and h["lost_incarnation"]
                         and h["lost_incarnation"] != h["reg_incarnation"])
            if h["has_lost"] and not stale:
                facts.append((h["lost_at"], 2, "LOST"))
            m = maint.get(h["host"])
            out.append({
                "host": h["host"], "state": max(facts)[2] if facts else "REGISTERED",
                "maintenance_state": m[0] if m else "UP",
                "maintenance_reason": m[1] if m else "",
                "capacity": dict(h["reg_capacity"] if h["has_reg"] else offer[1]),  # type: ignore[index]
                "free": dict(offer[2]) if offer is not None else None,
                "available": bool(offer[3]) if offer is not None else None,
                "labels": dict(h["reg_labels"]) if h["has_reg"] else {},
            })
        return out

    def cluster_at(self, at: int) -> dict[str, Any]:
        jobs: dict[str, int] = defaultdict(int)
        for r in self._q(_JOB_STATES_AT, at=at):
            jobs[r["state"] or "SUBMITTED"] += 1
        tasks = {r["state"]: int(r["n"]) for r in self._q(_TASK_STATES_AT, at=at)}
        pools = [{k: p[k] for k in ("pool", "parent", "cycle", "at", "entitlement",
                                    "allocation", "demand")} for p in self.pools_at(at)]
        hosts = self.hosts_at(at)
        by_state: dict[str, int] = defaultdict(int)
        for h in hosts:
            by_state[h["state"]] += 1
        return {"at": at, "jobs": dict(sorted(jobs.items())), "job_count": sum(jobs.values()),
                "tasks": tasks, "pools": pools, "hosts": hosts,
                "host_states": dict(sorted(by_state.items()))}


def _point(r: dict[str, Any]) -> dict[str, Any]:
    return {"at": r["at"], "cycle": r["cycle"],
            **{k: dict(r[k]) for k in ("entitlement", "allocation", "demand",
                                       "reservation", "limit")}}
