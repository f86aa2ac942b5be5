"""`peloton sim run`: JSON summary with the documented fields, metrics.json and plots."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import typer
from _sim_builders import EXAMPLES
from typer.testing import CliRunner

from peloton.cli import sim_cmd
from peloton.sim import REPORT_FILES

REQUIRED = {"hosts", "tasks", "wall_s", "events_per_s", "utilization_mean", "jain_index",
            "queue_delay_p99_s", "preemptions"}


def app() -> typer.Typer:
    root = typer.Typer()

    @root.callback()
    def main() -> None:
        """peloton"""

    sim_cmd.register(root)
    return root


def test_sim_run_writes_metrics_and_plots_and_prints_json(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(app(), ["sim", "run", str(EXAMPLES / "peloton-preemption.yaml"),
                                        "--out", str(out), "-o", "json", "--seed", "3"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert REQUIRED <= set(figures)
    assert figures["hosts"] == 3 and figures["tasks"] == 24 and figures["preemptions"] == 6
    assert figures["seed"] == 3
    for name in REPORT_FILES:
        assert (out / name).stat().st_size > 0
    doc = json.loads((out / "metrics.json").read_text())
    assert set(doc) == {"summary", "performance", "series"}
    assert doc["summary"]["preempted_running"] == 6
    assert figures["engine"] == "runner"  # auto: a 3-host scenario runs the services


def test_sim_run_on_either_engine_finds_the_same_six_victims(tmp_path: Path) -> None:
    for engine in ("fast", "runner"):
        result = CliRunner().invoke(app(), [
            "sim", "run", str(EXAMPLES / "peloton-preemption.yaml"), "--engine", engine,
            "--out", str(tmp_path / engine), "--no-plots", "-o", "json"])
        assert result.exit_code == 0, result.output
        figures = json.loads(result.output)
        assert figures["engine"] == engine and figures["preempted_running"] == 6


def test_sim_run_prints_a_table(tmp_path: Path) -> None:
    result = CliRunner().invoke(app(), ["sim", "run", str(EXAMPLES / "peloton-preemption.yaml"),
                                        "--out", str(tmp_path), "--no-plots"])
    assert result.exit_code == 0, result.output
    assert "Jain index" in result.output and "preemptions" in result.output


def test_a_broken_scenario_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nduration_s: 10\nhosts: []\npools: []\n")
    result = CliRunner().invoke(app(), ["sim", "run", str(bad)])
    assert result.exit_code == 2


def test_sim_run_without_matplotlib_writes_the_metrics_and_says_why_no_plots(
        tmp_path: Path, monkeypatch: Any) -> None:
    """The base install has no matplotlib (it comes with the bench extra): the run still
    gives its figures and metrics.json, with a warning instead of a traceback."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    out = tmp_path / "out"
    result = CliRunner().invoke(app(), ["sim", "run", str(EXAMPLES / "peloton-preemption.yaml"),
                                        "--out", str(out), "-o", "json", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "plots skipped: matplotlib is not installed" in result.stderr
    assert (out / "metrics.json").stat().st_size > 0
    assert not (out / "utilization.png").exists()


def test_a_step_coarser_than_half_the_heartbeat_timeout_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app(), ["sim", "run", str(EXAMPLES / "peloton-preemption.yaml"),
                                        "--out", str(tmp_path), "--step-ms", "6000"])
    assert result.exit_code == 2
    assert "--step-ms" in result.output and "2500" in result.output
