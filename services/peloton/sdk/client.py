"""`Client` (sync) and `AsyncClient` (asyncio): the same methods over httpx.

Every request carries `Authorization: Bearer <token>`. Errors raise peloton.sdk.errors
exceptions. List methods return a `Page`; `iter_jobs`/`iter_tasks` follow next_cursor
until the last page. `watch_job`/`watch_cluster` yield `WatchEvent`s from the API's
Server-Sent Events; when the server ends a stream (its max duration) they reconnect with
Last-Event-ID, so no event is lost or repeated, until `until_done` sees the job finish
(watch_job) or the caller stops iterating.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from peloton.model.taskstate import TERMINAL_JOB
from peloton.sdk.errors import ApiUnreachable, from_response
from peloton.sdk.models import Host, Job, Page, Pool, SSEParser, Task, Update, WatchEvent

__all__ = ["Client", "AsyncClient", "DONE_STATES"]

#: a job in one of these changes no more (the server's rule, peloton.api.events)
DONE_STATES = frozenset({*(s.value for s in TERMINAL_JOB), "REJECTED"})


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _job_params(state: str | Sequence[str] | None, owner: str | None, pool: str | None,
                subpools: bool, label_selector: str | Mapping[str, str] | None,
                submitted_from: int | None, submitted_to: int | None,
                limit: int | None, cursor: str | None) -> dict[str, Any]:
    if isinstance(label_selector, Mapping):
        label_selector = ",".join(f"{k}={v}" for k, v in label_selector.items())
    params: dict[str, Any] = {
        "state": [state] if isinstance(state, str) else list(state or []) or None,
        "owner": owner, "pool": pool, "subpools": "true" if subpools else None,
        "label_selector": label_selector or None, "submitted_from": submitted_from,
        "submitted_to": submitted_to, "limit": limit, "cursor": cursor}
    return {k: v for k, v in params.items() if v is not None}


def _task_params(state: str | Sequence[str] | None, instances: str | None, host: str | None,
                 limit: int | None, cursor: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "state": [state] if isinstance(state, str) else list(state or []) or None,
        "instances": instances, "host": host, "limit": limit, "cursor": cursor}
    return {k: v for k, v in params.items() if v is not None}


def _submit_args(job: str | Mapping[str, Any], job_id: str | None) -> dict[str, Any]:
    if isinstance(job, str):
        content, ctype = job.encode(), "application/yaml"
    else:
        content, ctype = json.dumps(job).encode(), "application/json"
    return {"content": content, "headers": {"Content-Type": ctype},
            "params": {"job_id": job_id} if job_id else None}


def _watch_params(until_done: bool, max_seconds: float | None) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if until_done:
        params["until_done"] = "true"
    if max_seconds is not None:
        params["max_seconds"] = max_seconds
    return params


def _jobs_page(body: dict[str, Any]) -> Page[Job]:
    return Page([Job.from_dict(j) for j in body["jobs"]], body.get("next_cursor"))


def _tasks_page(body: dict[str, Any]) -> Page[Task]:
    return Page([Task.from_dict(t) for t in body["tasks"]], body.get("next_cursor"))


class Client:
    """A synchronous client. `transport` lets tests talk to an app in process."""

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 10.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout,
                                  transport=transport, headers=_headers(token))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            resp = self._http.request(method, path, **kw)
        except httpx.TransportError as exc:
            raise ApiUnreachable(self.base_url, str(exc) or type(exc).__name__) from exc
        if resp.status_code >= 400:
            raise from_response(resp)
        return resp

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        return self._send(method, path, **kw).json()

    # ---- jobs ----------------------------------------------------------------------------
    def submit_job(self, job: str | Mapping[str, Any], job_id: str | None = None) -> str:
        """Submit a job file (YAML text, or a mapping sent as JSON); its id."""
        return str(self._json("POST", "/v1/jobs", **_submit_args(job, job_id))["job_id"])

    def get_job(self, job_id: str) -> Job:
        return Job.from_dict(self._json("GET", f"/v1/jobs/{quote(job_id, safe='')}"))

    def list_jobs(self, *, state: str | Sequence[str] | None = None, owner: str | None = None,
                  pool: str | None = None, subpools: bool = False,
                  label_selector: str | Mapping[str, str] | None = None,
                  submitted_from: int | None = None, submitted_to: int | None = None,
                  limit: int | None = None, cursor: str | None = None) -> Page[Job]:
        """One page of jobs, newest submitted first (filters: see docs/client.md)."""
        return _jobs_page(self._json("GET", "/v1/jobs", params=_job_params(
            state, owner, pool, subpools, label_selector, submitted_from, submitted_to,
            limit, cursor)))

    def iter_jobs(self, *, page_size: int = 100, **filters: Any) -> Iterator[Job]:
        """Every job matching the filters, page by page."""
        cursor = None
        while True:
            page = self.list_jobs(limit=page_size, cursor=cursor, **filters)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def kill_job(self, job_id: str, instances: Sequence[int] = (), reason: str = "") -> None:
        self._json("POST", f"/v1/jobs/{quote(job_id, safe='')}/kill",
                   json={"instances": list(instances), "reason": reason})

    # ---- tasks ---------------------------------------------------------------------------
    def list_tasks(self, job_id: str, *, state: str | Sequence[str] | None = None,
                   instances: str | None = None, host: str | None = None,
                   limit: int | None = None, cursor: str | None = None) -> Page[Task]:
        return _tasks_page(self._json(
            "GET", f"/v1/jobs/{quote(job_id, safe='')}/tasks",
            params=_task_params(state, instances, host, limit, cursor)))

    def iter_tasks(self, job_id: str, *, page_size: int = 1000,
                   **filters: Any) -> Iterator[Task]:
        cursor = None
        while True:
            page = self.list_tasks(job_id, limit=page_size, cursor=cursor, **filters)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def get_task(self, job_id: str, instance: int) -> Task:
        return Task.from_dict(self._json(
            "GET", f"/v1/jobs/{quote(job_id, safe='')}/tasks/{int(instance)}"))

    # ---- cluster -------------------------------------------------------------------------
    def hosts(self) -> list[Host]:
        return [Host.from_dict(h) for h in self._json("GET", "/v1/hosts")["hosts"]]

    def pools(self) -> list[Pool]:
        return [Pool.from_dict(p) for p in self._json("GET", "/v1/pools")["pools"]]

    def pool(self, path: str) -> Pool:
        return Pool.from_dict(self._json("GET", "/v1/pools/" + quote(path.strip("/"))))

    def updates(self, job_id: str) -> list[Update]:
        body = self._json("GET", f"/v1/jobs/{quote(job_id, safe='')}/updates")
        return [Update.from_dict(u) for u in body["updates"]]

    def get_update(self, update_id: str) -> Update:
        return Update.from_dict(self._json("GET", f"/v1/updates/{quote(update_id, safe='')}"))

    # ---- watch ---------------------------------------------------------------------------
    def watch_job(self, job_id: str, *, until_done: bool = False,
                  last_event_id: str | None = None, max_seconds: float | None = None,
                  reconnect: bool = True) -> Iterator[WatchEvent]:
        """The job's `job` and `task` events (from its beginning, or after
        `last_event_id`); with `until_done`, ends once the job is in a terminal state."""
        path = f"/v1/watch/jobs/{quote(job_id, safe='')}"
        params = _watch_params(until_done, max_seconds)
        done = False
        while not done:
            for ev in self._events(path, params, last_event_id):
                last_event_id = ev.id or last_event_id
                yield ev
            done = not reconnect or (until_done and self.get_job(job_id).state in DONE_STATES)

    def watch_cluster(self, *, last_event_id: str | None = None,
                      max_seconds: float | None = None,
                      reconnect: bool = True) -> Iterator[WatchEvent]:
        """Cluster-wide `job` and `host` events from now (or after `last_event_id`)."""
        params = _watch_params(False, max_seconds)
        while True:
            for ev in self._events("/v1/watch/cluster", params, last_event_id):
                last_event_id = ev.id or last_event_id
                yield ev
            if not reconnect:
                return

    def _events(self, path: str, params: dict[str, Any],
                last_event_id: str | None) -> Iterator[WatchEvent]:
        headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
        try:
            with self._http.stream("GET", path, params=params, headers=headers,
                                   timeout=httpx.Timeout(10.0, read=60.0)) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise from_response(resp)
                parser = SSEParser()
                for line in resp.iter_lines():
                    ev = parser.feed(line)
                    if ev is not None:
                        yield ev
        except httpx.TransportError as exc:
            raise ApiUnreachable(self.base_url, str(exc) or type(exc).__name__) from exc


class AsyncClient:
    """The asyncio twin of `Client` (same methods, awaited; iterators are async)."""

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 10.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout,
                                       transport=transport, headers=_headers(token))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _json(self, method: str, path: str, **kw: Any) -> Any:
        try:
            resp = await self._http.request(method, path, **kw)
        except httpx.TransportError as exc:
            raise ApiUnreachable(self.base_url, str(exc) or type(exc).__name__) from exc
        if resp.status_code >= 400:
            raise from_response(resp)
        return resp.json()

    async def submit_job(self, job: str | Mapping[str, Any], job_id: str | None = None) -> str:
        return str((await self._json("POST", "/v1/jobs", **_submit_args(job, job_id)))
                   ["job_id"])

    async def get_job(self, job_id: str) -> Job:
        return Job.from_dict(await self._json("GET", f"/v1/jobs/{quote(job_id, safe='')}"))

    async def list_jobs(self, *, state: str | Sequence[str] | None = None,
                        owner: str | None = None, pool: str | None = None,
                        subpools: bool = False,
                        label_selector: str | Mapping[str, str] | None = None,
                        submitted_from: int | None = None, submitted_to: int | None = None,
                        limit: int | None = None, cursor: str | None = None) -> Page[Job]:
        return _jobs_page(await self._json("GET", "/v1/jobs", params=_job_params(
            state, owner, pool, subpools, label_selector, submitted_from, submitted_to,
            limit, cursor)))

    async def iter_jobs(self, *, page_size: int = 100, **filters: Any) -> AsyncIterator[Job]:
        cursor = None
        while True:
            page = await self.list_jobs(limit=page_size, cursor=cursor, **filters)
            for job in page.items:
                yield job
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def kill_job(self, job_id: str, instances: Sequence[int] = (),
                       reason: str = "") -> None:
        await self._json("POST", f"/v1/jobs/{quote(job_id, safe='')}/kill",
                         json={"instances": list(instances), "reason": reason})

    async def list_tasks(self, job_id: str, *, state: str | Sequence[str] | None = None,
                         instances: str | None = None, host: str | None = None,
                         limit: int | None = None, cursor: str | None = None) -> Page[Task]:
        return _tasks_page(await self._json(
            "GET", f"/v1/jobs/{quote(job_id, safe='')}/tasks",
            params=_task_params(state, instances, host, limit, cursor)))

    async def iter_tasks(self, job_id: str, *, page_size: int = 1000,
                         **filters: Any) -> AsyncIterator[Task]:
        cursor = None
        while True:
            page = await self.list_tasks(job_id, limit=page_size, cursor=cursor, **filters)
            for task in page.items:
                yield task
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def get_task(self, job_id: str, instance: int) -> Task:
        return Task.from_dict(await self._json(
            "GET", f"/v1/jobs/{quote(job_id, safe='')}/tasks/{int(instance)}"))

    async def hosts(self) -> list[Host]:
        return [Host.from_dict(h) for h in (await self._json("GET", "/v1/hosts"))["hosts"]]

    async def pools(self) -> list[Pool]:
        return [Pool.from_dict(p) for p in (await self._json("GET", "/v1/pools"))["pools"]]

    async def updates(self, job_id: str) -> list[Update]:
        body = await self._json("GET", f"/v1/jobs/{quote(job_id, safe='')}/updates")
        return [Update.from_dict(u) for u in body["updates"]]

    async def watch_job(self, job_id: str, *, until_done: bool = False,
                        last_event_id: str | None = None, max_seconds: float | None = None,
                        reconnect: bool = True) -> AsyncIterator[WatchEvent]:
        path = f"/v1/watch/jobs/{quote(job_id, safe='')}"
        params = _watch_params(until_done, max_seconds)
        while True:
            async for ev in self._events(path, params, last_event_id):
                last_event_id = ev.id or last_event_id
                yield ev
            if not reconnect or (until_done
                                 and (await self.get_job(job_id)).state in DONE_STATES):
                return

    async def watch_cluster(self, *, last_event_id: str | None = None,
                            max_seconds: float | None = None,
                            reconnect: bool = True) -> AsyncIterator[WatchEvent]:
        params = _watch_params(False, max_seconds)
        while True:
            async for ev in self._events("/v1/watch/cluster", params, last_event_id):
                last_event_id = ev.id or last_event_id
                yield ev
            if not reconnect:
                return

    async def _events(self, path: str, params: dict[str, Any],
                      last_event_id: str | None) -> AsyncIterator[WatchEvent]:
        headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
        try:
            async with self._http.stream("GET", path, params=params, headers=headers,
                                         timeout=httpx.Timeout(10.0, read=60.0)) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    raise from_response(resp)
                parser = SSEParser()
                async for line in resp.aiter_lines():
                    ev = parser.feed(line)
                    if ev is not None:
                        yield ev
        except httpx.TransportError as exc:
            raise ApiUnreachable(self.base_url, str(exc) or type(exc).__name__) from exc
