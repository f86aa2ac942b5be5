"""`peloton job validate FILE...`: offline, every problem of every file at once."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from peloton.cli.validate_cmd import check_text

runner = CliRunner()
CLOSED = "http://127.0.0.1:9"
GOOD = """\
name: fine
owner: me
instanceCount: 2
respool: /prod/batch
defaultConfig:
  resource: {cpuLimit: 0.5, memLimitMb: 64}
  command: {value: "echo hi"}
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_valid_job_file_exits_0(cli: typer.Typer, tmp_path: Path) -> None:
    good = write(tmp_path, "good.yaml", GOOD)
    result = runner.invoke(cli, ["job", "validate", good], env={"PELOTON_API": CLOSED})
    assert result.exit_code == 0 and result.stdout == f"{good}: valid job file\n"
    assert result.stderr == ""


def test_every_problem_of_every_file_at_once(cli: typer.Typer, tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.yaml", "name: [x]\ninstanceCount: two\ncolour: blue\n")
    worse = write(tmp_path, "worse.yaml", GOOD.replace("cpuLimit: 0.5", "cpuLimit: -1")
                  .replace("instanceCount: 2", "instanceCount: 0"))
    good = write(tmp_path, "good.yaml", GOOD)
    broken = write(tmp_path, "broken.yaml", "a: [")
    missing = str(tmp_path / "missing.yaml")
    result = runner.invoke(cli, ["job", "validate", bad, good, worse, broken, missing])
    assert result.exit_code == 2
    err = result.stderr.splitlines()
    assert f"{bad}:name: must be a string, got list" in err
    assert f"{bad}:instanceCount: must be an integer, got 'two'" in err
    assert f"{bad}:colour: unknown field" in err
    assert len([e for e in err if e.startswith(f"{worse}:")]) >= 2
    assert any(e.startswith(f"{worse}:defaultConfig.resource.cpuLimit:") for e in err)
    assert [e for e in err if e.startswith(f"{broken}:")][0].startswith(
        f"{broken}:not valid YAML")
    assert f"{missing}:cannot read: No such file or directory" in err
    assert result.stdout == f"{good}: valid job file\n"


def test_update_specs(cli: typer.Typer, tmp_path: Path) -> None:
    ok = write(tmp_path, "ok.yaml", "batchSize: 2\nmaxUnavailable: 1\nrollbackOnFailure: true\n")
    bad = write(tmp_path, "bad.yaml", "batchSize: -1\nmaxUnavailable: 0\nstartPaused: 3\n")
    result = runner.invoke(cli, ["job", "validate", ok, bad, "-o", "json"])
    assert result.exit_code == 2
    files = json.loads(result.stdout)["files"]
    assert files[0] == {"file": ok, "kind": "update", "valid": True, "problems": []}
    assert files[1]["kind"] == "update" and files[1]["problems"] == [
        "batchSize: must be >= 0", "maxUnavailable: must be >= 1 (leave it out for no limit)",
        "startPaused: must be true or false"]


def test_same_verdict_as_job_create(cli: typer.Typer, tmp_path: Path) -> None:
    """What validate refuses, `job create` refuses locally with the same messages."""
    text = "name: [x]\ninstanceCount: two\n"
    kind, problems = check_text(text)
    path = write(tmp_path, "j.yaml", text)
    created = runner.invoke(cli, ["job", "create", path, "--api", CLOSED])
    assert kind == "job" and created.exit_code == 2
    assert all(p in created.stderr for p in problems)


def test_no_files_is_a_usage_error(cli: typer.Typer) -> None:
    assert runner.invoke(cli, ["job", "validate"]).exit_code == 2


def test_the_example_job_files_are_valid(cli: typer.Typer) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    files = sorted(map(str, [*examples.glob("jobs/*.yaml"), *examples.glob("updates/*.yaml")]))
    result = runner.invoke(cli, ["job", "validate", *files])
    assert files and result.exit_code == 0, result.stderr
    assert len(result.stdout.splitlines()) == len(files)
