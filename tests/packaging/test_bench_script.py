"""infra/bench.sh (`task bench`): each line names a real `peloton bench` command whose options
it accepts, and every benchmark runs even when one misses its goal or fails: the script
names those at the end and exits 1. Run with a stand-in `peloton` first on PATH that
records its arguments (the benchmarks themselves take minutes: docs/performance.md)."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from peloton.cli.main import app

SCRIPT = Path(__file__).resolve().parents[2] / "infra" / "bench.sh"
LINES = [shlex.split(line)[1:] for line in SCRIPT.read_text().splitlines()
         if line.startswith("bench ")]


def test_every_line_is_a_bench_command_whose_options_parse() -> None:
    assert len(LINES) >= 10
    for args in LINES:
        # --help after the options: click parses them first (an unknown command or option
        # fails)
        result = CliRunner().invoke(app, ["bench", *args, "--help"])
        assert result.exit_code == 0, (args, result.output)
        assert "Usage:" in result.output


def _fake_peloton(tmp_path: Path, exits: dict[str, int]) -> dict[str, str]:
    """A `peloton` that appends its arguments to calls.txt and exits with `exits` of its
    benchmark's name (0 otherwise); the environment that puts it first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cases = "".join(f"  {name}) exit {code} ;;\n" for name, code in exits.items())
    fake = bin_dir / "peloton"
    fake.write_text(f'#!/usr/bin/env bash\necho "$*" >> {tmp_path / "calls.txt"}\n'
                    f'case "$2" in\n{cases}esac\nexit 0\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def _run(tmp_path: Path, exits: dict[str, int]) -> tuple[subprocess.CompletedProcess[str],
                                                           list[str]]:
    done = subprocess.run(["bash", str(SCRIPT)], env=_fake_peloton(tmp_path, exits),
                          capture_output=True, text=True, timeout=60)
    return done, (tmp_path / "calls.txt").read_text().splitlines()


def test_all_benchmarks_run_and_the_script_exits_0(tmp_path: Path) -> None:
    done, calls = _run(tmp_path, {})
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls == [" ".join(["bench", *args]) for args in LINES]
    assert done.stdout.splitlines()[-1] == "== every benchmark ran and met its goals"


@pytest.mark.parametrize("exits", [{"scale": 1, "agents": 3}, {"pipeline": 2}])
def test_a_miss_stops_nothing_and_is_named_at_the_end(tmp_path: Path,
                                                      exits: dict[str, int]) -> None:
    done, calls = _run(tmp_path, exits)
    assert done.returncode == 1
    assert calls == [" ".join(["bench", *args]) for args in LINES]  # every one ran
    tail = done.stdout.splitlines()
    start = tail.index(f"== {len(exits)} benchmark(s) missed a goal or failed:")
    named = tail[start + 1:]
    expected = [f"   peloton bench {' '.join(args)} (exit {exits[args[0]]})"
                for args in LINES if args[0] in exits]
    assert named == expected
