"""The read model's ClickHouse store: tables, batched inserts and the API's queries.

`Store(dsn)` opens `chdb:///path` (in-process ClickHouse, the default) or
`http://host:8123` (a ClickHouse server) with the same code and SQL, creates the database
and tables if missing (schema.sql; idempotent), gives the history tables the TTL of
`history_ttl_days` (default: PELOTON_HISTORY_TTL_DAYS, see readmodel/retention.py; an
existing table is altered only when the setting changed) and serves:
- `insert(rows)`: projector rows, one INSERT per table per call;
- the queries behind the HTTP API (`get_job`, `list_jobs`, `tasks_of_job`, `task`,
  `hosts`, `pools`, `pool_configs`, `pool_request`, `preemptions`, `host_log_url`,
  `run_host`, `dead_letters`, `host_events`, `updates_of_job`, `update`). A host's
  maintenance (`maintenance_state` UP/DRAINING/DRAINED/DOWN, `maintenance_deadline`,
  `maintenance_reason`) comes from the host manager's HostStateChanged (UP when none was
  read yet); its `runs` are the runs whose latest state is on it (`ON_HOST`: a process
  may exist there).
Latest-state queries read with FINAL and combine an entity's facet rows (see schema.sql).
Query results are plain JSON-ready dicts (times are epoch milliseconds).

Sync and thread-safe (one lock around the client): asyncio callers use asyncio.to_thread.
Only one process may open a chdb directory, and one process only one chdb directory at a
time: call `close()` before opening another.
"""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import clickhouse_connect

from peloton.model.taskstate import ON_HOST
from peloton.readmodel.projector import COLUMNS, Row
from peloton.readmodel.retention import HISTORY_TABLES, applied_ttl_days, ttl_expression
from peloton.readmodel.retention import history_ttl_days as _ttl_from_env

__all__ = ["Store", "WAITING_STATES", "host_state", "shown_reason"]

_DB_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_SCHEMA = Path(__file__).with_name("schema.sql")
WAITING_STATES = frozenset({"PENDING", "READY", "PLACING"})

_JOB_SELECT = """
SELECT job_id,
    anyIf(name, facet = 'spec') AS v_name,
    anyIf(owner, facet = 'spec') AS v_owner,
    anyIf(type, facet = 'spec') AS v_type,
    anyIf(respool, facet = 'spec') AS v_respool,
    anyIf(instance_count, facet = 'spec') AS v_instance_count,
    anyIf(priority, facet = 'spec') AS v_priority,
    anyIf(preemptible, facet = 'spec') AS v_preemptible,
    anyIf(labels, facet = 'spec') AS v_labels,
    anyIf(config_json, facet = 'spec') AS v_config_json,
    anyIf(description, facet = 'submitted') AS v_description,
    anyIf(at, facet = 'submitted') AS v_submitted_at,
    countIf(facet = 'submitted') AS v_has_submitted,
    anyIf(at, facet = 'created') AS v_created_at,
    countIf(facet = 'created') AS v_has_created,
    anyIf(state, facet = 'state') AS v_state,
    anyIf(previous_state, facet = 'state') AS v_previous_state,
    anyIf(reasons, facet = 'state') AS v_reasons,
    anyIf(task_counts, facet = 'state') AS v_reported_counts,
    max(at) AS v_updated_at,
    countIf(facet = 'kill') AS v_has_kill,
    anyIf(at, facet = 'kill') AS v_kill_at,
    anyIf(kill_instances, facet = 'kill') AS v_kill_instances,
    anyIf(reasons, facet = 'kill') AS v_kill_reasons
FROM {db}.jobs FINAL
"""

