"""The web UI through the in-process app (no browser): open shells, protected fragments
rendered from the read model, the UI's own parameter checks, and the pure chart and data
helpers (property tests)."""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import given
from hypothesis import strategies as st

from peloton.api.ui import OPEN_PAGES
from peloton.api.ui.charts import line_chart
from peloton.api.ui.data import deficit, filter_jobs, thin
from peloton.api.ui.pages import parse_labels


async def test_shells_are_open_and_carry_no_data(ui_app: FastAPI) -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=ui_app),
                                 base_url="http://api") as anon:
        root = await anon.get("/ui")
        assert root.status_code == 307 and root.headers["location"] == "/ui/jobs"
        for path in sorted(OPEN_PAGES - {"/ui"}):
            r = await anon.get(path)
            assert r.status_code == 200, path
        shell = await anon.get("/ui/jobs")
        assert "script-src 'self';" in shell.headers["content-security-policy"]
        assert shell.headers["x-frame-options"] == "DENY"
        page = shell.text
        assert 'src="/ui/static/ui.js"' in page and "job-ok" not in page
        js = (await anon.get("/ui/static/ui.js")).text
        assert "sessionStorage" in js and "Authorization" in js
        assert (await anon.get("/ui/static/other.js")).status_code == 401  # not open
        for frag in ("/ui/f/jobs", "/ui/f/whoami", "/ui/f/hosts", "/ui/f/job?id=job-ok"):
            r = await anon.get(frag)
            assert r.status_code == 401, frag
            assert r.json()["error"] == "missing bearer token"
        bad = await anon.get("/ui/f/jobs", headers={"Authorization": "Bearer nope-nope"})
        assert bad.status_code == 401


async def test_ui_is_not_part_of_the_openapi(admin: httpx.AsyncClient) -> None:
    paths = (await admin.get("/openapi.json")).json()["paths"]
    assert not [p for p in paths if p.startswith("/ui")]


async def test_whoami_names_the_token_user(admin: httpx.AsyncClient) -> None:
    assert (await admin.get("/ui/f/whoami")).json() == {"user": "root", "admin": True,
                                                        "pools": []}


