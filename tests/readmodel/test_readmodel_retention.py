"""History TTL (readmodel/retention.py): the setting, and what a real chdb store does with it.

Rows are projected from real events (the read-model scenario), re-dated to "now" or to
40 days ago, so every history table gets both.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from readmodel_scenario import full_scenario

from peloton.readmodel.projector import COLUMNS, Row
from peloton.readmodel.retention import (
    DEFAULT_TTL_DAYS,
    ENV,
    HISTORY_TABLES,
    applied_ttl_days,
    history_ttl_days,
    ttl_expression,
)
from peloton.readmodel.store import Store

DAY_MS = 86_400_000


def test_every_table_without_a_version_is_history() -> None:
    """A history table is one row per fact (no `version`): each one gets the TTL."""
    assert set(HISTORY_TABLES) == {t for t, cols in COLUMNS.items() if "version" not in cols}
    assert all("at" in COLUMNS[t] for t in HISTORY_TABLES)


def test_the_setting() -> None:
    assert history_ttl_days({}) == DEFAULT_TTL_DAYS == 30
    assert history_ttl_days({ENV: " 7 "}) == 7
    assert history_ttl_days({ENV: "0"}) == 0
    assert ttl_expression(0) is None
    for bad in ("-1", "7d", "1.5", "thirty", "99999999", "٣"):
        with pytest.raises(ValueError, match=ENV):
            history_ttl_days({ENV: bad})


@given(st.integers(min_value=0, max_value=36_500))
def test_the_ttl_reads_back(days: int) -> None:
    expr = ttl_expression(days)
    engine = "ReplacingMergeTree ORDER BY (k, src)"
    full = engine if expr is None else f"{engine} TTL {expr} SETTINGS index_granularity = 8192"
    assert applied_ttl_days(full) == days


def test_a_foreign_ttl_is_not_ours() -> None:
    assert applied_ttl_days("MergeTree ORDER BY k TTL time + toIntervalHour(1)") is None


def _history_rows(shift_ms: int, offsets: int = 0) -> list[Row]:
    """The scenario's history rows, their event times moved by `shift_ms` and their source
    offsets by `offsets` (so two copies are distinct facts)."""
    return [replace(r, values={**r.values, "at": r.values["at"] + shift_ms,
                               "src_offset": r.values["src_offset"] + offsets})
            for r in full_scenario().rows() if r.table in HISTORY_TABLES]


def _counts(store: Store) -> dict[str, int]:
    return {t: n for t, n in store.table_counts().items() if t in HISTORY_TABLES}


def _show_create(store: Store, table: str) -> str:
    return str(store._client.command(f"SHOW CREATE TABLE {store.db}.{table}"))


def _optimize(store: Store) -> None:
    """Let a changed TTL's rewrite of old parts finish (a mutation), then merge everything."""
    deadline = time.monotonic() + 60
    while store._query("SELECT count() AS n FROM system.mutations WHERE database = "
                       "{name:String} AND NOT is_done", name=store.db)[0]["n"]:
        assert time.monotonic() < deadline, "TTL mutations did not finish"
        time.sleep(0.05)
    for table in HISTORY_TABLES:
        store._client.command(f"OPTIMIZE TABLE {store.db}.{table} FINAL")


def test_history_older_than_the_ttl_goes_on_optimize_final(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    recent, old = _history_rows(now), _history_rows(now - 40 * DAY_MS, 1_000_000)
    assert {r.table for r in recent} == set(HISTORY_TABLES)  # every table is exercised
    dsn = f"chdb://{tmp_path / 'chdb'}"
    with Store(dsn, history_ttl_days=0) as store:  # kept forever
        for table in HISTORY_TABLES:
            assert " TTL " not in _show_create(store, table).replace("\n", " ")
        store.insert(old)
        store.insert(recent)
        _optimize(store)
        both = _counts(store)
    assert all(n > 0 for n in both.values())
    with Store(dsn, history_ttl_days=30) as store:  # the setting changed: tables altered
        for table in HISTORY_TABLES:
            assert "TTL toDateTime(intDiv(at, 1000)) + toIntervalDay(30)" in _show_create(
                store, table), table
        _optimize(store)
        kept = _counts(store)
        assert kept == {t: n // 2 for t, n in both.items()}
        # a fresh insert of expired rows is dropped too; recent ones stay
        store.insert(old)
        _optimize(store)
        assert _counts(store) == kept
    with Store(dsn, history_ttl_days=0) as store:  # back to forever: the TTL goes
        for table in HISTORY_TABLES:
            assert " TTL " not in _show_create(store, table).replace("\n", " ")
        store.insert(old)
        _optimize(store)
        assert _counts(store) == both


def test_latest_state_is_kept_whatever_the_ttl(tmp_path: Path) -> None:
    with Store(f"chdb://{tmp_path / 'chdb'}", history_ttl_days=1) as store:
        store.insert(full_scenario().rows())  # dated 1970: history expired at once
        _optimize(store)
        counts = store.table_counts()
        assert all(counts[t] == 0 for t in HISTORY_TABLES)
        assert counts["jobs"] > 0 and counts["tasks"] > 0 and counts["hosts"] > 0
        assert store.get_job("job-ok") is not None


def test_the_store_takes_the_setting_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "12")
    with Store(f"chdb://{tmp_path / 'chdb'}") as store:
        assert store.history_ttl_days == 12
        assert "toIntervalDay(12)" in _show_create(store, "task_events")
    monkeypatch.setenv(ENV, "soon")
    with pytest.raises(ValueError, match=ENV):
        Store(f"chdb://{tmp_path / 'other'}")
