"""The web UI's routes: open page shells and protected HTML fragments (see the package
docstring for why, and for how the bearer token travels).

Shells: GET /ui (redirects to /ui/jobs), /ui/login and one per page in `PAGES`; the
script (static/ui.js) loads /ui/f/<page> with the query string of the shell's URL.
Fragments (GET /ui/f/<page>; the auth middleware guards them) and their parameters:
- jobs: state, owner, pool (the pool or below), label (k=v[,k=v...]), limit (1..1000);
- job: id (required): summary, kill button, tasks with reasons and state history, the
  job's preemptions; logs load on demand from the API's logs endpoint;
- submit: the paste-YAML form (it posts to POST /v1/jobs);
- pools: the pool tree with reservation, limit, entitlement, allocation and demand per
  resource kind; pool: path (required), minutes (1..1440, default 30): entitlement vs
  allocation (and demand) over time per resource kind, as SVG;
- hosts: state, maintenance, capacity, free and used resources, the runs on each;
- preemptions: victim, preemptor, rule (reason code), detail, pool deficit;
- dead-letters; whoami: the token's user (the login page's check).
An unknown or repeated parameter, or a bad value, is 400 in the API's error format.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import jinja2
from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from markupsafe import Markup

from peloton.api import auth
from peloton.api.errors import BadRequest, NotFound
from peloton.api.pools import merge_pools
from peloton.api.ui import data
from peloton.api.ui.charts import line_chart
from peloton.api.whypending import annotate_tasks, job_pending
from peloton.model.resources import KINDS
from peloton.model.taskstate import TERMINAL_JOB, JobState
from peloton.readmodel.store import Store

__all__ = ["ui_router", "OPEN_PAGES", "PAGES"]

Db = Callable[..., Awaitable[Any]]

_HERE = Path(__file__).parent
PAGES = ("jobs", "job", "submit", "pools", "pool", "hosts", "preemptions", "dead-letters")
_STATIC = {"ui.js": "text/javascript", "ui.css": "text/css"}
OPEN_PAGES = frozenset({"/ui", "/ui/login", *(f"/ui/{p}" for p in PAGES),
                        *(f"/ui/static/{name}" for name in _STATIC)})
JOB_STATES = ("SUBMITTED", "REJECTED", *(s.value for s in JobState))
_NAV = (("jobs", "Jobs"), ("submit", "Submit"), ("pools", "Pools"), ("hosts", "Hosts"),
        ("preemptions", "Preemptions"), ("dead-letters", "Dead letters"))
# the token sits in sessionStorage: no script but ui.js, no framing, no referrer
_HEADERS = {"Content-Security-Policy": "default-src 'self'; script-src 'self'; "
            "style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
            "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
_LIVE = {"jobs": 3000, "job": 3000, "pools": 5000, "pool": 5000, "hosts": 5000,
         "preemptions": 10000, "dead-letters": 10000}


def _ts(ms: Any) -> str:
    if ms is None or ms == 0:
        return "—"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(int(ms) / 1000)) + (
        f".{int(ms) % 1000:03d}")


def _num(v: Any) -> str:
    if v is None:
        return "—"
    f = float(v)
    if f >= 1e12:  # the resource manager's "no limit"
        return "∞"
    return f"{f:.0f}" if f == int(f) else f"{f:.2f}"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(_HERE / "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["ts"] = _ts
    env.filters["num"] = _num
    env.globals.update(nav=_NAV, kinds=KINDS, job_states=JOB_STATES,
                       ended={"REJECTED", *(s.value for s in TERMINAL_JOB)})
    return env


def _params(request: Request, allowed: Mapping[str, bool]) -> dict[str, str]:
    """The query as a dict; 400 for unknown, repeated or missing-required names
    (`allowed`: name -> required)."""
    q = request.query_params
    unknown = sorted({k for k in q if k not in allowed})
    if unknown:
        raise BadRequest("unknown query parameter", [
            {"field": k[:64], "message": "not a parameter of this page (expected: "
             f"{', '.join(sorted(allowed)) or 'none'})"} for k in unknown[:10]])
    repeated = sorted({k for k in q if len(q.getlist(k)) > 1})
    if repeated:
        raise BadRequest("repeated query parameter",
                         [{"field": k, "message": "give it once"} for k in repeated])
    missing = [k for k, req in allowed.items() if req and not q.get(k, "").strip()]
    if missing:
        raise BadRequest("invalid request",
                         [{"field": k, "message": "required"} for k in missing])
    return {k: q[k].strip() for k in q}


def _int(params: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    raw = params.get(name, "")
    if not raw:
        return default
    try:
        v = int(raw)
    except ValueError:
        v = lo - 1
    if not lo <= v <= hi:
        raise BadRequest("invalid request", [{"field": name, "message":
                                              f"an integer from {lo} to {hi}"}])
    return v


def parse_labels(raw: str) -> dict[str, str]:
    """'k=v,k2=v2' as a dict; 400 for a term without '=' or with an empty key."""
    out: dict[str, str] = {}
    bad = []
    for term in (t.strip() for t in raw.split(",")):
        if not term:
            continue
        key, eq, value = term.partition("=")
        if not eq or not key.strip():
            bad.append(term)
        else:
            out[key.strip()] = value.strip()
    if bad:
        raise BadRequest("invalid request", [
            {"field": "label", "message": f"{b[:100]!r}: use key=value"} for b in bad[:10]])
    return out


def _tree(pools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pools in depth-first order with their depth (children sorted by path)."""
    children: dict[str | None, list[dict[str, Any]]] = {}
    paths = {p["pool"] for p in pools}
    for p in pools:
        parent = p.get("parent") if p.get("parent") in paths else None
        children.setdefault(parent, []).append(p)
    out: list[dict[str, Any]] = []

    def walk(parent: str | None, depth: int) -> None:
        for p in sorted(children.get(parent, []), key=lambda x: x["pool"]):
            out.append({**p, "depth": depth})
            if p["pool"] != parent:
                walk(p["pool"], depth + 1)

    walk(None, 0)
    return out


