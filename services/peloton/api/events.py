"""Server-Sent Events: watch a job, or the cluster, as the read model projects facts.

Routes (bearer token required, as every /v1 route):
- `GET /v1/watch/jobs/{job_id}`: `event: job` (the job's state changed: job_id, state,
  previous_state, reasons, at) and `event: task` (one task transition: job_id, instance,
  run, state, previous_state, reason, host, exit_code, failures, at, config_version).
  Without Last-Event-ID it starts from the job's beginning (every transition so far, and
  its current state). 404 for a job the read model does not know. `until_done=true` ends
  the stream after the job is in a terminal state (SUCCEEDED, FAILED, KILLED, REJECTED)
  and every transition read so far was sent.
- `GET /v1/watch/cluster`: `event: job` (any job's state changed) and `event: host` (a
  host's maintenance state changed: HostStateChanged/refused requests, kind, state,
  previous_state, reason; or it registered or was lost: kind REGISTERED/LOST). Without
  Last-Event-ID it starts now (only changes from then on).
Each `data:` is one JSON object. Job state events carry the job's newest state at each
poll: states the job passed through between two polls are coalesced (task transitions
never are: they come from the read model's history table).

Ids and resume: an event's `id` is an opaque cursor, URL-safe base64 of JSON
{"<table>/<topic>/<partition>": [offset, index]}: for each read-model table and source
partition, the position of the newest row sent so far (rows record the bus position they
were projected from, see schema.sql). Events are sent in position order within each
(table, partition) and merged by event time across them, so a client that reconnects
with `Last-Event-ID: <the last id it got>` (browsers' EventSource do) receives exactly
the events it has not seen. A malformed Last-Event-ID is 400.

Delivery: the route polls the read model (rows newer than the cursor, `POLL_SECONDS`,
env PELOTON_WATCH_POLL_SECONDS, default 0.5) in a worker thread, at most `BATCH` rows per
table per poll; sends a `: keepalive` comment after `KEEPALIVE_SECONDS` (15) without
events; ends the stream after `max_seconds` (default and cap: env
PELOTON_WATCH_MAX_SECONDS, 300; clients reconnect with Last-Event-ID), and stops polling
as soon as the client disconnects. The first line is `retry: 2000`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import heapq
import json
import os
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from typing import Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from peloton.api.errors import BadRequest, ErrorBody, NotFound
from peloton.api.params import JobId
from peloton.model.taskstate import TERMINAL_JOB
from peloton.readmodel.store import Store

__all__ = ["events_router", "Cursor", "encode_id", "decode_id", "poll_job", "poll_cluster",
           "cluster_start", "sse"]

BATCH = 2000
KEEPALIVE_SECONDS = 15.0
MAX_ID = 8192
DONE_STATES = frozenset({*(s.value for s in TERMINAL_JOB), "REJECTED"})
Cursor = dict[str, tuple[int, int]]

_POS = "src_topic, src_partition, src_offset, src_index"
_TASK_EVENTS = f"""SELECT job_id, instance, run, state, previous_state, reason, host,
    exit_code, failures, at, config_version, {_POS}
FROM {{db}}.task_events FINAL WHERE job_id = {{job_id:String}} AND {{beyond}}
ORDER BY src_topic, src_partition, src_offset, src_index LIMIT {BATCH}"""
_JOB_STATES = f"""SELECT job_id, state, previous_state, reasons, at, {_POS}
FROM {{db}}.jobs FINAL WHERE facet = 'state' {{job_filter}} AND {{beyond}}
ORDER BY src_topic, src_partition, src_offset, src_index LIMIT {BATCH}"""
_HOST_EVENTS = f"""SELECT host, kind, state, previous_state, reason, at, {_POS}
FROM {{db}}.host_events FINAL WHERE {{beyond}}
ORDER BY src_topic, src_partition, src_offset, src_index LIMIT {BATCH}"""
_HOST_FACTS = f"""SELECT host, facet, reason, at, {_POS}
FROM {{db}}.hosts FINAL WHERE facet IN ('registration', 'lost') AND {{beyond}}
ORDER BY src_topic, src_partition, src_offset, src_index LIMIT {BATCH}"""


def encode_id(cursor: Cursor) -> str:
    raw = json.dumps({k: list(v) for k, v in sorted(cursor.items())}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_id(text: str) -> Cursor:
    """The cursor in an event id; ValueError for anything this module did not make."""
    if len(text) > MAX_ID:
        raise ValueError("too long")
    try:
        data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise ValueError("not an event id of this API") from exc
    if not isinstance(data, dict):
        raise ValueError("not an event id of this API")
    out: Cursor = {}
    for key, pos in data.items():
        parts = key.split("/")
        if (len(parts) < 3 or not parts[-1].isdigit() or not isinstance(pos, list)
                or len(pos) != 2 or not all(type(p) is int and 0 <= p < 2**63 for p in pos)):
            raise ValueError("not an event id of this API")
        out[key] = (pos[0], pos[1])
    return out


def _key(table: str, row: dict[str, Any]) -> str:
    return f"{table}/{row['src_topic']}/{row['src_partition']}"


def _beyond(table: str, cursor: Cursor, params: dict[str, Any]) -> str:
    """SQL: the row's position is past the cursor for its (table, partition)."""
    known = [(k, v) for k, v in sorted(cursor.items()) if k.startswith(table + "/")]
    past, seen = [], []
    for i, (k, (offset, index)) in enumerate(known):
        topic, _, partition = k[len(table) + 1:].rpartition("/")
        names = [f"{table}_{n}{i}" for n in "tpoi"]
        params.update(zip(names, (topic, int(partition), offset, index), strict=True))
        t, p, o, x = names
        same = f"src_topic = {{{t}:String}} AND src_partition = {{{p}:UInt32}}"
        seen.append(f"({same})")
        past.append(f"({same} AND (src_offset > {{{o}:UInt64}} OR (src_offset = "
                    f"{{{o}:UInt64}} AND src_index > {{{x}:UInt32}})))")
    if not known:
        return "1"
    return f"({' OR '.join(past)} OR NOT ({' OR '.join(seen)}))"


