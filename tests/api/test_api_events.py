"""The event streams (peloton.api.events): Server-Sent Events of a job and of the
cluster on a real chdb read model, in process and over real HTTP (uvicorn), with
Last-Event-ID resume, keepalives, auth and bad input."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from api_tokens import ADMIN, client_as, headers
from fastapi import FastAPI
from listing_jobs import LabelledJobs
from served import served

from peloton.api import events
from peloton.readmodel.store import Store
from peloton.sdk.models import SSEParser, WatchEvent


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PELOTON_WATCH_POLL_SECONDS", "0.05")


def parse(text: str) -> list[WatchEvent]:
    parser, out = SSEParser(), []
    for line in text.splitlines():
        ev = parser.feed(line)
        if ev is not None:
            out.append(ev)
    if (ev := parser.feed("")) is not None:
        out.append(ev)
    return out


async def test_job_stream_replays_history_then_resumes(app: FastAPI, loaded: Store) -> None:
    async with client_as(app, ADMIN) as c:
        resp = await c.get("/v1/watch/jobs/job-bad?max_seconds=0.3")
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        assert resp.text.startswith("retry: 2000\n\n")
        evs = parse(resp.text)
        history = [h for t in loaded.tasks_of_job("job-bad") for h in t["history"]]
        tasks = [e for e in evs if e.event == "task"]
        assert len(tasks) == len(history) and len(history) > 5
        assert sorted((e.data["instance"], e.data["run"], e.data["state"]) for e in tasks) == \
            sorted((t["instance"], h["run"], h["state"])
                   for t in loaded.tasks_of_job("job-bad") for h in t["history"])
        assert [e.data["state"] for e in evs if e.event == "job"] == ["FAILED"]
        assert all(e.id for e in evs) and len({e.id for e in evs}) == len(evs)
        for cut in (0, 4, len(evs) - 1):  # resume: exactly the events after the id
            again = await c.get("/v1/watch/jobs/job-bad?max_seconds=0.2",
                                headers={"Last-Event-ID": str(evs[cut].id)})
            assert [(e.event, e.data) for e in parse(again.text)] == \
                [(e.event, e.data) for e in evs[cut + 1:]]


async def test_until_done_ends_the_stream(app: FastAPI, loaded: Store) -> None:
    async with client_as(app, ADMIN) as c:
        started = time.monotonic()
        resp = await c.get("/v1/watch/jobs/job-ok?until_done=true&max_seconds=60")
        assert time.monotonic() - started < 10
        assert parse(resp.text)[-1].data["state"] == "SUCCEEDED"


async def test_watch_refuses_garbage(app: FastAPI, loaded: Store) -> None:
    async with client_as(app, None) as anonymous:
        assert (await anonymous.get("/v1/watch/cluster")).status_code == 401
        assert (await anonymous.get("/v1/watch/jobs/job-ok")).status_code == 401
    async with client_as(app, ADMIN) as c:
        assert (await c.get("/v1/watch/jobs/nope")).status_code == 404
        for bad in ("garbage", "e30x", "W10", "eyJhIjpbMV19"):
            resp = await c.get("/v1/watch/cluster", headers={"Last-Event-ID": bad})
            assert resp.status_code == 400, bad
            assert resp.json()["details"][0]["field"] == "Last-Event-ID"
        for q in ("max_seconds=0", "max_seconds=x", "until_done=maybe", "since=1"):
            assert (await c.get(f"/v1/watch/jobs/job-ok?{q}")).status_code == 400, q


async def test_keepalive_comments(app: FastAPI, loaded: Store) -> None:
    async with client_as(app, ADMIN) as c:
        resp = await c.get("/v1/watch/cluster?max_seconds=0.5")
    assert ": keepalive\n\n" in resp.text and parse(resp.text) == []  # from now: no backlog


def _reader(url: str, path: str, got: list[WatchEvent], stop: threading.Event) -> None:
    with httpx.stream("GET", url + path, headers=headers(ADMIN), timeout=30) as resp:
        assert resp.status_code == 200
        parser = SSEParser()
        for line in resp.iter_lines():
            ev = parser.feed(line)
            if ev is not None:
                got.append(ev)
            if stop.is_set():
                return  # closes the connection mid-stream


@pytest.fixture
def url(app: FastAPI, loaded: Store) -> Iterator[str]:
    with served(app) as base:
        yield base


def _wait(cond: object, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_streams_deliver_new_facts_live(url: str, store: Store) -> None:
    jobs = LabelledJobs()
    jobs.add("live", 50_000, n=2)
    first = jobs.rows_since(0)
    store.insert([r for r in first if r.table != "task_events"])
    job_events: list[WatchEvent] = []
    cluster_events: list[WatchEvent] = []
    stop = threading.Event()
    readers = [threading.Thread(target=_reader, args=(url, path, got, stop), daemon=True)
               for path, got in (("/v1/watch/jobs/live", job_events),
                                 ("/v1/watch/cluster", cluster_events))]
    for r in readers:
        r.start()
    _wait(lambda: any(e.event == "job" for e in job_events), "the job's state")
    time.sleep(0.3)  # the cluster stream has started from 'now'
    store.insert([r for r in first if r.table == "task_events"])  # tasks arrive later
    _wait(lambda: sum(e.event == "task" for e in job_events) == 2, "the task transitions")
    n = len(jobs)
    jobs.add("later", 60_000)
    jobs.bus.add("HostStateChanged", "h7", {
        "host": "h7", "at": 60_100, "state": "DRAINING", "previous_state": "UP",
        "present": True, "labels": {}, "reason": "kernel upgrade", "deadline_ms": None,
        "request": "r1"})
    store.insert(jobs.rows_since(n))
    _wait(lambda: {(e.event, e.data.get("job_id") or e.data.get("host"))
                   for e in cluster_events} >= {("job", "later"), ("host", "h7")},
          "the cluster's new job and host state")
    assert all(e.data.get("job_id") != "job-ok" for e in cluster_events)  # none older
    host = next(e for e in cluster_events if e.event == "host")
    assert host.data["state"] == "DRAINING" and host.data["reason"] == "kernel upgrade"
    assert [e.data["instance"] for e in job_events if e.event == "task"] == [0, 1]
    stop.set()  # the readers hang up at the next line (a keepalive at the latest)
    for r in readers:
        r.join(10)
        assert not r.is_alive()
    _wait(lambda: not polls_since(0.5), "the server to stop polling after the hang-up")


polls: list[float] = []


def polls_since(seconds: float) -> list[float]:
    return [t for t in polls if t > time.monotonic() - seconds]


@pytest.fixture(autouse=True)
def counted_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Record when the job stream polls; keepalives every 0.2 s."""
    real = events.poll_job

    def poll_job(*args: object) -> list[events.Item]:
        polls.append(time.monotonic())
        return real(*args)  # type: ignore[arg-type]

    polls.clear()
    monkeypatch.setattr(events, "poll_job", poll_job)
    monkeypatch.setattr(events, "KEEPALIVE_SECONDS", 0.2)


