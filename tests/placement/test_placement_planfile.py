"""Dry-run plan files and the `peloton placement plan` / `peloton bench placement` commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from peloton.cli import bench_placement, placement_cmd
from peloton.placement.domain import Strategy
from peloton.placement.planfile import PlanFileError, parse_plan

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "placement" / "plan.yaml"


def app() -> typer.Typer:
    root = typer.Typer()
    placement_cmd.register(root)
    bench = typer.Typer()
    bench_placement.register(bench)
    root.add_typer(bench, name="bench")
    return root


def test_example_plan_as_json() -> None:
    result = CliRunner().invoke(app(), ["placement", "plan", str(EXAMPLE), "-o", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    placed = {p["task"]: p["host"] for p in out["placements"]}
    unplaced = {u["task"]: u for u in out["unplaced"]}
    assert {placed[f"web-{i}"] for i in range(3)}.isdisjoint({"west-0", "west-1"})
    assert all(placed[f"train-{i}"] == "gpu-0" for i in range(2))
    assert all(placed[f"batch-{i}"].startswith("east") for i in range(6))
    assert all(f"mpi-{i}" in placed for i in range(4))
    assert unplaced["big-0"]["code"] == "UNRESOLVABLE"
    assert "gpu>=8" in unplaced["big-0"]["reason"]
    assert all(unplaced[f"huge-gang-{i}"]["code"] == "REJECTED" for i in range(3))
    assert out["summary"]["tasks"] == 21


def test_example_plan_as_table() -> None:
    result = CliRunner().invoke(app(), ["placement", "plan", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert "not placed" in result.stdout and "huge-gang-0" in result.stdout


def write(tmp_path: Path, doc: Any) -> str:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(doc) if not isinstance(doc, str) else doc)
    return str(path)


@pytest.mark.parametrize(("doc", "message"), [
    ("hosts: [", "not valid YAML/JSON"),
    ({"hosts": [{"name": "a"}]}, "hosts[0].capacity: is required"),
    ({"hosts": [{"name": "a", "capacity": {"cpu": -1}}]},
     "hosts[0].capacity.cpu: must be a non-negative number"),
    ({"hosts": [{"name": "a", "capacity": {"cpu": 1}, "ports": ["9-1"]}]},
     "hosts[0].ports[0]: must be a port range"),
    ({"jobs": [{"name": "j", "constraint": {"hostLabel": {"key": "z"}}}]},
     "jobs[0].constraint.hostLabel: needs exactly one of"),
    ({"jobs": [{"name": "j", "placementStrategy": "RANDOM"}]},
     "jobs[0].placementStrategy: unknown strategy"),
    ({"tasks": [{"job": "j"}]}, "tasks[0].id: is required"),
    ({"jobs": [{"name": "j", "type": "CRON"}]}, "jobs[0].type: unknown job type 'CRON'"),
    ({"hosts": [{"name": "a", "capacity": {"cpu": 1}}, {"name": "a", "capacity": {"cpu": 1}}]},
     "duplicate host name 'a'"),
    ({"bogus": 1}, "bogus: unknown field"),
])
def test_invalid_plans_exit_2_with_a_precise_message(tmp_path: Path, doc: Any,
                                                     message: str) -> None:
    result = CliRunner().invoke(app(), ["placement", "plan", write(tmp_path, doc)])
    assert result.exit_code == 2
    assert message in result.stderr


def test_missing_file_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app(), ["placement", "plan", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "cannot read" in result.stderr


def test_parse_plan_collects_every_problem() -> None:
    with pytest.raises(PlanFileError) as err:
        parse_plan({"hosts": [{"capacity": {"cpu": "x"}}], "jobs": [{"instances": 0}]})
    assert len(err.value.problems) >= 3


def test_jobs_expand_with_peloton_field_names() -> None:
    plan = parse_plan({
        "hosts": [{"name": "h", "count": 2, "capacity": {"cpuLimit": 4, "memLimitMb": 100}}],
        "jobs": [{"name": "svc", "instanceCount": 2, "type": "SERVICE", "gang": True,
                  "resource": {"cpuLimit": 1}, "ports": [{"name": "http", "value": 0}],
                  "labels": [{"key": "tier", "value": "web"}]}],
        "tasks": [{"id": "a", "gang": "g"}, {"id": "b", "gang": "g"}],
    })
    assert [h.name for h in plan.hosts] == ["h-0", "h-1"]
    svc = plan.tasks[0]
    assert (svc.task_id, svc.strategy, svc.gang_id, svc.gang_size, svc.ports, svc.labels) == (
        "svc-0", Strategy.SPREAD, "svc", 2, ("http",), {"tier": "web"})
    assert [t.gang_size for t in plan.tasks[2:]] == [2, 2]


def test_bench_command_small_run() -> None:
    result = CliRunner().invoke(app(), ["bench", "placement", "--hosts", "300", "--tasks",
                                        "3000", "--round-size", "1000", "--no-quality",
                                        "-o", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    for key in ("hosts", "tasks", "placed", "placements_per_s", "p99_round_ms", "violations"):
        assert key in out
    assert out["violations"] == 0
    assert out["placed"] > 2000
    assert out["host_table"] == "incremental"
    # the service's own loop over the same workload: never over-commits, places most
    assert out["service_overcommitted_hosts"] == 0
    assert out["service_placed"] > 2000
