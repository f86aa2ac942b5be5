"""Time travel equals the past: the state as of t, answered from the full store's history,
is what the live queries answered when the store held only the facts up to t."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from history_scenario import history_scenario, instants
from hypothesis import given
from hypothesis import strategies as st

from peloton.readmodel.history import MAX_POINTS, History, parse_instant, plan_series
from peloton.readmodel.store import Store

JOBS = ("job-ok", "job-bad", "job-wait", "job-rej", "job-svc")
_JOB_FIELDS = ("job_id", "state", "previous_state", "task_counts", "submitted_at",
               "created_at", "rejection_reasons", "kill_request", "name", "respool",
               "instance_count", "updated_at")
_TASK_FIELDS = ("instance", "run", "state", "previous_state", "host", "exit_code",
                "failures", "updated_at", "config_version", "history")
_POOL_FIELDS = ("pool", "parent", "cycle", "at", "capacity", "reservation", "limit",
                "entitlement", "slack_entitlement", "nonslack_entitlement", "allocation",
                "demand")
_HOST_FIELDS = ("host", "state", "maintenance_state", "capacity", "free", "available")


def _pick(d: dict[str, Any] | None, fields: tuple[str, ...]) -> dict[str, Any] | None:
    return None if d is None else {f: d[f] for f in fields}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, Store]]:
    path = tmp_path_factory.mktemp("history") / "chdb"
    full = Store(f"chdb://{path}", database="full")
    prefix = Store(f"chdb://{path}", database="prefix")
    try:
        yield full, prefix
    finally:
        prefix.close()
        full.close()


def test_state_at_t_equals_live_state_of_the_prefix(stores: tuple[Store, Store]) -> None:
    full, prefix = stores
    bus = history_scenario()
    rows = bus.rows()
    full.insert(rows)
    hist = History(full._query)
    checked = 0
    seen: set[int] = set()
    for t in instants(bus):
        prefix.insert([r for r in rows if r.values["at"] <= t and id(r) not in seen])
        seen |= {id(r) for r in rows if r.values["at"] <= t}
        for job in JOBS:
            live = prefix.get_job(job)
            past = hist.job_at(job, t)
            assert _pick(past, _JOB_FIELDS) == _pick(live, _JOB_FIELDS), (job, t)
            live_tasks = [_pick(x, _TASK_FIELDS) for x in prefix.tasks_of_job(job)]
            assert [_pick(x, _TASK_FIELDS) for x in hist.tasks_at(job, t)] == live_tasks
        assert ([_pick(p, _POOL_FIELDS) for p in hist.pools_at(t)]
                == [_pick(p, _POOL_FIELDS) for p in prefix.pools()]), t
        assert ([_pick(h, _HOST_FIELDS) for h in hist.hosts_at(t)]
                == [_pick(h, _HOST_FIELDS) for h in prefix.hosts()]), t
        cluster = hist.cluster_at(t)
        live_jobs = prefix.list_jobs(limit=1000)
        assert cluster["job_count"] == len(live_jobs)
        assert sum(cluster["jobs"].values()) == len(live_jobs)
        for state, n in cluster["jobs"].items():
            assert n == sum(1 for j in live_jobs if j["state"] == state)
        checked += 1
    assert checked > 40
    # the scenario really moves: several jobs' states and several cycles were compared
    assert len({hist.job_at("job-bad", t)["state"] for t in instants(bus)[1:]  # type: ignore[index]
                if hist.job_at("job-bad", t)}) >= 3
    assert len({p["cycle"] for t in instants(bus) for p in hist.pools_at(t)}) >= 10


def test_job_before_it_existed(stores: tuple[Store, Store]) -> None:
    full, _ = stores
    hist = History(full._query)
    first = hist.first_seen("job-ok")
    assert first == 2_000
    assert hist.job_at("job-ok", first - 1) is None
    assert hist.job_at("job-ok", first) is not None
    assert hist.first_seen("no-such-job") is None


def test_pool_series_raw_and_stepped(stores: tuple[Store, Store]) -> None:
    full, _ = stores
    hist = History(full._query)
    raw = hist.pool_series("/prod/batch", 0, 20_000)
    assert raw["step_ms"] is None and raw["sampling"] == "every cycle"
    ats = [p["at"] for p in raw["points"]]
    assert ats == sorted(ats) and len(ats) == raw["cycles"] >= 10
    assert all(set(p["entitlement"]) >= {"cpu", "memory"} for p in raw["points"])
    stepped = hist.pool_series("/prod/batch", 0, 20_000, step=5_000)
    assert stepped["step_ms"] == 5_000 and len(stepped["points"]) <= 4
    assert sum(p["cycles"] for p in stepped["points"]) == raw["cycles"]
    # each bucket answers its last cycle
    for p in stepped["points"]:
        bucket = [q for q in raw["points"] if q["at"] // 5_000 == p["at"] // 5_000]
        assert p["at"] == bucket[-1]["at"] and p["entitlement"] == bucket[-1]["entitlement"]
    assert hist.pool_series("/nope", 0, 20_000)["points"] == []


@given(st.integers(0, 10**13), st.integers(0, 10**13))
def test_parse_instant_forms(ms: int, now: int) -> None:
    assert parse_instant(str(ms), now) == ms
    assert parse_instant("now", now) == now
    assert parse_instant(" -1h ", now + 3_600_000) == now
    assert parse_instant("-90s", now + 90_000) == now
    from datetime import UTC, datetime, timedelta
    iso = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)).isoformat()
    assert parse_instant(iso, now) == ms
    assert parse_instant(iso.replace("+00:00", "Z"), now) == ms


@pytest.mark.parametrize("bad", ["", "yesterday", "-1y", "1h", "12:00:61", "--1h",
                                 "99999999999999999999", "1960-01-01T00:00:00Z"])
def test_parse_instant_refuses_garbage(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_instant(bad, 10**12)


@given(st.integers(0, 10**12), st.integers(0, 10**10), st.integers(0, 10**6))
def test_plan_series_bounds_points(frm: int, span: int, cycles: int) -> None:
    step, how = plan_series(frm, frm + span, None, cycles)
    if cycles <= MAX_POINTS:
        assert step is None
    else:
        assert step is not None and step % 1000 == 0
        assert -(-(span + 1) // step) <= MAX_POINTS and how


def test_plan_series_refuses_too_fine_a_step() -> None:
    with pytest.raises(ValueError, match="at least 2000 ms"):
        plan_series(0, 999_999, 10, 0)
    with pytest.raises(ValueError, match="after"):
        plan_series(10, 0, None, 0)
    with pytest.raises(ValueError):
        plan_series(0, 10, 0, 0)
