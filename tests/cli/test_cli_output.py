"""`-o table|wide|json|yaml` on every get/list command, `--watch`, shell completion."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter

import pytest
import typer
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from peloton.cli import watch
from peloton.cli.output import Output, dump

runner = CliRunner()

GETS = [["job", "get", "job-bad"], ["job", "list"], ["task", "list", "job-bad"],
        ["host", "list"], ["host", "get", "h1"], ["respool", "list"],
        ["respool", "get", "/prod/batch"], ["update", "list", "job-bad"]]

def run(cli: typer.Typer, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr

@pytest.mark.parametrize("args", GETS, ids=" ".join)
def test_every_get_and_list_speaks_json_yaml_and_wide(cli: typer.Typer, api: str,
                                                      args: list[str]) -> None:
    code, as_json, _ = run(cli, *args, "-o", "json", "--api", api)
    assert code == 0, args
    code, as_yaml, _ = run(cli, *args, "-o", "yaml", "--api", api)
    assert code == 0
    assert yaml.safe_load(as_yaml) == json.loads(as_json)  # the same document
    code, table, _ = run(cli, *args, "--api", api)
    assert code == 0 and table
    code, wide, _ = run(cli, *args, "-o", "wide", "--api", api)
    assert code == 0 and wide

def test_wide_adds_columns(cli: typer.Typer, api: str) -> None:
    for args, extra in [(["job", "list"], "PREEMPTIBLE"), (["task", "list", "job-ok"],
                                                           "SANDBOX"),
                        (["host", "list"], "INCARNATION"), (["update", "list", "job-ok"],
                                                            "REQUESTED BY")]:
        _, table, _ = run(cli, *args, "--api", api)
        _, wide, _ = run(cli, *args, "-o", "wide", "--api", api)
        assert extra not in table and extra in wide, args
    _, wide, _ = run(cli, "respool", "list", "-o", "wide", "--api", api)
    assert "disk" in wide

def test_an_unknown_format_is_refused(cli: typer.Typer, api: str) -> None:
    code, _, err = run(cli, "job", "list", "-o", "xml", "--api", api)
    assert code == 2 and "xml" in err

def test_dump_yaml_keeps_the_api_order() -> None:
    assert dump({"b": 1, "a": [1, {"c": None}]}, Output.yaml) == "b: 1\na:\n- 1\n- c: null\n"
    assert json.loads(dump({"b": 1}, Output.json)) == {"b": 1}

# ---- --watch ------------------------------------------------------------------------------
lines = st.lists(st.sampled_from(["a", "b", "c", "d", ""]), max_size=8)

@given(lines, lines)
def test_changes_are_what_the_new_frame_adds(previous: list[str], current: list[str]) -> None:
    out = watch.changes(previous, current)
    assert Counter(out) == Counter(current) - Counter(previous)
    positions = iter(range(len(current)))  # a subsequence of current, in its order
    assert all(any(current[i] == line for i in positions) for line in out)

@given(lines)
def test_no_change_prints_nothing(frame: list[str]) -> None:
    assert watch.changes(frame, frame) == []
    assert watch.changes(frame, list(reversed(frame))) == []
    assert watch.changes([], frame) == frame

def _loop(frames: list[str], *, tty: bool, machine: bool) -> str:
    shown: list[str] = []
    seq = iter(frames)

    def sleep(_: float) -> None:
        if len(shown) > 100:
            raise AssertionError("runaway")

    def fetch() -> str:
        try:
            return next(seq)
        except StopIteration:
            raise KeyboardInterrupt from None  # Ctrl-C

    watch.run(fetch, lambda text: text, 1.0, tty=tty, machine=machine, write=shown.append,
              sleep=sleep)
    return "".join(shown)

def test_off_a_terminal_only_changed_lines_follow_the_first_frame() -> None:
    frames = ["ID STATE\nj1 RUNNING\nj2 PENDING\n", "ID STATE\nj1 RUNNING\nj2 PENDING\n",
              "ID STATE\nj1 SUCCEEDED\nj2 PENDING\n"]
    assert _loop(frames, tty=False, machine=False) == frames[0] + "j1 SUCCEEDED\n"

def test_off_a_terminal_documents_are_repeated_whole_when_they_change() -> None:
    frames = ['{"a": 1}\n', '{"a": 1}\n', '{"a": 2}\n']
    assert _loop(frames, tty=False, machine=True) == '{"a": 1}\n{"a": 2}\n'

def test_on_a_terminal_every_frame_is_redrawn() -> None:
    out = _loop(["x\n", "x\n"], tty=True, machine=False)
    assert out.count(watch.CLEAR) == 2 and out.endswith("x\n")

def test_watch_against_the_api_until_ctrl_c(cli: typer.Typer, api: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []

    def sleep(seconds: float) -> None:
        calls.append(seconds)
        if len(calls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(watch.time, "sleep", sleep)
    code, out, _ = run(cli, "job", "list", "-w", "--interval", "0.5", "--api", api)
    assert code == 0 and calls == [0.5, 0.5, 0.5]
    assert out.count("JOB ID") == 1 and "job-ok" in out  # nothing changed: one frame
    calls.clear()
    code, out, _ = run(cli, "job", "get", "job-ok", "-w", "-o", "yaml", "--api", api)
    assert code == 0 and out.count("---") == 1
    assert yaml.safe_load(out)["job_id"] == "job-ok"

def test_watch_refuses_a_silly_interval(cli: typer.Typer, api: str) -> None:
    code, _, err = run(cli, "host", "list", "-w", "--interval", "0", "--api", api)
    assert code == 2 and "interval" in err

def test_watch_stops_on_api_errors(cli: typer.Typer, api: str) -> None:
    code, _, err = run(cli, "job", "get", "ghost", "-w", "--api", api)
    assert code == 1 and "not found" in err

# ---- shell completion -----------------------------------------------------------------------
def _peloton(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("peloton")
    assert exe, "the peloton console script is installed with the package"
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})}, check=False)


def test_show_completion_prints_the_script_for_the_shell_it_runs_in() -> None:
    exe = shutil.which("peloton")
    assert exe
    result = subprocess.run(["bash", "-c", f"{exe} --show-completion"], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0
    assert "complete -o default -F _peloton_completion peloton" in result.stdout


@pytest.mark.parametrize(("shell", "marker"), [("bash", "_peloton_completion()"),
                                               ("zsh", "#compdef peloton"),
                                               ("fish", "complete --command peloton")])
def test_completion_script_for_a_named_shell(shell: str, marker: str) -> None:
    result = _peloton(env={"_PELOTON_COMPLETE": f"source_{shell}"})
    assert result.returncode == 0 and marker in result.stdout


def test_completion_completes_commands_and_output_formats() -> None:
    words = _peloton(env={"_PELOTON_COMPLETE": "complete_bash", "COMP_WORDS": "peloton jo",
                          "COMP_CWORD": "1"})
    assert words.stdout.split() == ["job"]
    formats = _peloton(env={"_PELOTON_COMPLETE": "complete_bash",
                            "COMP_WORDS": "peloton job list -o ", "COMP_CWORD": "4"})
    assert formats.stdout.split() == ["table", "wide", "json", "yaml"]
