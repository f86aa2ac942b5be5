"""Every Grafana dashboard query runs against a real chdb read model.

The dashboards (charts/peloton/dashboards/*.json) use the grafana-clickhouse-datasource
plugin's raw SQL. Here each panel's and variable's SQL gets its macros expanded exactly as
the plugin's backend does (pkg/macros: `$__timeFilter(c)` -> `c >= toDateTime(from) AND
c <= toDateTime(to)`, `$__timeInterval(c)` -> `toStartOfInterval(toDateTime(c), INTERVAL n
second)`, ...) and its template variables as Grafana does (`${v}`, `${v:singlequote}`), then
runs on a chdb store filled through the real projector with the read-model scenario
(tests/readmodel/readmodel_scenario.py). Results are checked against the store's own
queries (the API's answers), not just for running.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "readmodel"))

from readmodel_scenario import Bus, full_scenario, res  # noqa: E402

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
}


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
        values = value if isinstance(value, list) else [value]
        if fmt == "singlequote":
            return ",".join("'" + v.replace("'", "\\'") + "'" for v in values)
        assert fmt is None, f"unsupported variable format {fmt}"
        assert len(values) == 1, f"${name} is multi-valued: use ${{{name}:singlequote}}"
        return values[0]

    def macro(m: re.Match[str]) -> str:
        name, args = m.group(1), m.group(2)
        assert name in _MACROS, f"unknown macro $__{name}"
        return str(_MACROS[name](*([a.strip() for a in args.split(",")] if args else [])))

    out = _MACRO.sub(macro, _VAR.sub(var, sql))
    assert "$" not in out, f"unexpanded: {out}"
    return out


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
    defined = {v["name"] for v in BOARDS[uid]["templating"]["list"]} - {"datasource"}
    return {n: values.get(n, defaults[n]) for n in defined}


# ---- the read model -------------------------------------------------------------------
def _scenario() -> Bus:
    bus = full_scenario()
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
def test_three_dashboards_with_unique_ids() -> None:
    assert set(BOARDS) == {"peloton-overview", "peloton-pools", "peloton-job"}
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
    got = expand("WHERE $__timeFilter(time) AND x = '${job_id}' AND p IN (${pool:singlequote})"
                 " GROUP BY $__timeInterval(time) LIMIT $__interval_s",
                 {"job_id": "j1", "pool": ["/a", "/b"]})
    assert got == ("WHERE time >= toDateTime(0) AND time <= toDateTime(20) AND x = 'j1' AND "
                   "p IN ('/a','/b') GROUP BY toStartOfInterval(toDateTime(time), INTERVAL 1 "
                   "second) LIMIT 1")
    with pytest.raises(AssertionError, match="undefined"):
        expand("SELECT ${nope}", {})


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
