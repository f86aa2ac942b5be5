"""`peloton bench` progress when stderr is not a terminal (CI, a log): plain lines."""

from __future__ import annotations

import pytest

from peloton.cli.bench_cmd import _bar


def test_progress_without_a_terminal_prints_each_new_step_and_rate_limits_the_rest(
        capsys: pytest.CaptureFixture[str]) -> None:
    with _bar("burst", every_s=3600.0) as say:
        say("starting minicluster", 0.0)
        say("submitting 10 jobs", 0.0)
        say("jobs terminal 1/10", 0.1)
        say("jobs terminal 2/10", 0.2)  # same step, within every_s: not printed
        say("jobs terminal 2/10", 0.2)
    lines = capsys.readouterr().err.splitlines()
    assert [ln.split("] ", 1)[1] for ln in lines] == [
        "starting minicluster", "submitting 10 jobs", "jobs terminal 1/10"]
    assert all(ln.startswith("[burst ") for ln in lines)