def _rows(store: Store, table: str, sql: str, cursor: Cursor,
          **params: Any) -> list[dict[str, Any]]:
    sql = sql.replace("{beyond}", _beyond(table, cursor, params))
    return store._query(sql, **params)


def _job_event(r: dict[str, Any]) -> dict[str, Any]:
    return {"job_id": r["job_id"], "state": r["state"] or "SUBMITTED",
            "previous_state": r["previous_state"] or None, "reasons": list(r["reasons"]),
            "at": r["at"]}


def _task_event(r: dict[str, Any]) -> dict[str, Any]:
    return {k: r[k] for k in ("job_id", "instance", "run", "state", "previous_state",
                              "reason", "host", "exit_code", "failures", "at",
                              "config_version")}


def _host_event(r: dict[str, Any]) -> dict[str, Any]:
    return {"host": r["host"], "kind": r["kind"], "state": r["state"],
            "previous_state": r["previous_state"] or None, "reason": r["reason"],
            "at": r["at"]}


def _host_fact(r: dict[str, Any]) -> dict[str, Any]:
    kind = "REGISTERED" if r["facet"] == "registration" else "LOST"
    return {"host": r["host"], "kind": kind, "state": kind, "previous_state": None,
            "reason": r["reason"], "at": r["at"]}


Item = tuple[str, str, tuple[int, int], dict[str, Any]]  # (key, event name, pos, data)


def _merged(sources: list[tuple[str, str, list[dict[str, Any]], Any]]) -> list[Item]:
    """Every row as an event, in position order per (table, partition), merged by time."""
    lanes: dict[str, list[tuple[int, Item]]] = defaultdict(list)
    for table, name, rows, shape in sources:
        for r in rows:
            key = _key(table, r)
            lanes[key].append((int(r["at"]), (key, name, (int(r["src_offset"]),
                                                           int(r["src_index"])), shape(r))))
    return [item for _, item in heapq.merge(*lanes.values(), key=lambda e: e[0])]


def poll_job(store: Store, job_id: str, cursor: Cursor) -> list[Item]:
    # the job's states first: a fact lands in both tables in one insert, which may fall
    # between the two queries, and a task change is written no later than the job change
    # it leads to, so a job state read here has its task changes in the second query
    # (read the other way round, a job's end could come before its last task's)
    jobs = _rows(store, "jobs", _JOB_STATES.replace(
        "{job_filter}", "AND job_id = {job_id:String}"), cursor, job_id=job_id)
    tasks = _rows(store, "task_events", _TASK_EVENTS, cursor, job_id=job_id)
    return _merged([("task_events", "task", tasks, _task_event),
                    ("jobs", "job", jobs, _job_event)])


def poll_cluster(store: Store, cursor: Cursor) -> list[Item]:
    jobs = _rows(store, "jobs", _JOB_STATES.replace("{job_filter}", ""), cursor)
    host_events = _rows(store, "host_events", _HOST_EVENTS, cursor)
    host_facts = _rows(store, "hosts", _HOST_FACTS, cursor)
    return _merged([("jobs", "job", jobs, _job_event),
                    ("host_events", "host", host_events, _host_event),
                    ("hosts", "host", host_facts, _host_fact)])


def cluster_start(store: Store) -> Cursor:
    """The cursor of 'now': the newest position of every table and partition watched."""
    cursor: Cursor = {}
    for table, where in (("jobs", "WHERE facet = 'state'"), ("host_events", ""),
                         ("hosts", "WHERE facet IN ('registration', 'lost')")):
        for r in store._query(
                f"""SELECT src_topic, src_partition,
                        max((src_offset, src_index)) AS pos
                    FROM {{db}}.{table} FINAL {where} GROUP BY src_topic, src_partition"""):
            cursor[_key(table, r)] = (int(r["pos"][0]), int(r["pos"][1]))
    return cursor


