"""Every Grafana dashboard query runs against a real chdb read model.

The dashboards (charts/peloton/dashboards/*.json) use the grafana-clickhouse-datasource
plugin's raw SQL. Here each panel's and variable's SQL gets its macros expanded exactly as
the plugin's backend does (pkg/macros: `$__timeFilter(c)` -> `c >= toDateTime(from) AND
c <= toDateTime(to)`, `$__timeInterval(c)` -> `toStartOfInterval(toDateTime(c), INTERVAL n
second)`, ...) and its template variables as Grafana does, then runs on a chdb store filled
through the real projector with the read-model scenario (tests/readmodel/readmodel_scenario.py)
plus host offers over time, a job whose id holds a quote, a backslash and a semicolon, and
the preemptions of a real resource manager run (tests/resmgr's Sim). Results are checked
against the store's own queries (the API's answers), not just for running.

Variables are taken safely: every reference in SQL is `decodeURLComponent('${v:percentencode}')`
(a multi-value one split from Grafana's `{a,b}` form). Grafana's percentencode is
encodeURIComponent plus `!'()*`, so what lands between the quotes is only [A-Za-z0-9-_.~%]:
no value can close the string literal or smuggle a backslash. (`${v:singlequote}` escapes a
quote with a backslash but leaves a backslash alone, and `${v:sqlstring}` doubles quotes
but leaves backslashes: in ClickHouse, where a backslash escapes, a value with a backslash
breaks out of either.) The tests below render hostile values the way Grafana would and run them.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "readmodel"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "resmgr"))

from readmodel_scenario import RES, Bus, full_scenario, res, submit  # noqa: E402
from test_resmgr_service_cycle import two_pools  # noqa: E402

from peloton.jobmgr.domain.book import JobBook  # noqa: E402
from peloton.readmodel.store import Store  # noqa: E402

DASHBOARDS = Path(__file__).resolve().parents[2] / "charts" / "peloton" / "dashboards"
PLUGIN = "grafana-clickhouse-datasource"

# The dashboard time range and interval every query is expanded with (the scenario's
# events happen between 1 s and 9 s after the epoch).
FROM_MS, TO_MS, INTERVAL_MS = 0, 20_000, 1_000

# The columns each query must return: (dashboard uid, panel title or variable name).
EXPECTED: dict[tuple[str, str], list[str]] = {
    ("peloton-overview", "Jobs by state"): ["state", "jobs"],
    ("peloton-overview", "Tasks by state"): ["state", "tasks"],
    ("peloton-overview", "Dead letters in range"): ["dead_letters"],
    ("peloton-overview", "Tasks by state over time"): ["t", "state", "tasks"],
    ("peloton-overview", "Task transitions"): ["t", "state", "transitions"],
    ("peloton-overview", "Jobs"): ["job_id", "name", "owner", "type", "respool", "instances",
                                   "state", "submitted", "updated"],
    ("peloton-overview", "Hosts by state"): ["state", "hosts"],
    ("peloton-overview", "Hosts"): ["host", "state", "last_heartbeat", "running", "free_cpu",
                                    "free_memory_mb", "lost_reason"],
    ("peloton-overview", "Dead letters by service"): ["t", "service", "dead_letters"],
    ("peloton-overview", "Recent dead letters"): ["time", "service", "source_topic",
                                                  "partition", "offset", "reason", "key",
                                                  "value_size"],
    ("peloton-pools", "Pools (newest entitlement cycle, ${resource})"): [
        "pool", "parent", "cycle", "reservation", "limit", "entitlement", "allocation",
        "demand"],
    ("peloton-pools", "Entitlement by pool (${resource})"): ["t", "pool", "entitlement"],
    ("peloton-pools", "Allocation by pool (${resource})"): ["t", "pool", "allocation"],
    ("peloton-pools", "${pool}: entitlement vs allocation vs demand (${resource})"): [
        "t", "entitlement", "allocation", "demand", "reservation", "limit"],
    ("peloton-pools", "$pool"): ["pool"],
    ("peloton-job", "Job ${job_id}"): ["job_id", "name", "owner", "type", "respool",
                                       "instances", "priority", "preemptible", "state",
                                       "previous_state", "reasons", "submitted", "updated",
                                       "kill_requested"],
    ("peloton-job", "Tasks by state"): ["state", "tasks"],
    ("peloton-job", "Task transitions"): ["t", "state", "transitions"],
    ("peloton-job", "Tasks"): ["instance", "run", "state", "host", "reason", "exit_code",
                               "failures", "updated", "sandbox"],
    ("peloton-job", "Task events"): ["time", "instance", "run", "previous_state", "state",
                                     "host", "reason", "exit_code", "failures"],
    ("peloton-job", "$job_id"): ["job_id"],
    ("peloton-scheduling", "Ready → placed (p50, p99)"): ["t", "p50", "p99"],
    ("peloton-scheduling", "Submit → RUNNING (p50, p99)"): ["t", "p50", "p99"],
    ("peloton-scheduling", "Slowest placements"): ["placed", "job_id", "instance", "run",
                                                   "pool", "ready_to_placed"],
    ("peloton-scheduling", "Waiting tasks by pool and reason"): ["pool", "stage", "reason",
                                                                 "tasks"],
    ("peloton-scheduling", "Wait reasons reported, by pool"): ["t", "pool_reason", "notes"],
    ("peloton-scheduling", "Cluster CPU: allocated vs capacity"): [
        "t", "capacity", "allocated", "unavailable"],
    ("peloton-scheduling", "Cluster memory: allocated vs capacity"): [
        "t", "capacity", "allocated", "unavailable"],
    ("peloton-scheduling", "Host CPU allocated (share of capacity)"): ["t", "host",
                                                                       "allocated"],
    ("peloton-scheduling", "Host memory allocated (share of capacity)"): ["t", "host",
                                                                          "allocated"],
    ("peloton-scheduling", "Preemptions by pool and rule"): ["t", "pool", "rule",
                                                             "preemptions"],
    ("peloton-scheduling", "Preempted runs"): ["time", "pool", "rule", "victim", "preemptor",
                                               "detail"],
    ("peloton-scheduling", "$pool"): ["pool"],
}

# Grafana unit ids the dashboards may use (a typo would show raw numbers)
UNITS = {"short", "none", "ms", "percentunit", "decmbytes", "bytes", "suffix: cores"}

# A job id that breaks naive quoting three ways: it closes a '...' literal (\' is what
# ${v:singlequote} makes of a quote: the backslash before it escapes the escape), ends a
# statement and carries an OR that would match every row.
HOSTILE_JOB = "job-'\\'; x\\' OR 1=1 OR '"
HOSTILE = ["x' OR '1'='1", "x\\' OR 1=1 --", "x\\", "{a,b}'; SELECT 1; --", "%27 OR 1=1"]


# ---- Grafana + plugin macro expansion -------------------------------------------------
def _dt(ms: int) -> str:
    return f"toDateTime({ms // 1000})"


def _dt64(ms: int) -> str:
    return f"fromUnixTimestamp64Milli({ms})"


_MACROS: dict[str, Any] = {
    # name -> (args) -> SQL, as grafana/clickhouse-datasource pkg/macros/macros.go
    "fromTime": lambda: _dt(FROM_MS),
    "toTime": lambda: _dt(TO_MS),
    "fromTime_ms": lambda: _dt64(FROM_MS),
    "toTime_ms": lambda: _dt64(TO_MS),
    "timeFilter": lambda c: f"{c} >= {_dt(FROM_MS)} AND {c} <= {_dt(TO_MS)}",
    "timeFilter_ms": lambda c: f"{c} >= {_dt64(FROM_MS)} AND {c} <= {_dt64(TO_MS)}",
    "timeInterval": lambda c: (f"toStartOfInterval(toDateTime({c}), "
                               f"INTERVAL {max(INTERVAL_MS // 1000, 1)} second)"),
    "timeInterval_ms": lambda c: (f"toStartOfInterval(toDateTime64({c}, 3), "
                                  f"INTERVAL {max(INTERVAL_MS, 1)} millisecond)"),
    "interval_s": lambda: str(max(INTERVAL_MS // 1000, 1)),
}
_MACRO = re.compile(r"\$__(\w+)(?:\(([^()]*)\))?")
_VAR = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)")


def expand(sql: str, variables: Mapping[str, str | list[str]]) -> str:
    """Grafana's variable interpolation, then the plugin's macros. Anything left that
    looks like a variable or macro is an error (an undefined variable, say)."""

    def var(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        fmt = m.group(2)
        if name.startswith("__"):
            return m.group(0)  # a macro, expanded below
        assert name in variables, f"undefined dashboard variable ${name}"
        value = variables[name]
        if fmt == "percentencode":
            return percentencode(value)
        if fmt == "singlequote":  # only to show that it is not safe (see the tests)
            values = value if isinstance(value, list) else [value]
            return ",".join("'" + v.replace("'", "\\'") + "'" for v in values)
        assert fmt is None, f"unsupported variable format {fmt}"
        assert isinstance(value, str), f"${name} is multi-valued"
        return value

    def macro(m: re.Match[str]) -> str:
        name, args = m.group(1), m.group(2)
        assert name in _MACROS, f"unknown macro $__{name}"
        return str(_MACROS[name](*([a.strip() for a in args.split(",")] if args else [])))

    out = _MACRO.sub(macro, _VAR.sub(var, sql))
    assert "$" not in out, f"unexpanded: {out}"
    return out


def percentencode(value: str | list[str]) -> str:
    """Grafana's `${v:percentencode}`: encodeURIComponentStrict (encodeURIComponent, plus
    !'()* encoded), a multi-value as `{a,b}` encoded whole (formatRegistry.ts)."""
    text = "{" + ",".join(value) + "}" if isinstance(value, list) else value
    return quote(text, safe="")  # unreserved: A-Z a-z 0-9 - _ . ~, exactly as Grafana's