_TASK_SELECT = """
SELECT instance,
    anyIf(run, facet = 'state') AS v_run,
    anyIf(state, facet = 'state') AS v_state,
    anyIf(previous_state, facet = 'state') AS v_previous_state,
    anyIf(host, facet = 'state') AS v_host,
    anyIf(reason, facet = 'state') AS v_reason,
    anyIf(exit_code, facet = 'state') AS v_exit_code,
    anyIf(failures, facet = 'state') AS v_failures,
    anyIf(at, facet = 'state') AS v_updated_at,
    anyIf(config_version, facet = 'state') AS v_config_version,
    countIf(facet = 'reason') AS v_has_pending,
    anyIf(reason, facet = 'reason') AS v_pending_reason,
    anyIf(run, facet = 'reason') AS v_pending_run,
    anyIf(at, facet = 'reason') AS v_pending_at,
    countIf(facet = 'status') AS v_has_status,
    anyIf(run, facet = 'status') AS v_status_run,
    anyIf(sandbox, facet = 'status') AS v_sandbox,
    countIf(facet = 'health') AS v_has_health,
    anyIf(run, facet = 'health') AS v_health_run,
    anyIf(state, facet = 'health') AS v_health
FROM {db}.tasks FINAL
WHERE job_id = {job_id:String} {instance_filter}
GROUP BY instance
HAVING countIf(facet = 'state') > 0
ORDER BY instance
"""

_HISTORY_SELECT = """
SELECT instance, run, state, previous_state, reason, host, exit_code, failures, at,
    config_version
FROM {db}.task_events FINAL
WHERE job_id = {job_id:String} {instance_filter}
ORDER BY instance, run, src_offset, src_index
"""

_HOST_SELECT = """
SELECT host,
    countIf(facet = 'registration') AS v_has_reg,
    anyIf(incarnation, facet = 'registration') AS v_reg_incarnation,
    anyIf(at, facet = 'registration') AS v_reg_at,
    anyIf(capacity, facet = 'registration') AS v_reg_capacity,
    anyIf(labels, facet = 'registration') AS v_reg_labels,
    anyIf(log_url, facet = 'registration') AS v_log_url,
    anyIf(port_range_begin, facet = 'registration') AS v_port_range_begin,
    anyIf(port_range_end, facet = 'registration') AS v_port_range_end,
    anyIf(simulated, facet = 'registration') AS v_simulated,
    countIf(facet = 'heartbeat') AS v_has_hb,
    anyIf(incarnation, facet = 'heartbeat') AS v_hb_incarnation,
    anyIf(at, facet = 'heartbeat') AS v_hb_at,
    anyIf(running, facet = 'heartbeat') AS v_running,
    countIf(facet = 'lost') AS v_has_lost,
    anyIf(incarnation, facet = 'lost') AS v_lost_incarnation,
    anyIf(at, facet = 'lost') AS v_lost_at,
    anyIf(reason, facet = 'lost') AS v_lost_reason,
    countIf(facet = 'offer') AS v_has_offer,
    anyIf(capacity, facet = 'offer') AS v_offer_capacity,
    anyIf(labels, facet = 'offer') AS v_offer_labels,
    anyIf(free, facet = 'offer') AS v_free,
    anyIf(available, facet = 'offer') AS v_available,
    anyIf(at, facet = 'offer') AS v_offer_at
FROM {db}.hosts FINAL
{where}
GROUP BY host
ORDER BY host
"""

_HOST_STATE_SELECT = """
SELECT host, state, reason, deadline, present, at FROM {db}.host_states FINAL {where}
"""

_HOST_RUNS_SELECT = """
SELECT host, job_id, instance, run, state FROM {db}.tasks FINAL
WHERE facet = 'state' AND host IS NOT NULL AND state IN {states:Array(String)} {host_filter}
ORDER BY host, job_id, instance
"""

_ON_HOST = sorted(s.value for s in ON_HOST)