def _progress(job: Mapping[str, Any]) -> list[tuple[str, int, float]]:
    """(state, count, percent of the instances) per task state, for the bar."""
    counts = job.get("task_counts") or {}
    total = max(int(job.get("instance_count") or 0), sum(counts.values()), 1)
    return [(s, int(n), 100.0 * n / total) for s, n in sorted(counts.items()) if n]


def _job_view(store: Store, job_id: str) -> tuple[Any, Any, Any] | None:
    """A job with its `pending` summary, its tasks each with `pending` (why it waits:
    peloton.api.whypending, as the API answers) and its preemptions."""
    found = store.get_job(job_id)
    if found is None:
        return None
    job = job_pending(store, found)
    tasks = annotate_tasks(store, job, store.tasks_of_job(job_id))
    return job, tasks, store.preemptions(job_id, None, 100)


def ui_router(store: Store, db: Db, clock: Callable[[], int]) -> APIRouter:
    """The shells and fragments over one store (`db` runs a store call in a thread)."""
    env = _env()
    router = APIRouter(include_in_schema=False)

    def html(template: str, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(template).render(**ctx), headers=_HEADERS)

    # ---- open: shells and static files -------------------------------------------------
    @router.get("/ui")
    async def ui_root() -> RedirectResponse:
        return RedirectResponse("/ui/jobs", status_code=307)

    @router.get("/ui/login")
    async def login() -> HTMLResponse:
        return html("login.html", page="login", live=0)

    for page in PAGES:
        def shell(page: str = page) -> Callable[[], Awaitable[HTMLResponse]]:
            async def show() -> HTMLResponse:
                return html("shell.html", page=page, live=_LIVE.get(page, 0))
            return show
        router.add_api_route(f"/ui/{page}", shell(), methods=["GET"],
                             response_class=HTMLResponse, name=f"ui_{page}")

    @router.get("/ui/static/{name}")
    async def static(name: str) -> FileResponse:
        if name not in _STATIC:
            raise NotFound(f"no static file {name[:100]}")
        return FileResponse(_HERE / "static" / name, media_type=_STATIC[name],
                            headers={"Cache-Control": "no-cache"})

    # ---- protected: fragments ----------------------------------------------------------
    @router.get("/ui/f/whoami")
    async def whoami(request: Request) -> dict[str, Any]:
        _params(request, {})
        who = auth.principal(request)
        return {"user": who.name, "admin": who.admin, "pools": sorted(who.pools)}

    async def pool_list() -> list[dict[str, Any]]:
        return merge_pools(await db(store.pools), await db(store.pool_configs))

    @router.get("/ui/f/jobs")
    async def jobs(request: Request) -> HTMLResponse:
        p = _params(request, {"state": False, "owner": False, "pool": False,
                              "label": False, "limit": False})
        state = p.get("state", "").upper()
        if state and state not in JOB_STATES:
            raise BadRequest("invalid request", [{"field": "state", "message":
                                                  f"one of {', '.join(JOB_STATES)}"}])
        limit = _int(p, "limit", 200, 1, 1000)
        labels = parse_labels(p.get("label", ""))
        # owner, pool and label are filtered here: read a wider window for them
        wide = any(p.get(k) for k in ("owner", "pool", "label"))
        found = await db(store.list_jobs, 1000 if wide else limit, state or None)
        shown = data.filter_jobs(found, p.get("owner", ""), p.get("pool", ""),
                                 labels)[:limit]
        pools = [x["pool"] for x in await pool_list()]
        return html("jobs.html", jobs=shown, f=p, state=state, pools=pools,
                    progress=_progress, limit=limit)

    @router.get("/ui/f/job")
    async def job(request: Request) -> HTMLResponse:
        p = _params(request, {"id": True})
        view = await db(_job_view, store, p["id"])
        if view is None:
            raise NotFound(f"job {p['id'][:128]} not found (it may still be in flight)")
        found, tasks, preempted = view
        return html("job.html", job=found, tasks=tasks, preempted=preempted,
                    progress=_progress(found))

    @router.get("/ui/f/submit")
    async def submit(request: Request) -> HTMLResponse:
        _params(request, {})
        who = auth.principal(request)
        pools = [x["pool"] for x in await pool_list()]
        default = "/default" if "/default" in pools or not pools else (
            [x for x in pools if x != "/"] or pools)[0]
        return html("submit.html", pools=pools, who=who, default_pool=default)

    @router.get("/ui/f/pools")
    async def pools(request: Request) -> HTMLResponse:
        _params(request, {})
        return html("pools.html", pools=_tree(await pool_list()))

    @router.get("/ui/f/pool")
    async def pool(request: Request) -> HTMLResponse:
        p = _params(request, {"path": True, "minutes": False})
        minutes = _int(p, "minutes", 30, 1, 1440)
        path = p["path"]
        known = {x["pool"]: x for x in await pool_list()}
        if path not in known:
            raise NotFound(f"pool {path[:200]} not found")
        now = clock()
        hist = await db(data.pool_history, store, path, now - minutes * 60_000, now)
        charts = []
        for kind in KINDS:
            if not any(h["entitlement"].get(kind) or h["allocation"].get(kind)
                       or h["demand"].get(kind) for h in hist):
                continue
            series = [(name, name, [(h["at"], h[name].get(kind, 0.0)) for h in hist])
                      for name in ("entitlement", "allocation", "demand")]
            charts.append((kind, Markup(line_chart(
                series, title=f"{path} {kind}",
                unit="MiB" if kind in ("memory", "disk") else kind))))
        return html("pool.html", pool=known[path], path=path, minutes=minutes,
                    charts=charts, cycles=len(hist))

    @router.get("/ui/f/hosts")
    async def hosts(request: Request) -> HTMLResponse:
        _params(request, {})
        found = await db(store.hosts)
        for h in found:
            free = h.get("free") or {}
            h["used"] = {k: max(0.0, float(c) - float(free.get(k, c)))
                         for k, c in (h.get("capacity") or {}).items()} if free else {}
        return html("hosts.html", hosts=found)

    @router.get("/ui/f/preemptions")
    async def preemptions(request: Request) -> HTMLResponse:
        p = _params(request, {"limit": False})
        rows = await db(data.preemptions, store, _int(p, "limit", 200, 1, 1000))
        return html("preemptions.html", rows=rows)

    @router.get("/ui/f/dead-letters")
    async def dead_letters(request: Request) -> HTMLResponse:
        p = _params(request, {"limit": False})
        rows = await db(store.dead_letters, _int(p, "limit", 100, 1, 1000))
        return html("dead_letters.html", rows=rows)

    return router
