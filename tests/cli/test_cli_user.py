"""`peloton job|task|host|respool` against a real API server (see conftest)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import typer
from api_tokens import headers
from typer.testing import CliRunner

from peloton.api.publisher import MemoryPublisher
from peloton.cli.user_cmds import register

CLOSED = "http://127.0.0.1:9"  # nothing listens: a command that calls the API exits 3
JOB = """\
name: {name}
owner: me
instanceCount: 2
respool: /prod/batch
defaultConfig:
  resource: {{cpuLimit: 0.5, memLimitMb: 64}}
  command: {{value: "echo hi"}}
  restartPolicy: {{maxFailures: 1}}
"""
runner = CliRunner()


def run(cli: typer.Typer, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def job_file(tmp_path: Path, name: str = "hello", text: str | None = None) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text if text is not None else JOB.format(name=name))
    return str(path)


def test_register_returns_the_respool_typer() -> None:
    app = typer.Typer()
    respool = register(app)
    assert {g.name for g in app.registered_groups} == {"job", "update", "task", "host",
                                                       "respool"}

    @respool.command("entitlement")
    def entitlement() -> None:  # what another module adds to the respool group
        typer.echo("what-if")

    result = runner.invoke(app, ["respool", "entitlement"])
    assert result.exit_code == 0 and result.stdout == "what-if\n"


def test_invalid_job_file_is_refused_locally(cli: typer.Typer, tmp_path: Path) -> None:
    bad = job_file(tmp_path, "bad", "name: [x]\ninstanceCount: two\ncolour: blue\n")
    code, out, err = run(cli, "job", "create", bad, "--api", CLOSED)
    assert code == 2 and out == ""
    assert "name: must be a string" in err
    assert "instanceCount: must be an integer" in err
    assert "colour: unknown field" in err


@pytest.mark.parametrize("args", [["--job-id", "no spaces please"], []])
def test_bad_job_id_or_missing_file_exit_2(cli: typer.Typer, tmp_path: Path,
                                           args: list[str]) -> None:
    path = job_file(tmp_path) if args else str(tmp_path / "missing.yaml")
    code, _, err = run(cli, "job", "create", path, *args, "--api", CLOSED)
    assert code == 2 and err.startswith("error:")


def test_unreachable_api_exits_3_with_one_line(cli: typer.Typer, tmp_path: Path) -> None:
    code, out, err = run(cli, "job", "create", job_file(tmp_path), "--api", CLOSED)
    assert code == 3 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith(f"error: cannot reach the Peloton API at {CLOSED}")
    code, _, _ = run(cli, "host", "list", "--api", CLOSED)
    assert code == 3


def test_api_url_from_the_environment(cli: typer.Typer, api: str) -> None:
    result = runner.invoke(cli, ["host", "list", "-o", "json"], env={"PELOTON_API": api})
    assert result.exit_code == 0 and json.loads(result.stdout)["hosts"]


def test_create_prints_the_api_json(cli: typer.Typer, api: str, tmp_path: Path,
                                    served: tuple[str, MemoryPublisher]) -> None:
    code, out, _ = run(cli, "job", "create", job_file(tmp_path), "--job-id", "cli-1",
                       "-o", "json", "--api", api)
    assert code == 0 and json.loads(out) == {"job_id": "cli-1", "warnings": []}
    assert served[1].events[-1].key == "cli-1"
    code, out, _ = run(cli, "job", "create", job_file(tmp_path), "--api", api)
    assert code == 0 and "submitted" in out


def test_create_and_wait_until_it_succeeds(cli: typer.Typer, api: str,
                                           tmp_path: Path) -> None:
    code, out, _ = run(cli, "job", "create", job_file(tmp_path, "works"), "--wait",
                       "--job-id", "cli-ok", "-o", "json", "--api", api)
    assert code == 0
    assert json.loads(out)["state"] == "SUCCEEDED"
    code, out, _ = run(cli, "job", "create", job_file(tmp_path, "works"), "--wait",
                       "--job-id", "cli-ok-2", "--api", api)
    assert code == 0 and "SUCCEEDED" in out


def test_create_and_wait_for_a_failing_job_exits_1(cli: typer.Typer, api: str,
                                                   tmp_path: Path) -> None:
    code, out, _ = run(cli, "job", "create", job_file(tmp_path, "fails"), "--wait",
                       "--job-id", "cli-bad", "-o", "json", "--api", api)
    assert code == 1
    job = json.loads(out)
    assert job["state"] == "FAILED" and job["task_counts"] == {"FAILED": 1, "SUCCEEDED": 1}


def test_json_output_is_exactly_the_api_json(cli: typer.Typer, api: str) -> None:
    for args, path in [
        (["job", "get", "job-bad"], "/v1/jobs/job-bad"),
        (["job", "list", "--state", "FAILED"], "/v1/jobs?state=FAILED&limit=100"),
        (["task", "list", "job-bad"], "/v1/jobs/job-bad/tasks"),
        (["host", "list"], "/v1/hosts"),
        (["respool", "list"], "/v1/pools"),
    ]:
        code, out, _ = run(cli, *args, "-o", "json", "--api", api)
        assert code == 0, args
        assert json.loads(out) == httpx.get(api + path, headers=headers()).json(), args


def test_tables(cli: typer.Typer, api: str) -> None:
    code, out, _ = run(cli, "job", "list", "--api", api)
    assert code == 0 and "job-ok" in out and "SUCCEEDED" in out
    code, out, _ = run(cli, "job", "get", "job-rej", "--api", api)
    assert "REJECTED" in out and "/nope does not exist" in out
    code, out, _ = run(cli, "task", "list", "job-bad", "--history", "--api", api)
    assert code == 0 and "FAILED" in out and "RUNNING -> FAILED" in out
    code, out, _ = run(cli, "host", "list", "--api", api)
    assert "h1" in out and "LOST" in out
    code, out, _ = run(cli, "respool", "list", "--api", api)
    assert code == 0
    lines = out.splitlines()
    batch = next(line for line in lines if "/prod/batch" in line)
    prod = next(line for line in lines if "/prod " in line)
    assert batch.index("/prod/batch") > prod.index("/prod")  # a child, indented


def test_kill(cli: typer.Typer, api: str, served: tuple[str, MemoryPublisher]) -> None:
    code, out, _ = run(cli, "job", "kill", "job-wait", "--instances", "0", "-o", "json",
                       "--api", api)
    assert code == 0 and json.loads(out) == {"job_id": "job-wait", "instances": [0]}
    assert served[1].events[-1].type == "JobKillRequested"
    code, _, err = run(cli, "job", "kill", "job-wait", "--instances", "a,b", "--api", api)
    assert code == 2
    code, _, err = run(cli, "job", "kill", "job-wait", "--instances", "4", "--api", api)
    assert code == 2 and "no instance 4" in err  # a 400: bad input


def test_api_errors_exit_1_with_the_message(cli: typer.Typer, api: str) -> None:
    code, out, err = run(cli, "job", "get", "ghost", "--api", api)
    assert code == 1 and out == ""
    assert err.strip() == "error: job ghost not found (it may still be in flight)"


def test_logs(cli: typer.Typer, api: str) -> None:
    code, out, _ = run(cli, "task", "logs", "job-ok", "0", "--api", api)
    assert code == 0 and out == "hello from 0\n"
    code, out, _ = run(cli, "task", "logs", "job-ok", "0", "-o", "json", "--api", api)
    assert json.loads(out)["log"] == "hello from 0\n"
    code, _, err = run(cli, "task", "logs", "job-ok", "1", "--stream", "stderr", "--api", api)
    assert code == 1 and "has no stderr log" in err