_UPDATE_SELECT = """
SELECT job_id, update_id,
    countIf(facet = 'state') AS v_has_state,
    anyIf(state, facet = 'state') AS v_state,
    anyIf(previous_state, facet = 'state') AS v_previous_state,
    anyIf(reason, facet = 'state') AS v_reason,
    anyIf(at, facet = 'state') AS v_state_at,
    anyIf(from_version, facet = 'state') AS v_from_version,
    anyIf(to_version, facet = 'state') AS v_to_version,
    anyIf(from_instance_count, facet = 'state') AS v_from_instance_count,
    anyIf(to_instance_count, facet = 'state') AS v_to_instance_count,
    anyIf(done, facet = 'state') AS v_done,
    anyIf(failed, facet = 'state') AS v_failed,
    anyIf(in_flight, facet = 'state') AS v_in_flight,
    anyIf(resume_to, facet = 'state') AS v_resume_to,
    anyIf(settings_json, facet = 'state') AS v_settings_json,
    countIf(facet = 'request') AS v_has_request,
    anyIf(at, facet = 'request') AS v_requested_at,
    anyIf(requested_by, facet = 'request') AS v_requested_by,
    anyIf(settings_json, facet = 'request') AS v_request_settings_json,
    anyIf(to_instance_count, facet = 'request') AS v_request_instance_count,
    anyIf(at, facet = 'first') AS v_created_at,
    countIf(facet = 'command') AS v_has_command,
    anyIf(command, facet = 'command') AS v_command,
    anyIf(at, facet = 'command') AS v_command_at,
    anyIf(reason, facet = 'command') AS v_command_reason
FROM {db}.updates FINAL
{where}
GROUP BY job_id, update_id
HAVING countIf(facet IN ('state', 'request')) > 0
ORDER BY v_created_at DESC, update_id
"""

_POOL_COLUMNS = ("pool", "parent", "cycle", "at", "capacity", "reservation", "limit",
                 "entitlement", "slack_entitlement", "nonslack_entitlement", "allocation",
                 "demand")


def _strip(record: Mapping[str, Any]) -> dict[str, Any]:
    return {(k[2:] if k.startswith("v_") else k): v for k, v in record.items()}


def shown_reason(task: Mapping[str, Any]) -> str:
    """The reason a task shows: a waiting task's newest admission/placement note for its
    current run wins over the reason of its last transition. A note that belongs to the
    state the task waits in (admission while PENDING, placement while READY/PLACING) is
    shown whatever its time: notes and transitions come from different services' clocks,
    so a placement note may carry a time just before jobmgr's READY."""
    if not (task["has_pending"] and task["pending_run"] == task["run"]
            and task["state"] in WAITING_STATES):
        return str(task["reason"])
    note = str(task["pending_reason"])
    kind_matches = (note.startswith("waiting for admission") and task["state"] == "PENDING"
                    or note.startswith("waiting for placement")
                    and task["state"] in ("READY", "PLACING"))
    if kind_matches or task["pending_at"] >= task["updated_at"]:
        return note
    return str(task["reason"])


def host_state(h: Mapping[str, Any]) -> str:
    """REGISTERED, UP or LOST: the newest of registration, heartbeat and loss decides; a
    loss of an older incarnation than the registered one does not count."""
    facts: list[tuple[int, int, str]] = []
    if h["has_reg"]:
        facts.append((h["reg_at"], 0, "REGISTERED"))
    if h["has_hb"]:
        facts.append((h["hb_at"], 1, "UP"))
    stale_loss = bool(h["has_reg"] and h["lost_incarnation"]
                      and h["lost_incarnation"] != h["reg_incarnation"])
    if h["has_lost"] and not stale_loss:
        facts.append((h["lost_at"], 2, "LOST"))
    if not facts:
        return "REGISTERED"  # only an offer seen so far: the host manager knows it
    return max(facts)[2]