def _rows(html: str, table: str) -> list[str]:
    body = html.split(f'<table class="{table}">', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr>(.*?)</tr>", body, re.S)[1:]


async def test_jobs_page_filters(admin: httpx.AsyncClient) -> None:
    page = (await admin.get("/ui/f/jobs")).text
    for job in ("job-ok", "job-bad", "job-wait", "job-rej", "job-svc"):
        assert f'href="/ui/job?id={job}"' in page
    assert "succeeded 2" in page  # job-ok's progress
    failed = (await admin.get("/ui/f/jobs", params={"state": "failed"})).text
    assert len(_rows(failed, "jobs")) == 1 and "job-bad" in failed
    assert '<option selected>FAILED</option>' in failed
    in_pool = (await admin.get("/ui/f/jobs", params={"pool": "/prod"})).text
    assert "job-ok" in in_pool and "job-rej" not in in_pool  # job-rej asked for /nope
    nobody = (await admin.get("/ui/f/jobs", params={"owner": "nobody"})).text
    assert "No jobs match." in nobody
    labelled = (await admin.get("/ui/f/jobs", params={"label": "x=y"})).text
    assert "No jobs match." in labelled


@pytest.mark.parametrize("query, field", [
    ({"color": "red"}, "color"), ({"state": "BORED"}, "state"), ({"label": "novalue"}, "label"),
    ({"limit": "0"}, "limit"), ({"limit": "many"}, "limit")])
async def test_bad_parameters_are_400_with_the_field(
        admin: httpx.AsyncClient, query: dict[str, str], field: str) -> None:
    r = await admin.get("/ui/f/jobs", params=query)
    assert r.status_code == 400
    assert [d["field"] for d in r.json()["details"]] == [field]


async def test_repeated_and_missing_parameters_are_400(admin: httpx.AsyncClient) -> None:
    r = await admin.get("/ui/f/jobs?state=FAILED&state=RUNNING")
    assert r.status_code == 400 and r.json()["error"] == "repeated query parameter"
    r = await admin.get("/ui/f/job")
    assert r.status_code == 400 and r.json()["details"] == [{"field": "id",
                                                             "message": "required"}]


async def test_job_page_shows_tasks_history_reasons_and_log_buttons(
        admin: httpx.AsyncClient) -> None:
    page = (await admin.get("/ui/f/job", params={"id": "job-bad"})).text
    assert "FAILED" in page and 'data-kill' not in page  # over: no kill button
    assert 'data-logs="job-bad" data-instance="1" data-stream="stderr"' in page
    assert "state history" in page and "RUNNING" in page
    waiting = (await admin.get("/ui/f/job", params={"id": "job-wait"})).text
    assert 'data-kill="job-wait"' in waiting
    assert "pool over entitlement" in waiting  # the task's reason
    # why it waits, as the API answers it (peloton.api.whypending): place in the queue
    assert "place 1 of 1 in the pool's admission queue" in waiting
    assert "POOL_OVER_ENTITLEMENT" in waiting  # its preemption
    missing = await admin.get("/ui/f/job", params={"id": "no-such-job"})
    assert missing.status_code == 404 and "no-such-job" in missing.json()["error"]


async def test_pools_page_is_a_tree_with_every_figure(admin: httpx.AsyncClient) -> None:
    page = (await admin.get("/ui/f/pools")).text
    order = [m for m in re.findall(r'href="/ui/pool\?path=([^"]+)"', page)]
    assert order == ["/", "/dev", "/prod", "/prod/batch"]
    assert "padding-left: 2.8em" in page  # /prod/batch at depth 2
    for header in ("Reservation", "Limit", "Entitlement", "Allocation", "Demand"):
        assert f"<th>{header}</th>" in page


async def test_pool_page_charts_entitlement_against_allocation(
        admin: httpx.AsyncClient) -> None:
    page = (await admin.get("/ui/f/pool", params={"path": "/prod/batch"})).text
    assert "4 cycles shown" in page
    assert page.count("<svg") == 2  # cpu and memory have figures; disk and gpu none
    for series in ("entitlement", "allocation", "demand"):
        assert f'class="line {series}"' in page
    assert (await admin.get("/ui/f/pool", params={"path": "/nope"})).status_code == 404
    r = await admin.get("/ui/f/pool", params={"path": "/prod", "minutes": "99999"})
    assert r.status_code == 400


async def test_hosts_page_shows_used_free_and_runs(admin: httpx.AsyncClient) -> None:
    page = (await admin.get("/ui/f/hosts")).text
    rows = _rows(page, "hosts")
    h1 = next(r for r in rows if r.strip().startswith("<td>h1"))
    assert "cpu 2<br>" in h1  # used = capacity 8 - free 6
    assert "LOST" in next(r for r in rows if r.strip().startswith("<td>h2"))


async def test_preemptions_page_names_rule_and_pool_deficit(
        admin: httpx.AsyncClient) -> None:
    page = (await admin.get("/ui/f/preemptions")).text
    row = _rows(page, "preemptions")[0]
    assert "job-wait" in row and "POOL_OVER_ENTITLEMENT" in row
    assert "cpu +4" in row  # allocation 8 over entitlement 4 in the cycle at t=1 500
    assert "cpu 8/4" in row  # the resource manager's detail


async def test_dead_letters_and_submit_pages(admin: httpx.AsyncClient) -> None:
    page = (await admin.get("/ui/f/dead-letters")).text
    assert "not Avro single-object encoding" in page and "jobmgr" in page
    form = (await admin.get("/ui/f/submit")).text
    assert 'id="submit-form"' in form and "owner: root" in form


async def test_rendered_text_is_escaped(admin: httpx.AsyncClient) -> None:
    r = await admin.get("/ui/f/jobs", params={"owner": "<script>x</script>"})
    assert "<script>x" not in r.text and "&lt;script&gt;" in r.text


def test_label_selector_parsing() -> None:
    assert parse_labels(" a=b , c = d ,") == {"a": "b", "c": "d"}
    assert parse_labels("") == {}


def test_filter_jobs_matches_pool_subtrees_and_every_label() -> None:
    jobs = [{"owner": "a", "respool": "/p/q", "labels": {"k": "v", "z": "1"}},
            {"owner": "b", "respool": "/pq", "labels": {"k": "v"}}]
    assert filter_jobs(jobs, pool="/p") == jobs[:1]
    assert filter_jobs(jobs, pool="/") == jobs
    assert filter_jobs(jobs, labels={"k": "v", "z": "1"}) == jobs[:1]
    assert filter_jobs(jobs, owner="b") == jobs[1:]


_POINT = st.tuples(st.integers(0, 10**13), st.floats(-1e6, 1e9, allow_nan=False))


@given(st.lists(st.tuples(st.text(max_size=12), st.lists(_POINT, max_size=30)),
                max_size=4),
       st.integers(200, 1200), st.integers(120, 600))
def test_chart_coordinates_stay_in_the_plot(series: list[tuple[str, list[tuple[int, float]]]],
                                            width: int, height: int) -> None:
    svg = line_chart([(name, "c", pts) for name, pts in series], width=width,
                     height=height, title="<t>")
    assert svg.startswith("<svg") and svg.endswith("</svg>") and "<t>" not in svg
    for pts in re.findall(r'points="([^"]*)"', svg):
        for pair in pts.split():
            x, y = map(float, pair.split(","))
            assert 0 <= x <= width and 0 <= y <= height


@given(st.lists(st.integers(), max_size=200), st.integers(2, 50))
def test_thin_keeps_ends_order_and_bound(values: list[int], points: int) -> None:
    rows = [{"i": i, "v": v} for i, v in enumerate(values)]
    out = thin(rows, points)
    assert len(out) <= points and (out == rows or len(out) == points)
    if rows:
        assert out[0] is rows[0] and out[-1] is rows[-1]
    assert [r["i"] for r in out] == sorted({r["i"] for r in out})


@given(st.dictionaries(st.sampled_from(["cpu", "memory"]), st.floats(0, 1e6)),
       st.dictionaries(st.sampled_from(["cpu", "memory"]), st.floats(0, 1e6)))
def test_deficit_is_the_positive_excess(alloc: dict[str, float],
                                        ent: dict[str, float]) -> None:
    out = deficit(alloc, ent)
    for kind, v in out.items():
        assert v > 1e-9 and v == alloc[kind] - ent.get(kind, 0.0)
    for kind in alloc.keys() - out.keys():
        assert alloc[kind] - ent.get(kind, 0.0) <= 1e-9
