"""`peloton respool history` and `peloton job get --at` against a real API server (see
conftest), over the read model with the real resource manager's entitlement cycles."""

from __future__ import annotations

import json
from typing import Any

import pytest
import typer
from history_scenario import history_scenario
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from peloton.cli.history_cmd import sparkline

runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def cycles(served: tuple[str, Any]) -> None:
    """The served store gains the scenario's entitlement cycles (pools rows only)."""
    served[1].store.insert([r for r in history_scenario().rows()
                            if r.table in ("pools", "entitlement_history")])


def run(cli: typer.Typer, api: str, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, [*args, "--api", api])
    return result.exit_code, result.stdout, result.stderr


def test_respool_history_table_and_sparklines(cli: typer.Typer, api: str) -> None:
    code, out, err = run(cli, api, "respool", "history", "/prod/batch", "--from", "0",
                         "--to", "20000")
    assert code == 0, err
    assert "sampling: every cycle" in out and "CPU ENTIT" in out and "MEMORY ALLOC" in out
    spark = [line for line in out.splitlines() if line.startswith("cpu    allocation")]
    assert spark and any(c in spark[0] for c in "▂▃▄▅▆▇█") and "(max 5)" in spark[0]


def test_respool_history_json_sampled(cli: typer.Typer, api: str) -> None:
    code, out, err = run(cli, api, "respool", "history", "prod/batch", "--from", "0",
                         "--to", "19999", "--step", "5000", "-o", "json")
    assert code == 0, err
    body = json.loads(out)
    assert body["step_ms"] == 5_000 and body["pool"] == "/prod/batch"
    assert 1 <= len(body["points"]) <= 4 and body["cycles"] >= 10


@pytest.mark.parametrize("args", [("--from", "yesterday"), ("--from", "9", "--to", "1"),
                                  ("--kind", "bananas"), ("--step", "0"),
                                  ("--from", "0", "--to", "99999999", "--step", "1")])
def test_respool_history_bad_input_exits_2(cli: typer.Typer, api: str,
                                           args: tuple[str, ...]) -> None:
    code, _, err = run(cli, api, "respool", "history", "/prod/batch", *args)
    assert code == 2, err


def test_job_get_at(cli: typer.Typer, api: str) -> None:
    code, out, err = run(cli, api, "job", "get", "job-bad", "--at", "5040", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["state"] == "RUNNING"
    code, out, err = run(cli, api, "job", "get", "job-bad", "-o", "json")
    assert json.loads(out)["state"] == "FAILED"
    code, out, err = run(cli, api, "job", "get", "job-bad", "--at", "1970-01-01T00:00:04.001Z")
    assert code == 0 and "PENDING" in out
    code, _, err = run(cli, api, "job", "get", "job-bad", "--at", "3999")
    assert code == 1 and "did not exist at 3999" in err
    code, _, err = run(cli, api, "job", "get", "job-bad", "--at", "+1d")
    assert code == 2 and "future" in err


@given(st.lists(st.floats(0, 1e6), max_size=50))
def test_sparkline_one_bar_per_value(values: list[float]) -> None:
    line = sparkline(values)
    assert len(line) == len(values)
    if values and max(values) > 0:
        assert line[values.index(max(values))] == "█"