_SAFE_VAR = re.compile(r"decodeURLComponent\('\$\{\w+:percentencode\}'\)")


def unsafe_references(sql: str) -> list[str]:
    """Variable references in `sql` not in the safe form (macros `$__x` are not variables)."""
    return [m.group(0) for m in _VAR.finditer(_SAFE_VAR.sub("", sql))
            if not (m.group(1) or m.group(3)).startswith("__")]


# ---- the dashboards -------------------------------------------------------------------
def _load() -> dict[str, dict[str, Any]]:
    boards = {}
    for path in sorted(DASHBOARDS.glob("*.json")):
        board = json.loads(path.read_text())
        boards[board["uid"]] = board
    return boards


BOARDS = _load()


def _panels(board: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for p in board["panels"]:
        yield p
        yield from p.get("panels", [])


def queries() -> list[tuple[str, str, str]]:
    """(dashboard uid, panel title or $variable, raw SQL) of every query."""
    out = []
    for uid, board in BOARDS.items():
        for p in _panels(board):
            for t in p.get("targets", []):
                out.append((uid, p["title"], t["rawSql"]))
        for v in board["templating"]["list"]:
            if v["type"] == "query":
                out.append((uid, f"${v['name']}", v["query"]))
    return out


def _variables(uid: str, **values: str | list[str]) -> dict[str, str | list[str]]:
    """Values for every variable the dashboard defines (and no other)."""
    defaults: dict[str, str | list[str]] = {
        "resource": "cpu", "pool": ["/", "/dev", "/prod", "/prod/batch"], "job_id": "job-bad",
    }
    if uid == "peloton-scheduling":  # the Sim's preemptions are in its pools /A and /B
        defaults["pool"] = ["/", "/A", "/B", "/dev", "/prod", "/prod/batch"]
    defined = {v["name"] for v in BOARDS[uid]["templating"]["list"]} - {"datasource"}
    return {n: values.get(n, defaults[n]) for n in defined}


# ---- the read model -------------------------------------------------------------------
def _offer(host: str, at: int, free: dict[str, float], available: bool = True
           ) -> dict[str, Any]:
    return {"at": at, "offers": [{
        "host": host, "incarnation": f"{host}-inc1", "capacity": RES, "free": free,
        "labels": {"zone": "a"}, "generation": at, "available": available,
        "port_range_begin": 31000, "port_range_end": 32000, "used_ports": [],
        "task_label_counts": {}}]}


def _preemptions(bus: Bus) -> None:
    """The TasksPreempted of a real resmgr + jobmgr run (one preemption per rule), moved
    from the Sim's clock (10^6 ms on) into the dashboards' time range."""
    sim = two_pools()
    sim.submit("low", "/A", 12, priority=1)
    sim.run(1.0)
    sim.submit("high", "/A", 4, priority=5)
    sim.run(3.0)
    sim.submit("b", "/B", 12)
    sim.run(6.0)
    found = sim.of_type("TasksPreempted")
    assert {t["reason"] for e in found for t in e.body["tasks"]} == {
        "HIGHER_PRIORITY_IN_POOL", "POOL_OVER_ENTITLEMENT"}
    for e in found:
        bus.add(e.type, e.key, {**e.body, "at": e.body["at"] - 1_000_000})


def _scenario() -> Bus:
    bus = full_scenario()
    # h2 offered, then lost; h1 busier while job-ok runs (its registration offer: 6 cpu free)
    bus.add("OfferReceived", "offers", _offer("h2", 1_100, RES))
    bus.add("OfferReceived", "offers", _offer("h2", 1_250, res(), available=False))
    bus.add("OfferReceived", "offers", _offer("h1", 3_025, res(4, 3840)))
    bus.add("OfferReceived", "offers", _offer("h1", 4_055, res(6, 4096)))
    # a job whose id would break naive quoting (anyone may publish to job-submitted): the
    # job manager rejects the id, the read model shows the job REJECTED
    book = JobBook()
    book.apply("EntitlementUpdated", next(r.body for r in bus.records
                                          if r.etype == "EntitlementUpdated"))
    submit(bus, book, HOSTILE_JOB, 1, t=8_500, name="hostile")
    _preemptions(bus)
    # A second entitlement cycle, so pools have history and "newest cycle" means something.
    bus.add("EntitlementUpdated", "cluster", {
        "at": 9_000, "cycle": 8, "capacity": res(8, 8192), "pools": [
            {"pool": pool, "parent": parent, "reservation": res(2), "limit": res(8),
             "entitlement": res(5, 2048), "slack_entitlement": res(),
             "nonslack_entitlement": res(5), "allocation": res(3), "demand": res(6)}
            for pool, parent in (("/", None), ("/prod", "/"), ("/prod/batch", "/prod"),
                                 ("/dev", "/"))]})
    return bus


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    tmp_path = tmp_path_factory.mktemp("dashboards")
    s = Store(dsn=f"chdb://{tmp_path}/db")
    try:
        s.insert(_scenario().rows())
        yield s
    finally:
        s.close()  # chdb: one owner per data directory per process


def _repeat(uid: str, title: str) -> str | None:
    """The variable a panel repeats over (Grafana gives each copy one value of it)."""
    return next((p.get("repeat") for p in _panels(BOARDS[uid]) if p["title"] == title), None)


def run(store: Store, uid: str, title: str, **values: str | list[str]
        ) -> tuple[list[str], list[dict[str, Any]]]:
    sql = next(q for u, t, q in queries() if (u, t) == (uid, title))
    repeat = _repeat(uid, title)
    assert repeat is None or isinstance(values.get(repeat), str), f"one ${repeat} per copy"
    with store._lock:
        result = store._client.query(expand(sql, _variables(uid, **values)))
        return list(result.column_names), list(result.named_results())


# ---- structure ------------------------------------------------------------------------
def test_four_dashboards_with_unique_ids() -> None:
    assert set(BOARDS) == {"peloton-overview", "peloton-pools", "peloton-job",
                           "peloton-scheduling"}
    for board in BOARDS.values():
        ids = [p["id"] for p in _panels(board)]
        assert len(ids) == len(set(ids)), board["uid"]


def test_every_query_is_covered_here() -> None:
    found = {(uid, title) for uid, title, _ in queries()}
    assert found == set(EXPECTED)


@pytest.mark.parametrize("uid", sorted(BOARDS))
def test_targets_use_the_clickhouse_plugin_raw_sql(uid: str) -> None:
    board = BOARDS[uid]
    ds_vars = [v for v in board["templating"]["list"] if v["type"] == "datasource"]
    assert [(v["name"], v["query"]) for v in ds_vars] == [("datasource", PLUGIN)]
    for v in board["templating"]["list"]:
        if v["type"] == "query":
            assert v["datasource"] == {"type": PLUGIN, "uid": "${datasource}"}
    for p in _panels(board):
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": PLUGIN, "uid": "${datasource}"}, p["title"]
        for t in p["targets"]:
            assert t["datasource"] == p["datasource"]
            assert t["editorType"] == "sql" and t["rawSql"].strip()
            # plugin format: 0 = time series, 1 = table (sqlutil.FormatQueryOption)
            if p["type"] == "timeseries":
                assert (t["format"], t["queryType"]) == (0, "timeseries"), p["title"]
            else:
                assert (t["format"], t["queryType"]) == (1, "table"), p["title"]


def test_expand_matches_the_plugin_macros() -> None:
    got = expand("WHERE $__timeFilter(time) AND x = '${job_id:percentencode}' AND "
                 "p IN (${pool:singlequote}) AND q = '${pool:percentencode}'"
                 " GROUP BY $__timeInterval(time) LIMIT $__interval_s",
                 {"job_id": "j1 (a)!*'\\;~", "pool": ["/a", "/b"]})
    assert got == ("WHERE time >= toDateTime(0) AND time <= toDateTime(20) AND "
                   "x = 'j1%20%28a%29%21%2A%27%5C%3B~' AND p IN ('/a','/b') AND "
                   "q = '%7B%2Fa%2C%2Fb%7D' GROUP BY toStartOfInterval(toDateTime(time), "
                   "INTERVAL 1 second) LIMIT 1")
    with pytest.raises(AssertionError, match="undefined"):
        expand("SELECT ${nope}", {})


def test_every_panel_has_a_unit() -> None:
    for uid, board in BOARDS.items():
        for p in _panels(board):
            if p["type"] == "row":
                continue
            assert p["fieldConfig"]["defaults"].get("unit") in UNITS, (uid, p["title"])
            for o in p["fieldConfig"]["overrides"]:
                for prop in o["properties"]:
                    if prop["id"] == "unit":
                        assert prop["value"] in UNITS, (uid, p["title"])


# ---- every query runs and returns its columns -----------------------------------------
@pytest.mark.parametrize(("uid", "title"), sorted(EXPECTED), ids=lambda x: str(x))
def test_query_runs_with_expected_columns(store: Store, uid: str, title: str) -> None:
    repeat = _repeat(uid, title)
    copies: list[dict[str, Any]] = [{}]
    if repeat is not None:  # a repeated panel: one query per value of the variable
        all_values = _variables(uid)[repeat]
        copies = [{repeat: v} for v in (all_values if isinstance(all_values, list)
                                        else [all_values])]
    for values in copies:
        columns, rows = run(store, uid, title, **values)
        assert columns == EXPECTED[(uid, title)], values
        assert rows, f"{uid} / {title} {values} returned no rows on the scenario"


# ---- and returns what the API would show ----------------------------------------------
def test_jobs_by_state_agrees_with_the_store(store: Store) -> None:
    _, rows = run(store, "peloton-overview", "Jobs by state")
    assert {r["state"]: r["jobs"] for r in rows} == Counter(
        j["state"] for j in store.list_jobs(limit=1000))
    _, jobs = run(store, "peloton-overview", "Jobs")
    assert {(j["job_id"], j["state"]) for j in jobs} == {
        (j["job_id"], j["state"]) for j in store.list_jobs(limit=1000)}


def _store_task_states(store: Store) -> Counter[str]:
    return Counter(t["state"] for j in store.list_jobs(limit=1000)
                   for t in store.tasks_of_job(j["job_id"]))


def test_tasks_by_state_and_its_history_agree_with_the_store(store: Store) -> None:
    now = _store_task_states(store)
    _, rows = run(store, "peloton-overview", "Tasks by state")
    assert {r["state"]: r["tasks"] for r in rows} == now
    # the rebuilt series ends at today's counts, never goes negative, and sums to the
    # number of tasks at every point
    _, series = run(store, "peloton-overview", "Tasks by state over time")
    last: dict[str, int] = {}
    for r in series:
        assert r["tasks"] >= 0
        last[r["state"]] = r["tasks"]
    assert {s: n for s, n in last.items() if n} == now
    assert sum(last.values()) == sum(now.values())
    _, transitions = run(store, "peloton-overview", "Task transitions")
    total = sum(len(t["history"]) for j in store.list_jobs(limit=1000)
                for t in store.tasks_of_job(j["job_id"]))
    assert sum(r["transitions"] for r in transitions) == total > 0


def test_hosts_agree_with_the_store(store: Store) -> None:
    expected = {h["host"]: h["state"] for h in store.hosts()}
    assert expected == {"h1": "UP", "h2": "LOST"}
    _, hosts = run(store, "peloton-overview", "Hosts")
    assert {h["host"]: h["state"] for h in hosts} == expected
    h1 = next(h for h in hosts if h["host"] == "h1")
    assert (h1["free_cpu"], h1["running"]) == (6.0, 0)
    _, counts = run(store, "peloton-overview", "Hosts by state")
    assert {r["state"]: r["hosts"] for r in counts} == {"UP": 1, "LOST": 1}


def test_dead_letters(store: Store) -> None:
    _, rows = run(store, "peloton-overview", "Recent dead letters")
    assert [(r["service"], r["source_topic"], r["offset"]) for r in rows] == [
        (d["service"], d["source_topic"], d["offset"]) for d in store.dead_letters()]
    _, n = run(store, "peloton-overview", "Dead letters in range")
    assert n == [{"dead_letters": 1}]


def test_pools_table_is_the_newest_cycle(store: Store) -> None:
    _, rows = run(store, "peloton-pools", "Pools (newest entitlement cycle, ${resource})",
                  resource="memory")
    api = {p["pool"]: p for p in store.pools()}
    assert {r["pool"] for r in rows} == set(api)
    for r in rows:
        assert r["cycle"] == api[r["pool"]]["cycle"] == 8
        assert r["entitlement"] == api[r["pool"]]["entitlement"]["memory"] == 2048.0
    _, only = run(store, "peloton-pools", "Pools (newest entitlement cycle, ${resource})",
                  pool=["/dev"])
    assert [r["pool"] for r in only] == ["/dev"]


def test_pool_panel_shows_entitlement_allocation_and_demand_over_time(store: Store) -> None:
    title = "${pool}: entitlement vs allocation vs demand (${resource})"
    _, rows = run(store, "peloton-pools", title, pool="/prod/batch")
    assert [(r["entitlement"], r["allocation"], r["demand"]) for r in rows] == [
        (4.0, 1.0, 2.0), (5.0, 3.0, 6.0)]  # cycles 7 and 8
    _, by_pool = run(store, "peloton-pools", "Entitlement by pool (${resource})")
    assert len(by_pool) == 8  # four pools x two cycles
    _, pools = run(store, "peloton-pools", "$pool")
    assert [p["pool"] for p in pools] == ["/", "/dev", "/prod", "/prod/batch"]


def test_job_variable_lists_jobs(store: Store) -> None:
    _, rows = run(store, "peloton-job", "$job_id")
    assert {r["job_id"] for r in rows} == {j["job_id"] for j in store.list_jobs(limit=1000)}


@pytest.mark.parametrize("job_id", ["job-ok", "job-bad", "job-wait", "job-rej"])
def test_job_drill_down_agrees_with_the_store(store: Store, job_id: str) -> None:
    job = store.get_job(job_id)
    assert job is not None
    _, head = run(store, "peloton-job", "Job ${job_id}", job_id=job_id)
    assert [(h["job_id"], h["name"], h["state"], h["instances"]) for h in head] == [
        (job_id, job["name"], job["state"], job["instance_count"])]
    tasks = store.tasks_of_job(job_id)
    _, rows = run(store, "peloton-job", "Tasks", job_id=job_id)
    keys = ("instance", "run", "state", "host", "reason", "exit_code", "failures")
    assert [{k: r[k] for k in keys} for r in rows] == [{k: t[k] for k in keys} for t in tasks]
    assert [r["sandbox"] or None for r in rows] == [t["sandbox"] for t in tasks]
    _, by_state = run(store, "peloton-job", "Tasks by state", job_id=job_id)
    assert {r["state"]: r["tasks"] for r in by_state} == Counter(t["state"] for t in tasks)
    _, events = run(store, "peloton-job", "Task events", job_id=job_id)
    assert len(events) == sum(len(t["history"]) for t in tasks)


# ---- scheduling: placement latency, waiting reasons, host utilization, preemptions -----
def _quantile(values: list[int], level: float) -> int:
    """ClickHouse quantileExact: the element at index floor(level * n) of the sorted values."""
    ordered = sorted(values)
    return ordered[min(int(level * len(ordered)), len(ordered) - 1)]


def _series(rows: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """(event ms, latency ms) -> the panel's rows: per 1 s interval, p50 and p99."""
    by_second: dict[int, list[int]] = defaultdict(list)
    for at, latency in rows:
        by_second[at // 1000].append(latency)
    return [{"p50": _quantile(v, 0.5), "p99": _quantile(v, 0.99)}
            for _, v in sorted(by_second.items())]


def _jobs(store: Store) -> list[dict[str, Any]]:
    return store.list_jobs(limit=1000)


def test_placement_latency_agrees_with_the_task_histories(store: Store) -> None:
    ready_to_placed, submit_to_running = [], []
    for job in _jobs(store):
        for task in store.tasks_of_job(job["job_id"]):
            runs: dict[int, list[dict[str, Any]]] = defaultdict(list)
            for h in task["history"]:
                runs[h["run"]].append(h)
            for changes in runs.values():
                ready = [h["at"] for h in changes if h["state"] == "READY"]
                placed = [h["at"] for h in changes if h["state"] == "PLACED"]
                if ready and placed:
                    ready_to_placed.append((max(placed), max(placed) - min(ready)))
            running = [h["at"] for h in task["history"] if h["state"] == "RUNNING"]
            if running:
                submit_to_running.append((min(running), min(running) - job["submitted_at"]))
    assert len(ready_to_placed) >= 6 and len(submit_to_running) >= 5
    _, rows = run(store, "peloton-scheduling", "Ready → placed (p50, p99)")
    assert [{k: r[k] for k in ("p50", "p99")} for r in rows] == _series(ready_to_placed)
    _, rows = run(store, "peloton-scheduling", "Submit → RUNNING (p50, p99)")
    assert [{k: r[k] for k in ("p50", "p99")} for r in rows] == _series(submit_to_running)
    assert {r["p99"] for r in rows} >= {1040}  # job-ok: submitted at 2 000, RUNNING at 3 040
    _, slow = run(store, "peloton-scheduling", "Slowest placements")
    assert sorted(r["ready_to_placed"] for r in slow) == sorted(
        lat for _, lat in ready_to_placed)
    assert {r["pool"] for r in slow} == {"/prod/batch"}


def _category(reason: str) -> tuple[str, str]:
    """The API's shown reason -> (stage, first clause with numbers as N), as the panel."""
    for prefix, stage in (("waiting for admission to pool ", "admission"),
                          ("waiting for placement: ", "placement")):
        if reason.startswith(prefix):
            detail = reason[len(prefix):]
            if stage == "admission":
                detail = detail.split(": ", 1)[1]
            return stage, re.sub(r"[0-9]+([.][0-9]+)?", "N", detail.split(": ")[0])
    return "", "no reason reported yet"


def test_waiting_tasks_by_pool_and_reason_agree_with_the_api(store: Store) -> None:
    expected: Counter[tuple[str, str, str]] = Counter()
    for job in _jobs(store):
        for task in store.tasks_of_job(job["job_id"]):
            if task["state"] in ("PENDING", "READY", "PLACING"):
                stage, reason = _category(task["reason"])
                stage = stage or ("admission" if task["state"] == "PENDING" else "placement")
                expected[(job["respool"], stage, reason)] += 1
    assert expected == {("/prod/batch", "admission", "pool over entitlement"): 1}
    _, rows = run(store, "peloton-scheduling", "Waiting tasks by pool and reason")
    assert {(r["pool"], r["stage"], r["reason"]): r["tasks"] for r in rows} == expected
    _, none = run(store, "peloton-scheduling", "Waiting tasks by pool and reason",
                  pool=["/dev"])
    assert none == []


def test_wait_reasons_over_time_count_every_note(store: Store) -> None:
    _, rows = run(store, "peloton-scheduling", "Wait reasons reported, by pool")
    assert sum(r["notes"] for r in rows) == store.table_counts()["task_waits"] > 0
    assert {r["pool_reason"] for r in rows} == {
        "/prod/batch admission: pool over entitlement",
        "/prod/batch placement: no host has N free cpu"}


def test_host_utilization_carries_each_hosts_newest_offer(store: Store) -> None:
    _, cpu = run(store, "peloton-scheduling", "Cluster CPU: allocated vs capacity")
    by_second = {int(r["t"].timestamp()): r for r in cpu}
    assert sorted(by_second) == list(range(0, 21))  # every interval of the range
    point = {s: (r["capacity"], r["allocated"], r["unavailable"])
             for s, r in by_second.items()}
    assert point[0] == (0, 0, 0)  # no offer yet
    assert point[1] == (8, 2, 8)  # h1: 6 of 8 free; h2 lost at 1 250 (offer unavailable)
    assert point[3] == (8, 4, 8)  # job-ok's two runs on h1
    assert point[4] == point[20] == (8, 2, 8)  # carried forward to the end of the range
    _, mem = run(store, "peloton-scheduling", "Cluster memory: allocated vs capacity")
    assert {int(r["t"].timestamp()): r["allocated"] for r in mem}[3] == 8192 - 3840
    _, hosts = run(store, "peloton-scheduling", "Host CPU allocated (share of capacity)")
    assert [(r["host"], r["allocated"]) for r in hosts if r["host"] == "h1"] == [
        ("h1", 0.25), ("h1", 0.5), ("h1", 0.25)]
    assert [r["allocated"] for r in hosts if r["host"] == "h2"] == [None]  # lost at 1 250
    api = {h["host"]: h for h in store.hosts()}
    assert api["h1"]["free"]["cpu"] == 6.0  # the newest offer, as the last point says


def test_preemptions_by_pool_and_rule_and_the_victims(store: Store) -> None:
    api = store.preemptions()
    _, table = run(store, "peloton-scheduling", "Preempted runs")
    assert sorted((r["victim"], r["rule"], r["pool"]) for r in table) == sorted(
        (f"{p['job_id']}/{p['instance']} run {p['run']}", p["reason"], p["pool"])
        for p in api)
    for r in table:
        if r["rule"] == "HIGHER_PRIORITY_IN_POOL":
            assert re.fullmatch(r"high-[0-3]", r["preemptor"]), r
            assert r["detail"].startswith(f"for gang {r['preemptor']} (priority 5)")
        else:
            assert r["preemptor"] == ""
    _, series = run(store, "peloton-scheduling", "Preemptions by pool and rule")
    totals: Counter[tuple[str, str]] = Counter()
    for r in series:
        totals[(r["pool"], r["rule"])] += r["preemptions"]
    assert totals == Counter((p["pool"], p["reason"]) for p in api)
    assert {rule for _, rule in totals} == {"HIGHER_PRIORITY_IN_POOL", "POOL_OVER_ENTITLEMENT"}
    _, only = run(store, "peloton-scheduling", "Preempted runs", pool=["/prod/batch"])
    assert {r["pool"] for r in only} == {"/prod/batch"}


# ---- variables are taken safely -------------------------------------------------------
def test_every_variable_reference_in_sql_is_percent_encoded_and_decoded() -> None:
    for uid, title, sql in queries():
        assert unsafe_references(sql) == [], (uid, title)
    assert unsafe_references("x = '${job_id}' AND y = ${pool:singlequote}") == [
        "${job_id}", "${pool:singlequote}"]


def _uses(uid: str, title: str, name: str) -> bool:
    sql = next(q for u, t, q in queries() if (u, t) == (uid, title))
    return f"${{{name}:" in sql


@pytest.mark.parametrize("hostile", HOSTILE + [HOSTILE_JOB + "x"])
@pytest.mark.parametrize(("uid", "title"), sorted(EXPECTED), ids=lambda x: str(x))
def test_hostile_values_neither_break_nor_inject(store: Store, uid: str, title: str,
                                                 hostile: str) -> None:
    """Each variable a query uses, set to a hostile value (alone, and in a multi-value):
    the query runs, and a filter on it matches nothing."""
    repeat = _repeat(uid, title)
    for name in ("job_id", "pool", "resource"):
        if not _uses(uid, title, name):
            continue
        values: dict[str, str | list[str]] = {} if repeat is None else {repeat: "/prod/batch"}
        multi = name != repeat and isinstance(_variables(uid)[name], list)
        values[name] = [hostile] if multi else hostile
        _, rows = run(store, uid, title, **values)
        if name == "resource":  # a map key nobody has: every figure reads 0
            assert all(not v for r in rows for k, v in r.items()
                       if k in ("reservation", "limit", "entitlement", "allocation",
                                "demand")), rows
        else:
            assert rows == [], (name, rows)


def test_the_hostile_values_do_inject_through_naive_quoting(store: Store) -> None:
    """The same values through the dashboards' old `'${job_id}'` (and `${v:singlequote}`)
    break the query or match other jobs: the test above would catch a regression."""
    sql = "SELECT DISTINCT job_id FROM peloton.jobs FINAL WHERE job_id = {ref}"
    with store._lock:
        client = store._client
        leaked = client.query(expand(sql.format(ref="'${job_id}'"),
                                     {"job_id": "x' OR '1'='1"})).result_rows
        assert len(leaked) > 1
        leaked = client.query(expand(sql.format(ref="${job_id:singlequote}"),
                                     {"job_id": "x\\' OR 1=1 --"})).result_rows
        assert len(leaked) > 1
        for value in ("x' OR '1'='1", "x\\' OR 1=1 --"):
            safe = client.query(expand(sql.format(
                ref="decodeURLComponent('${job_id:percentencode}')"),
                {"job_id": value})).result_rows
            assert safe == []


def test_a_job_id_with_quotes_backslashes_and_semicolons_is_found_exactly(
        store: Store) -> None:
    assert store.get_job(HOSTILE_JOB) is not None
    _, head = run(store, "peloton-job", "Job ${job_id}", job_id=HOSTILE_JOB)
    assert [(h["job_id"], h["name"], h["state"]) for h in head] == [
        (HOSTILE_JOB, "hostile", "REJECTED")]
    assert head[0]["reasons"].startswith("job_id: ")
    _, tasks = run(store, "peloton-job", "Tasks", job_id=HOSTILE_JOB)
    assert tasks == []  # rejected: no tasks (and none of another job's)
    _, variable = run(store, "peloton-job", "$job_id")
    assert HOSTILE_JOB in {r["job_id"] for r in variable}