def sse(name: str, data: dict[str, Any], event_id: str) -> str:
    return f"id: {event_id}\nevent: {name}\ndata: {json.dumps(data, default=str)}\n\n"


def _env_seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


def _stream_doc(events: list[str]) -> dict[int | str, dict[str, Any]]:
    """The 200 of a watch route: each Server-Sent Event (OpenAPI 3.1: `schema` describes
    one event), and the 400 of a malformed Last-Event-ID."""
    event = {"type": "object", "properties": {
        "event": {"type": "string", "enum": events},
        "data": {"type": "string", "contentMediaType": "application/json",
                 "description": "one JSON object (see peloton.api.events)"},
        "id": {"type": "string", "description": "send back as Last-Event-ID to resume"},
        "retry": {"type": "integer"}}}
    return {200: {"description": "a stream of Server-Sent Events",
                  "content": {"text/event-stream": {"schema": event}}},
            400: {"model": ErrorBody}}


async def stream(request: Any, cursor: Cursor, poll: Any, seconds: float,
                 interval: float, done: Any = None) -> AsyncIterator[str]:
    """The events of `poll` (rows past `cursor`) every `interval` seconds for `seconds`,
    as SSE text; with `done`, ends once it is true and a poll after it found nothing
    left. `done` is asked before the poll, not after: the fact that makes it true is then
    in that poll (asked after, a job's terminal state landing between the two was never
    sent)."""
    deadline = time.monotonic() + seconds
    quiet_since = time.monotonic()
    yield "retry: 2000\n\n"
    while True:
        finished = done is not None and await done()
        items = await asyncio.to_thread(poll, cursor)
        for key, name, pos, data in items:
            cursor[key] = pos
            yield sse(name, data, encode_id(cursor))
            quiet_since = time.monotonic()
        if finished and not items:
            return
        now = time.monotonic()
        if now >= deadline or await request.is_disconnected():
            return
        if finished:
            continue  # what is left of a finished job, at once
        if now - quiet_since >= KEEPALIVE_SECONDS:
            yield ": keepalive\n\n"
            quiet_since = now
        await asyncio.sleep(min(interval, max(0.0, deadline - now)))


def events_router(store: Store) -> APIRouter:
    router = APIRouter(tags=["watch"])

    def start(last_event_id: str | None) -> Cursor | None:
        if last_event_id is None:
            return None
        try:
            return decode_id(last_event_id)
        except ValueError as exc:
            raise BadRequest("invalid request", [
                {"field": "Last-Event-ID", "message": f"{exc} (send the id of the last "
                 "event received, unchanged)"}]) from exc

    def limits(max_seconds: float | None) -> tuple[float, float]:
        cap = _env_seconds("PELOTON_WATCH_MAX_SECONDS", 300.0)
        return (min(max_seconds or cap, cap),
                _env_seconds("PELOTON_WATCH_POLL_SECONDS", 0.5))

    def respond(body: Iterator[str] | AsyncIterator[str]) -> StreamingResponse:
        return StreamingResponse(body, media_type="text/event-stream", headers={
            "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    max_q = Query(None, gt=0, le=86_400, description="end the stream after this many "
                  "seconds (default and cap: the server's, 300 unless configured)")
    last_id = Header(None, alias="Last-Event-ID", max_length=MAX_ID,
                     description="resume after this event id")

    @router.get("/v1/watch/jobs/{job_id}", response_class=StreamingResponse,
                responses={**_stream_doc(["job", "task"]), 404: {"model": ErrorBody}})
    async def watch_job(request: Request, job_id: JobId,
                        until_done: bool = Query(False, description="end the stream once "
                                                 "the job is in a terminal state"),
                        max_seconds: float | None = max_q,
                        last_event_id: str | None = last_id) -> StreamingResponse:
        """A job's state changes and task transitions as Server-Sent Events."""
        cursor = start(last_event_id) or {}
        if await asyncio.to_thread(store.get_job, job_id) is None:
            raise NotFound(f"job {job_id} not found (it may still be in flight)")
        seconds, interval = limits(max_seconds)

        async def done() -> bool:
            if not until_done:
                return False
            job = await asyncio.to_thread(store.get_job, job_id)
            return job is not None and job["state"] in DONE_STATES

        return respond(stream(request, cursor, lambda c: poll_job(store, job_id, c),
                              seconds, interval, done))

    @router.get("/v1/watch/cluster", response_class=StreamingResponse,
                responses=_stream_doc(["job", "host"]))
    async def watch_cluster(request: Request, max_seconds: float | None = max_q,
                            last_event_id: str | None = last_id) -> StreamingResponse:
        """Job state changes and host state changes, cluster-wide, as Server-Sent Events."""
        cursor = start(last_event_id)
        if cursor is None:
            cursor = await asyncio.to_thread(cluster_start, store)
        seconds, interval = limits(max_seconds)
        return respond(stream(request, cursor, lambda c: poll_cluster(store, c),
                              seconds, interval))

    return router
