"""Job and task filters and cursor pagination (peloton.api.listing,
peloton.readmodel.listing): the pure parsers by property, the routes on a real chdb
read model with jobs from the real job manager core."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from listing_jobs import LabelledJobs

from peloton.api.listing import (
    CursorError,
    Requirement,
    SelectorError,
    decode_cursor,
    encode_cursor,
    format_selector,
    parse_selector,
    parse_states,
)
from peloton.readmodel.listing import JobFilter, jobs_page
from peloton.readmodel.store import Store

# ---- the pure parsers ------------------------------------------------------------------
keys = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,20}", fullmatch=True)
values = st.from_regex(r"[A-Za-z0-9._-]{0,10}", fullmatch=True)
requirements = st.one_of(
    st.builds(lambda k, v: Requirement(k, "=", (v,)), keys, values),
    st.builds(lambda k, v: Requirement(k, "!=", (v,)), keys, values),
    st.builds(lambda k, vs, op: Requirement(k, op, tuple(vs)), keys,
              st.lists(values.filter(bool), min_size=1, max_size=4, unique=True),
              st.sampled_from(["in", "notin"])),
    st.builds(lambda k, op: Requirement(k, op), keys, st.sampled_from(["exists", "!exists"])),
)


@given(st.lists(requirements, max_size=6))
def test_selector_round_trips(reqs: list[Requirement]) -> None:
    assert parse_selector(format_selector(reqs)) == reqs


@given(st.text(max_size=80))
def test_selector_garbage_is_a_selector_error_or_a_selector(text: str) -> None:
    try:
        reqs = parse_selector(text)
    except SelectorError as exc:
        assert exc.problems
    else:  # what parses, formats to a selector that parses the same
        assert parse_selector(format_selector(reqs)) == reqs


def test_selector_examples() -> None:
    assert parse_selector(" team = ml , env in (prod, stage),!canary,gpu,tier!=test") == [
        Requirement("team", "=", ("ml",)), Requirement("env", "in", ("prod", "stage")),
        Requirement("canary", "!exists"), Requirement("gpu", "exists"),
        Requirement("tier", "!=", ("test",))]
    assert parse_selector("a==b") == [Requirement("a", "=", ("b",))]
    assert parse_selector("") == []
    with pytest.raises(SelectorError) as err:
        parse_selector("a in (),=x,b=c d,ok=1,k=v'")
    assert len(err.value.problems) == 4


@given(st.lists(st.one_of(st.integers(-(2**62), 2**62), st.text(max_size=20)), max_size=3))
def test_cursor_round_trips(key: list[int | str]) -> None:
    shape = [type(k) for k in key]
    assert decode_cursor(encode_cursor(key), shape) == key


@given(st.text(max_size=60))
def test_cursor_garbage_is_a_cursor_error(text: str) -> None:
    try:
        key = decode_cursor(text, (int, str))
    except CursorError:
        return
    assert isinstance(key[0], int) and isinstance(key[1], str)


def test_states_repeated_and_comma_separated() -> None:
    assert parse_states(["running,Pending", "RUNNING"], ("PENDING", "RUNNING")) == (
        ["RUNNING", "PENDING"], [])
    assert parse_states(["x"], ("A",))[1] == ["'x' is not one of A"]


# ---- the routes ------------------------------------------------------------------------
@pytest.fixture
def jobs(store: Store) -> LabelledJobs:
    js = LabelledJobs()
    js.add("ml-prod", 1_000, {"team": "ml", "env": "prod"}, owner="alice")
    js.add("ml-test", 2_000, {"team": "ml", "env": "test", "canary": "yes"}, owner="alice")
    js.add("web-prod", 3_000, {"team": "web", "env": "prod"}, owner="bob",
           respool="/prod/web")
    js.add("plain", 4_000, {}, owner="bob", respool="/dev", n=3)
    store.insert(js.rows_since(0))
    return js


async def ids(client: httpx.AsyncClient, query: str) -> list[str]:
    resp = await client.get("/v1/jobs?" + query)
    assert resp.status_code == 200, resp.text
    return [j["job_id"] for j in resp.json()["jobs"]]


async def test_job_filters(client: httpx.AsyncClient, jobs: LabelledJobs) -> None:
    assert await ids(client, "") == ["plain", "web-prod", "ml-test", "ml-prod"]
    assert await ids(client, "label_selector=team=ml") == ["ml-test", "ml-prod"]
    assert await ids(client, "label_selector=team!=ml") == ["plain", "web-prod"]
    assert await ids(client, "label_selector=env in (prod,stage)") == ["web-prod", "ml-prod"]
    assert await ids(client, "label_selector=env notin (prod)") == ["plain", "ml-test"]
    assert await ids(client, "label_selector=canary") == ["ml-test"]
    assert await ids(client, "label_selector=!canary,team") == ["web-prod", "ml-prod"]
    assert await ids(client, "owner=bob") == ["plain", "web-prod"]
    assert await ids(client, "pool=/prod/batch") == ["ml-test", "ml-prod"]
    assert await ids(client, "pool=prod&subpools=true") == ["web-prod", "ml-test", "ml-prod"]
    assert await ids(client, "pool=/prod") == []
    assert await ids(client, "submitted_from=2000&submitted_to=4000") == ["web-prod", "ml-test"]
    assert await ids(client, "state=pending,Succeeded") == [
        "plain", "web-prod", "ml-test", "ml-prod"]
    assert await ids(client, "state=RUNNING&state=FAILED") == []
    assert await ids(client, "owner=alice&label_selector=env=prod") == ["ml-prod"]


def test_selector_values_are_bound_parameters(store: Store, jobs: LabelledJobs) -> None:
    """Even past the parser (which refuses quotes), keys and values never become SQL."""
    evil = "ml' OR '1'='1"
    for req in (Requirement("team", "=", (evil,)), Requirement(evil, "exists"),
                Requirement("team", "in", ("ml", evil))):
        found, _ = jobs_page(store, JobFilter(selector=(req,)), None, 100)
        assert [j["job_id"] for j in found] == (
            ["ml-test", "ml-prod"] if req.op == "in" else [])


async def test_job_filters_refuse_garbage(client: httpx.AsyncClient,
                                          jobs: LabelledJobs) -> None:
    for query, field in [("state=bogus", "state"), ("state=running, failed", "state"),
                         ("state=" + "&state=".join(["RUNNING"] * 10), "state"),
                         ("label_selector=a in ()", "label_selector"),
                         ("label_selector=x=y=z", "label_selector"),
                         ("label_selector=k=' OR 1=1 --", "label_selector"),
                         ("cursor=bm9wZQ", "cursor"), ("cursor=!!!", "cursor"),
                         ("submitted_from=5&submitted_to=1", "submitted_to"),
                         ("subpools=true", "subpools"), ("limit=0", "limit")]:
        resp = await client.get("/v1/jobs?" + query)
        assert resp.status_code == 400, (query, resp.text)
        assert field in [d["field"] for d in resp.json()["details"]], (query, resp.json())


async def test_pages_are_stable_while_jobs_arrive(client: httpx.AsyncClient, store: Store,
                                                  jobs: LabelledJobs) -> None:
    for i in range(8):
        jobs.add(f"old-{i}", 500 + i * 10)
    store.insert(jobs.rows_since(12))
    before = await ids(client, "limit=1000")
    seen: list[str] = []
    cursor = None
    t = 10_000
    while True:
        q = "limit=3" + (f"&cursor={cursor}" if cursor else "")
        body = (await client.get("/v1/jobs?" + q)).json()
        seen += [j["job_id"] for j in body["jobs"]]
        n = len(jobs)  # newer jobs arrive between pages, one even at the same time
        jobs.add(f"new-{t}", t)
        jobs.add(f"new-{t}-same", int(body["jobs"][-1]["submitted_at"]) if body["jobs"] else t)
        store.insert(jobs.rows_since(n))
        t += 1000
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen))  # no duplicates
    older = [j for j in seen if not j.startswith("new-")]
    assert older == before  # nothing older than the first page skipped, order kept


async def test_task_filters_and_pages(client: httpx.AsyncClient, loaded: Store) -> None:
    async def tasks(query: str) -> tuple[list[int], str | None]:
        resp = await client.get("/v1/jobs/job-bad/tasks?" + query)
        assert resp.status_code == 200, resp.text
        return [t["instance"] for t in resp.json()["tasks"]], resp.json()["next_cursor"]

    assert await tasks("") == ([0, 1], None)
    assert await tasks("state=failed") == ([1], None)
    assert await tasks("state=SUCCEEDED,failed") == ([0, 1], None)
    assert await tasks("instances=1-5") == ([1], None)
    assert await tasks("instances=0,7&host=h1") == ([0], None)
    assert await tasks("host=h9") == ([], None)
    first, cursor = await tasks("limit=1")
    assert first == [0] and cursor
    assert await tasks(f"limit=1&cursor={cursor}") == ([1], None)
    full = (await client.get("/v1/jobs/job-bad/tasks?state=failed")).json()["tasks"][0]
    assert full["history"] and full["history"][-1]["state"] == "FAILED"
    for query in ("state=nope", "instances=a-b", "instances=3-1", "cursor=xyz"):
        resp = await client.get("/v1/jobs/job-bad/tasks?" + query)
        assert resp.status_code == 400, query
    assert (await client.get("/v1/jobs/nope/tasks?state=failed")).status_code == 404
