"""Filtered, keyset-paginated lists of jobs and of a job's tasks, in SQL on the read model.

Contract:
- `jobs_page(store, JobFilter, after, limit)` -> (jobs, last sort key or None). Jobs are
  sorted newest first by `sort_at` (the submission time; the creation time for a job
  whose submission was never read), then by job id. The sort key never changes once a
  job is submitted, so keyset pages (`after` = the previous page's last key) are stable
  while jobs are inserted: a new job sorts before the first page, never inside a later
  one, and no row older than the first page is skipped or repeated.
- `tasks_page(store, job_id, TaskFilter, after, limit)` -> (tasks, last instance or None):
  the tasks (as Store.tasks_of_job, with their history) in instance order after `after`.
- Filters: job states (any of), owner, pool (exactly, or with its sub-pools), a label
  selector (peloton.api.listing.Requirement list, evaluated on the job's labels map:
  `!=` and `notin` match jobs without the key), submission time range [from, to) in
  epoch ms; task states (any of), instance ranges (inclusive), host.
- Every value reaches ClickHouse as a bound query parameter, never as SQL text.
A page is up to `limit` rows; the last key is returned only when more rows follow (one
more row is read to know), None otherwise.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from peloton.readmodel.store import (
    _HISTORY_SELECT,
    _JOB_SELECT,
    _TASK_SELECT,
    Store,
    _counted,
    _job,
    _strip,
    _task,
)

if TYPE_CHECKING:
    from peloton.api.listing import Requirement

__all__ = ["JobFilter", "TaskFilter", "jobs_page", "tasks_page", "selector_sql"]

_SORT_AT = "if(v_has_submitted > 0, v_submitted_at, v_created_at)"


@dataclass(frozen=True)
class JobFilter:
    states: tuple[str, ...] = ()
    owner: str | None = None
    pool: str | None = None
    subpools: bool = False
    selector: tuple[Requirement, ...] = ()
    submitted_from: int | None = None
    submitted_to: int | None = None


@dataclass(frozen=True)
class TaskFilter:
    states: tuple[str, ...] = ()
    instances: tuple[tuple[int, int], ...] = field(default_factory=tuple)
    host: str | None = None


def selector_sql(reqs: tuple[Requirement, ...] | list[Requirement], column: str,
                 params: dict[str, Any]) -> list[str]:
    """SQL conditions for a selector on the Map(String, String) `column` (a trusted
    identifier); keys and values go into `params` as bound parameters."""
    conds: list[str] = []
    for i, r in enumerate(reqs):
        k = f"sel_k{i}"
        params[k] = r.key
        has = f"mapContains({column}, {{{k}:String}})"
        if r.op in ("exists", "!exists"):
            conds.append(has if r.op == "exists" else f"NOT {has}")
            continue
        v = f"sel_v{i}"
        params[v] = list(r.values)
        match = f"({has} AND has({{{v}:Array(String)}}, {column}[{{{k}:String}}]))"
        conds.append(match if r.op in ("=", "in") else f"NOT {match}")
    return conds


def jobs_page(store: Store, flt: JobFilter, after: tuple[int, str] | None,
              limit: int) -> tuple[list[dict[str, Any]], tuple[int, str] | None]:
    params: dict[str, Any] = {"limit": max(0, limit) + 1}  # one more: is there a next?
    conds = ["countIf(facet IN ('spec', 'state')) > 0"]
    if flt.states:
        params["states"] = list(flt.states)
        conds.append("if(v_state = '', 'SUBMITTED', v_state) IN {states:Array(String)}")
    if flt.owner is not None:
        params["owner"] = flt.owner
        conds.append("v_owner = {owner:String}")
    if flt.pool is not None:
        params["pool"] = flt.pool
        if flt.subpools:
            params["pool_prefix"] = flt.pool.rstrip("/") + "/"
            conds.append("(v_respool = {pool:String} OR startsWith(v_respool, "
                         "{pool_prefix:String}))")
        else:
            conds.append("v_respool = {pool:String}")
    conds += selector_sql(flt.selector, "v_labels", params)
    if flt.submitted_from is not None:
        params["t_from"] = flt.submitted_from
        conds.append(f"{_SORT_AT} >= {{t_from:Int64}}")
    if flt.submitted_to is not None:
        params["t_to"] = flt.submitted_to
        conds.append(f"{_SORT_AT} < {{t_to:Int64}}")
    if after is not None:
        params["c_at"], params["c_id"] = after
        conds.append(f"({_SORT_AT} < {{c_at:Int64}} OR ({_SORT_AT} = {{c_at:Int64}} "
                     "AND job_id > {c_id:String}))")
    rows = store._query(
        _JOB_SELECT.replace("\nFROM ", f",\n    {_SORT_AT} AS v_sort_at\nFROM ", 1)
        + f""" GROUP BY job_id
        HAVING {' AND '.join(conds)}
        ORDER BY v_sort_at DESC, job_id
        LIMIT {{limit:UInt32}}""", **params)
    more = len(rows) > limit
    rows = rows[:limit]
    jobs = [_job(r) for r in rows]
    counts = store._task_counts([j["job_id"] for j in jobs])
    out = [_counted(j, counts.get(j["job_id"], {})) for j in jobs]
    last = (int(rows[-1]["v_sort_at"]), str(rows[-1]["job_id"])) if more else None
    return out, last


def tasks_page(store: Store, job_id: str, flt: TaskFilter, after: int | None,
               limit: int) -> tuple[list[dict[str, Any]], int | None]:
    params: dict[str, Any] = {"job_id": job_id, "limit": max(0, limit) + 1}
    where: list[str] = []
    for i, (lo, hi) in enumerate(flt.instances):
        params[f"lo{i}"], params[f"hi{i}"] = lo, hi
        where.append(f"instance BETWEEN {{lo{i}:UInt32}} AND {{hi{i}:UInt32}}")
    instance_filter = f"AND ({' OR '.join(where)})" if where else ""
    if after is not None:
        params["after"] = after
        instance_filter += " AND instance > {after:Int64}"
    having: list[str] = []
    if flt.states:
        params["states"] = list(flt.states)
        having.append("v_state IN {states:Array(String)}")
    if flt.host is not None:
        params["host"] = flt.host
        having.append("v_host = {host:String}")
    extra = "".join(f" AND {h}" for h in having)
    sql = (_TASK_SELECT.replace("{instance_filter}", instance_filter)
           .replace("ORDER BY instance", f"{extra}\nORDER BY instance LIMIT {{limit:UInt32}}"))
    tasks = [_task(_strip(r)) for r in store._query(sql, **params)]
    more = len(tasks) > limit
    tasks = tasks[:limit]
    if tasks:
        params["chosen"] = [t["instance"] for t in tasks]
        history: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for h in store._query(_HISTORY_SELECT.replace(
                "{instance_filter}", "AND instance IN {chosen:Array(UInt32)}"), **params):
            history[h.pop("instance")].append(h)
        for t in tasks:
            t["history"] = history.get(t["instance"], [])
    last = int(tasks[-1]["instance"]) if more else None
    return tasks, last
