"""The typed client package (peloton.sdk) against the API in process: the async client
over ASGI, the sync client over real HTTP (uvicorn in a thread)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
from api_tokens import ADMIN, ALICE
from fastapi import FastAPI
from listing_jobs import LabelledJobs, job_yaml
from served import served

from peloton.api.publisher import MemoryPublisher
from peloton.readmodel.store import Store
from peloton.sdk import (
    ApiUnreachable,
    AsyncClient,
    BadRequest,
    Client,
    Forbidden,
    Job,
    NotFound,
    Task,
    Unauthorized,
)


@pytest.fixture(autouse=True)
def fast_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PELOTON_WATCH_POLL_SECONDS", "0.05")
    monkeypatch.setenv("PELOTON_WATCH_MAX_SECONDS", "0.5")  # the client reconnects


@pytest.fixture
def url(app: FastAPI, loaded: Store) -> Iterator[str]:
    with served(app) as base:
        yield base


def test_sync_client_reads_pages_and_errors(url: str, store: Store) -> None:
    jobs = LabelledJobs()
    for i in range(7):
        jobs.add(f"team-{i}", 20_000 + i, {"team": "ml" if i % 2 else "web"})
    store.insert(jobs.rows_since(0))
    with Client(url, token=ADMIN) as api:
        job = api.get_job("job-bad")
        assert isinstance(job, Job) and job.state == "FAILED" and job.raw["job_id"] == "job-bad"
        page = api.list_jobs(label_selector={"team": "ml"}, limit=2)
        assert [j.job_id for j in page.items] == ["team-5", "team-3"] and page.next_cursor
        assert [j.job_id for j in api.iter_jobs(page_size=2, label_selector="team=ml")] == [
            "team-5", "team-3", "team-1"]
        assert len(list(api.iter_jobs(page_size=3))) == 12
        assert [j.job_id for j in api.iter_jobs(state=["failed", "SUCCEEDED"])] == [
            "job-bad", "job-ok"]
        tasks = list(api.iter_tasks("job-bad", page_size=1))
        assert [t.instance for t in tasks] == [0, 1] and isinstance(tasks[0], Task)
        assert tasks[1].history[-1].state == "FAILED"
        assert [t.instance for t in api.list_tasks("job-bad", state="FAILED").items] == [1]
        assert {h.host for h in api.hosts()} == {"h1", "h2"}
        assert "/prod/batch" in {p.pool for p in api.pools()}
        assert [u.update_id for u in api.updates("job-svc")]
        with pytest.raises(NotFound) as nf:
            api.get_job("nope")
        assert nf.value.status == 404 and "nope" in nf.value.error
        with pytest.raises(BadRequest) as bad:
            api.list_jobs(label_selector="a in ()")
        assert bad.value.details[0]["field"] == "label_selector"
        with pytest.raises(BadRequest) as bad:
            api.submit_job("name: x\ninstanceCount: -1\n")
        assert bad.value.details
    with Client(url, token="wrong") as api, pytest.raises(Unauthorized):
        api.hosts()
    with Client(url, token=ALICE) as api, pytest.raises(Forbidden):
        api.submit_job(job_yaml("x", {}, respool="/team-b"))
    with Client("http://127.0.0.1:9", timeout=2) as api, pytest.raises(ApiUnreachable):
        api.hosts()


def test_sync_watch_reconnects_without_loss(url: str, store: Store) -> None:
    """The server ends each stream after 0.5 s; the client resumes with Last-Event-ID."""
    expected = sum(len(t["history"]) for t in store.tasks_of_job("job-bad")) + 1
    with Client(url, token=ADMIN) as api:
        got = []
        for ev in api.watch_job("job-bad"):
            got.append(ev)
            if len(got) == expected:
                break
        assert [e.event for e in got].count("job") == 1
        more: list[object] = []
        done = threading.Event()

        def tail() -> None:  # nothing new comes: the client keeps reconnecting quietly
            with Client(url, token=ADMIN) as own:
                try:
                    for ev in own.watch_job("job-bad", last_event_id=got[-1].id):
                        more.append(ev)
                except ApiUnreachable:  # the server stops at the end of the test
                    return
            done.set()

        threading.Thread(target=tail, daemon=True).start()
        assert not done.wait(1.5) and more == []  # across reconnects, nothing repeated
        ended = list(api.watch_job("job-ok", until_done=True))
        assert ended[-1].event == "job" and ended[-1].data["state"] == "SUCCEEDED"


async def test_async_client(app: FastAPI, loaded: Store, publisher: MemoryPublisher) -> None:
    transport = httpx.ASGITransport(app=app)
    async with AsyncClient("http://api", token=ADMIN, transport=transport) as api:
        assert (await api.get_job("job-ok")).state == "SUCCEEDED"
        assert [j.job_id async for j in api.iter_jobs(page_size=2, owner="team-a",
                                                      state="RUNNING")] == ["job-svc"]
        assert [t.instance async for t in api.iter_tasks("job-bad", host="h1")] == [0, 1]
        job_id = await api.submit_job(
            {"name": "sdk", "instanceCount": 1, "respool": "/prod/batch",
             "defaultConfig": {"resource": {"cpuLimit": 1, "memLimitMb": 64},
                               "command": {"value": "true"}}}, job_id="sdk-1")
        assert job_id == "sdk-1" and publisher.events[-1].key == "sdk-1"
        evs = [e async for e in api.watch_job("job-ok", until_done=True)]
        assert evs[-1].data["state"] == "SUCCEEDED"
        with pytest.raises(NotFound):
            await api.kill_job("nope")