async def test_until_done_sends_a_terminal_state_that_lands_just_after_a_poll() -> None:
    """The race the minicluster met once (CI, 2026-11-29): the job's SUCCEEDED row was
    written after a poll that found nothing and before the done check; the stream ended
    without it. `done` is now asked before each poll."""
    from peloton.api.events import stream

    state = {"done": False}
    row = ("jobs/job-events/0", "job", (7, 0), {"job_id": "j", "state": "SUCCEEDED"})

    def poll(cursor: dict) -> list:
        if not state["done"]:
            state["done"] = True  # the terminal row lands right after this poll
            return []
        return [] if cursor.get(row[0]) == row[2] else [row]

    async def done() -> bool:
        return state["done"]

    class Connected:
        async def is_disconnected(self) -> bool:
            return False

    text = "".join([part async for part in stream(Connected(), {}, poll, 5.0, 0.0, done)])
    assert "event: job" in text and '"SUCCEEDED"' in text


def test_a_poll_that_reads_a_jobs_end_also_reads_the_task_ends_before_it(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race a clean-clone CI met (2026-11-30): the materializer's insert of a task's
    and its job's SUCCEEDED fell between the poll's two queries; read tasks first, the
    stream sent the job's end before the task's."""
    from event_bodies import job_state_changed, task_state_changed

    from peloton.readmodel.projector import SourcePos, project

    end = [*project("TaskStateChanged", task_state_changed(
               "j", (0, "SUCCEEDED"), previous="RUNNING", at=10), SourcePos("job-events", 0, 1)),
           *project("JobStateChanged", job_state_changed(
               "j", "SUCCEEDED", "RUNNING", {"SUCCEEDED": 1}, at=10),
               SourcePos("job-events", 0, 2))]
    real = store._query

    def query_then_insert(sql: str, **params: object) -> list:
        rows = real(sql, **params)
        if end:  # the insert lands right after the poll's first query
            store.insert(end)
            end.clear()
        return rows

    monkeypatch.setattr(store, "_query", query_then_insert)
    cursor: events.Cursor = {}
    sent = []
    for _ in range(3):
        for key, name, pos, data in events.poll_job(store, "j", cursor):
            cursor[key] = pos
            sent.append((name, data["state"]))
    assert sent == [("task", "SUCCEEDED"), ("job", "SUCCEEDED")]