class Store:
    """The read model in ClickHouse (see the module docstring)."""

    def __init__(self, dsn: str, database: str = "peloton",
                 history_ttl_days: int | None = None) -> None:
        if not _DB_NAME.match(database):
            raise ValueError(f"invalid database name {database!r}")
        self.dsn = dsn
        self.db = database
        self.history_ttl_days = (_ttl_from_env(os.environ) if history_ttl_days is None
                                 else history_ttl_days)
        ttl_expression(self.history_ttl_days)  # validates the range before connecting
        self._lock = threading.RLock()
        self._client: Any = clickhouse_connect.get_client(dsn=dsn)
        self._create_schema()

    # ---- lifecycle ----------------------------------------------------------------------
    def _create_schema(self) -> None:
        text = _SCHEMA.read_text().replace("{db}", self.db)
        statements = [s.strip() for s in _strip_comments(text).split(";")]
        with self._lock:
            for stmt in statements:
                if stmt:
                    self._client.command(stmt)
            self._apply_history_ttl()
            rows = self._query("SELECT value FROM {db}.meta FINAL WHERE name = 'epoch'")
            if not rows:
                self._client.insert(f"{self.db}.meta", [["epoch", uuid.uuid4().hex[:12]]],
                                    column_names=["name", "value"])

    def _apply_history_ttl(self) -> None:
        """Give every history table the TTL of the setting, where it has another one."""
        expr = ttl_expression(self.history_ttl_days)
        engines = {r["name"]: r["engine_full"] for r in self._query(
            "SELECT name, engine_full FROM system.tables WHERE database = {db_name:String}",
            db_name=self.db)}
        for table in HISTORY_TABLES:
            if applied_ttl_days(engines[table]) == self.history_ttl_days:
                continue
            if expr is None:
                self._client.command(f"ALTER TABLE {self.db}.{table} REMOVE TTL")
            else:
                self._client.command(f"ALTER TABLE {self.db}.{table} MODIFY TTL {expr}")

    def close(self) -> None:
        with self._lock:
            self._client.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def epoch(self) -> str:
        """A random id drawn when this store's tables were created (stable afterwards)."""
        return str(self._query("SELECT value FROM {db}.meta FINAL WHERE name = 'epoch'")[0]
                   ["value"])

    def ping(self) -> bool:
        return bool(self._query("SELECT 1 AS ok")[0]["ok"] == 1)

    # ---- writes -------------------------------------------------------------------------
    def insert(self, rows: Iterable[Row]) -> int:
        """Insert projector rows, one INSERT per table. Idempotent by the rows' keys."""
        by_table: dict[str, list[list[Any]]] = defaultdict(list)
        for row in rows:
            by_table[row.table].append([row.values[c] for c in COLUMNS[row.table]])
        count = 0
        with self._lock:
            for table, data in by_table.items():
                self._client.insert(f"{self.db}.{table}", data,
                                    column_names=list(COLUMNS[table]))
                count += len(data)
        return count

    # ---- queries ------------------------------------------------------------------------
    def _query(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        with self._lock:
            result = self._client.query(sql.replace("{db}", self.db), parameters=params)
            return list(result.named_results())

    def table_counts(self) -> dict[str, int]:
        """Rows per table after deduplication (FINAL): for tests and health output."""
        return {t: int(self._query(f"SELECT count() AS n FROM {{db}}.{t} FINAL")[0]["n"])
                for t in COLUMNS}

    def get_job(self, job_id: str) -> dict[str, Any] | None:
        rows = self._query(_JOB_SELECT + " WHERE job_id = {job_id:String} GROUP BY job_id",
                           job_id=job_id)
        if not rows:
            return None
        return _counted(_job(rows[0]), self._task_counts([job_id]).get(job_id, {}))

    def list_jobs(self, limit: int = 100, state: str | None = None) -> list[dict[str, Any]]:
        """Newest first; `state` filters on the job state (SUBMITTED, REJECTED, PENDING..)."""
        rows = self._query(
            _JOB_SELECT + """ GROUP BY job_id
            HAVING countIf(facet IN ('spec', 'state')) > 0
               AND ({state:String} = '' OR v_state = {state:String})
            ORDER BY greatest(v_submitted_at, v_created_at) DESC, job_id
            LIMIT {limit:UInt32}""", state=state or "", limit=max(0, limit))
        jobs = [_job(r) for r in rows]
        counts = self._task_counts([j["job_id"] for j in jobs])
        return [_counted(j, counts.get(j["job_id"], {})) for j in jobs]

    def _task_counts(self, job_ids: Sequence[str]) -> dict[str, dict[str, int]]:
        if not job_ids:
            return {}
        rows = self._query(
            """SELECT job_id, state, count() AS n FROM {db}.tasks FINAL
               WHERE facet = 'state' AND job_id IN {ids:Array(String)}
               GROUP BY job_id, state ORDER BY job_id, state""", ids=list(job_ids))
        out: dict[str, dict[str, int]] = defaultdict(dict)
        for r in rows:
            out[r["job_id"]][r["state"]] = int(r["n"])
        return dict(out)

    def tasks_of_job(self, job_id: str, instance: int | None = None) -> list[dict[str, Any]]:
        """Each task's latest state, shown reason and sandbox, with its state history."""
        flt = "" if instance is None else "AND instance = {instance:UInt32}"
        params: dict[str, Any] = {"job_id": job_id}
        if instance is not None:
            params["instance"] = instance
        tasks = [_task(_strip(r)) for r in
                 self._query(_TASK_SELECT.replace("{instance_filter}", flt), **params)]
        history: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for h in self._query(_HISTORY_SELECT.replace("{instance_filter}", flt), **params):
            history[h.pop("instance")].append(h)
        for t in tasks:
            t["history"] = history.get(t["instance"], [])
        return tasks

    def task(self, job_id: str, instance: int) -> dict[str, Any] | None:
        found = self.tasks_of_job(job_id, instance)
        return found[0] if found else None

    def queued_jobs(self, pool: str) -> list[dict[str, Any]]:
        """The jobs of a pool with PENDING tasks (the resource manager's admission queue):
        {"job_id", "priority", "created_at"} (see readmodel/pending.queue_position)."""
        return self._query(
            """SELECT job_id, anyIf(priority, facet = 'spec') AS priority,
                      anyIf(at, facet = 'created') AS created_at
               FROM {db}.jobs FINAL
               WHERE job_id IN (SELECT job_id FROM {db}.tasks FINAL
                                WHERE facet = 'state' AND state = 'PENDING')
               GROUP BY job_id
               HAVING anyIf(respool, facet = 'spec') = {pool:String}""", pool=pool)

    def run_host(self, job_id: str, instance: int, run: int) -> str | None:
        """The host a run was on (its last transition naming a host), if any."""
        rows = self._query(
            """SELECT host FROM {db}.task_events FINAL
               WHERE job_id = {job_id:String} AND instance = {instance:UInt32}
                 AND run = {run:UInt32} AND host IS NOT NULL
               ORDER BY src_offset DESC, src_index DESC LIMIT 1""",
            job_id=job_id, instance=instance, run=run)
        return str(rows[0]["host"]) if rows else None

    def hosts(self, host: str | None = None) -> list[dict[str, Any]]:
        where = "" if host is None else "WHERE host = {host:String}"
        params = {} if host is None else {"host": host}
        found = [_host(_strip(r)) for r in self._query(_HOST_SELECT.replace("{where}", where),
                                                         **params)]
        states = {r["host"]: r for r in self._query(
            _HOST_STATE_SELECT.replace("{where}", where), **params)}
        runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in self._query(_HOST_RUNS_SELECT.replace(
                "{host_filter}", "" if host is None else "AND host = {host:String}"),
                states=_ON_HOST, **params):
            runs[r.pop("host")].append(r)
        for h in found:
            st = states.get(h["host"])
            h["maintenance_state"] = st["state"] if st else "UP"
            h["maintenance_deadline"] = st["deadline"] if st else None
            h["maintenance_reason"] = st["reason"] if st else ""
            h["maintenance_at"] = st["at"] if st else None
            h["runs"] = runs.get(h["host"], [])
            h["task_count"] = len(h["runs"])
        return found

    def host_events(self, host: str, limit: int = 100) -> list[dict[str, Any]]:
        """A host's maintenance facts (state changes, refused requests), newest first."""
        return self._query(
            """SELECT host, at, kind, state, previous_state, present, command, reason,
                      deadline
               FROM {db}.host_events FINAL WHERE host = {host:String}
               ORDER BY at DESC, src_offset DESC LIMIT {limit:UInt32}""",
            host=host, limit=max(0, limit))

    def host_log_url(self, host: str) -> str | None:
        found = self.hosts(host)
        return (found[0]["log_url"] or None) if found else None

    def pools(self) -> list[dict[str, Any]]:
        """The pools of the newest entitlement cycle, sorted by path."""
        cols = ", ".join(f"`{c}`" for c in _POOL_COLUMNS)
        return self._query(
            f"""SELECT {cols} FROM {{db}}.pools FINAL
                WHERE (src_topic, src_partition, src_offset) = (
                    SELECT argMax((src_topic, src_partition, src_offset), version)
                    FROM {{db}}.pools FINAL)
                ORDER BY pool""")

    def pool_configs(self, pool: str | None = None) -> dict[str, dict[str, Any]]:
        """Every existing pool's config as the resource manager last decided it, by path:
        {"parent", "config" (the events' PoolConfig record), "at", "request_id"}."""
        where = "" if pool is None else "AND pool = {pool:String}"
        params = {} if pool is None else {"pool": pool}
        rows = self._query(
            f"""SELECT pool, parent, config_json, at, request_id FROM {{db}}.pool_configs FINAL
                WHERE NOT deleted {where} ORDER BY pool""", **params)
        return {r["pool"]: {"parent": r["parent"], "config": json.loads(r["config_json"]),
                            "at": r["at"], "request_id": r["request_id"]} for r in rows}

    def pool_request(self, request_id: str) -> dict[str, Any] | None:
        """A pool request's outcome: state REQUESTED, ACCEPTED or REJECTED (with reasons)."""
        rows = self._query(
            """SELECT request_id, path, operation, state, reasons, at
               FROM {db}.pool_requests FINAL WHERE request_id = {rid:String}""",
            rid=request_id)
        if not rows:
            return None
        row = rows[0]
        row["reasons"] = list(row["reasons"])
        return row

    def preemptions(self, job_id: str | None = None, pool: str | None = None,
                    limit: int = 1000) -> list[dict[str, Any]]:
        """Preempted runs, newest first, optionally of one job and/or one pool."""
        return self._query(
            """SELECT job_id, instance, run, at, pool, reason, detail
               FROM {db}.preemptions FINAL
               WHERE ({job:String} = '' OR job_id = {job:String})
                 AND ({pool:String} = '' OR pool = {pool:String})
               ORDER BY at DESC, job_id, instance, run LIMIT {limit:UInt32}""",
            job=job_id or "", pool=pool or "", limit=max(0, limit))

    def updates_of_job(self, job_id: str) -> list[dict[str, Any]]:
        """A job's updates, newest first (see `_update` for the shape)."""
        return [_update(_strip(r)) for r in self._query(
            _UPDATE_SELECT.replace("{where}", "WHERE job_id = {job_id:String}"),
            job_id=job_id)]

    def update(self, update_id: str) -> dict[str, Any] | None:
        """One update by id (the newest, should two jobs share an id)."""
        found = self._query(_UPDATE_SELECT.replace("{where}", "WHERE update_id = {uid:String}"),
                            uid=update_id)
        return _update(_strip(found[0])) if found else None

    def dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        return self._query(
            """SELECT at, service, source_topic, partition, offset, reason, key, value_size,
                      value_b64
               FROM {db}.dead_letters FINAL ORDER BY at DESC, src_offset DESC
               LIMIT {limit:UInt32}""", limit=max(0, limit))


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def _counted(job: dict[str, Any], counts: dict[str, int]) -> dict[str, Any]:
    """The job with its task counts; a DAEMON's instance count is its instances so far
    (one per matching host that joined; its spec says none)."""
    job["task_counts"] = counts
    if job["type"] == "DAEMON":
        job["instance_count"] = sum(counts.values())
    return job


def _job(raw: Mapping[str, Any]) -> dict[str, Any]:
    r = _strip(raw)
    config: Any = json.loads(r["config_json"]) if r["config_json"] else {}
    kill = None
    if r["has_kill"]:
        kill = {"at": r["kill_at"], "instances": list(r["kill_instances"]),
                "reason": r["kill_reasons"][0] if r["kill_reasons"] else ""}
    return {
        "job_id": r["job_id"], "name": r["name"], "owner": r["owner"], "type": r["type"],
        "respool": r["respool"], "instance_count": r["instance_count"],
        "priority": r["priority"], "preemptible": bool(r["preemptible"]),
        "labels": dict(r["labels"]), "description": r["description"],
        "state": r["state"] or "SUBMITTED", "previous_state": r["previous_state"] or None,
        "submitted_at": r["submitted_at"] if r["has_submitted"] else None,
        "created_at": r["created_at"] if r["has_created"] else None,
        "updated_at": r["updated_at"], "rejection_reasons": list(r["reasons"]),
        "kill_request": kill, "config": config, "task_counts": {},
    }


def _task(r: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "instance": r["instance"], "run": r["run"], "state": r["state"],
        "previous_state": r["previous_state"], "host": r["host"], "reason": shown_reason(r),
        "exit_code": r["exit_code"], "failures": r["failures"], "updated_at": r["updated_at"],
        "config_version": r["config_version"],
        "sandbox": r["sandbox"] if r["has_status"] and r["status_run"] == r["run"] else None,
        # PENDING (running, no passing check yet), HEALTHY, UNHEALTHY; None: no check
        "health": r["health"] if r["has_health"] and r["health_run"] == r["run"] else None,
    }


def _update(r: Mapping[str, Any]) -> dict[str, Any]:
    """An update: `state` REQUESTED (not answered yet), REJECTED (with `reason`) or the job
    manager's update state; `instances` is how many instances it may touch."""
    answered = bool(r["has_state"])
    settings_json = (r["settings_json"] if answered and r["settings_json"]
                     else r["request_settings_json"])
    counts = ((r["from_instance_count"], r["to_instance_count"]) if answered
              else (0, r["request_instance_count"]))
    rejection = None
    if r["has_command"]:
        rejection = {"command": r["command"], "at": r["command_at"],
                     "reason": r["command_reason"]}
    return {
        "job_id": r["job_id"], "update_id": r["update_id"],
        "state": r["state"] if answered else "REQUESTED",
        "previous_state": (r["previous_state"] or None) if answered else None,
        "reason": r["reason"] if answered else "waiting for the job manager",
        "from_version": r["from_version"] if answered else None,
        "to_version": r["to_version"] if answered else None,
        "from_instance_count": counts[0], "to_instance_count": counts[1],
        "instances": max(counts), "done": list(r["done"]), "failed": list(r["failed"]),
        "in_flight": list(r["in_flight"]), "resume_to": r["resume_to"] or None,
        "settings": json.loads(settings_json) if settings_json else {},
        "requested_by": r["requested_by"] if r["has_request"] else None,
        "requested_at": r["requested_at"] if r["has_request"] else None,
        "created_at": r["created_at"],
        "updated_at": r["state_at"] if answered else r["requested_at"],
        "last_command_rejection": rejection,
    }


def _host(h: Mapping[str, Any]) -> dict[str, Any]:
    reg = bool(h["has_reg"])
    return {
        "host": h["host"], "state": host_state(h),
        "incarnation": h["reg_incarnation"] if reg else None,
        "capacity": dict(h["reg_capacity"] if reg else h["offer_capacity"]),
        "free": dict(h["free"]) if h["has_offer"] else None,
        "available": bool(h["available"]) if h["has_offer"] else None,
        "labels": dict(h["reg_labels"] if reg else h["offer_labels"]),
        "log_url": h["log_url"] or None,
        "port_range": [h["port_range_begin"], h["port_range_end"]] if reg else None,
        "simulated": bool(h["simulated"]),
        "registered_at": h["reg_at"] if reg else None,
        "last_heartbeat": h["hb_at"] if h["has_hb"] else None,
        "running": h["running"] if h["has_hb"] else None,
        "lost_at": h["lost_at"] if h["has_lost"] else None,
        "lost_reason": h["lost_reason"] if h["has_lost"] else None,
    }
