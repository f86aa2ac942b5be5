"""`peloton task logs --tail N --follow --stderr` (the API in conftest serves job-ok's
logs from a stand-in agent: instance 0 one line, instance 1 five lines)."""

from __future__ import annotations

import json
from typing import Any

import typer
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from peloton.cli.client import ApiError
from peloton.cli.logs_cmd import follow, new_suffix, run_outcome, tail_lines

runner = CliRunner()


def run(cli: typer.Typer, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_tail_prints_the_last_lines(cli: typer.Typer, api: str) -> None:
    code, out, _ = run(cli, "task", "logs", "job-ok", "1", "--tail", "2", "--api", api)
    assert code == 0 and out == "line 4\nline 5\n"
    code, out, _ = run(cli, "task", "logs", "job-ok", "1", "--tail", "9", "--api", api)
    assert out.count("line") == 5
    code, out, _ = run(cli, "task", "logs", "job-ok", "1", "--tail", "1", "-o", "yaml",
                       "--api", api)
    assert code == 0 and yaml.safe_load(out)["log"] == "line 5\n"
    code, _, err = run(cli, "task", "logs", "job-ok", "1", "--tail", "-1", "--api", api)
    assert code == 2


def test_follow_a_run_that_succeeded_prints_it_and_exits_0(cli: typer.Typer,
                                                           api: str) -> None:
    code, out, _ = run(cli, "task", "logs", "job-ok", "1", "--follow", "--tail", "3",
                       "--api", api)
    assert code == 0 and out == "line 3\nline 4\nline 5\n"


def test_follow_a_failed_run_exits_1(cli: typer.Typer, api: str) -> None:
    # job-bad instance 1 failed on both runs; its agent has no log: nothing to print
    code, out, _ = run(cli, "task", "logs", "job-bad", "1", "-f", "--run", "1", "--api", api)
    assert code == 1 and out == ""


def test_stderr_and_bad_combinations(cli: typer.Typer, api: str) -> None:
    code, _, err = run(cli, "task", "logs", "job-ok", "0", "--stderr", "--api", api)
    assert code == 1 and "has no stderr log" in err
    code, _, err = run(cli, "task", "logs", "job-ok", "0", "-f", "-o", "json", "--api", api)
    assert code == 2 and "--follow" in err
    code, _, err = run(cli, "task", "logs", "ghost", "0", "-f", "--api", api)
    assert code == 1 and "not found" in err


class GrowingRun:
    """A run whose log grows by one line per poll and that ends after `polls` polls."""

    def __init__(self, polls: int, state: str, rotate_at: int | None = None) -> None:
        self.n, self.polls, self.state, self.rotate_at = 0, polls, state, rotate_at

    def task(self, job_id: str, instance: int) -> dict[str, Any]:
        self.n += 1
        done = self.n > self.polls
        return {"run": 2, "state": self.state if done else "RUNNING", "history": []}

    def logs(self, job_id: str, instance: int, stream: str = "stdout",
             run: int | None = None) -> str:
        if self.n == 1:
            raise ApiError(404, "not placed yet", [])
        first = self.rotate_at if self.rotate_at and self.n >= self.rotate_at else 1
        return "".join(f"l{i}\n" for i in range(first, self.n))


def test_follow_prints_each_new_suffix_until_the_run_ends() -> None:
    out: list[str] = []
    code = follow(GrowingRun(4, "SUCCEEDED"), "j", 0, "stdout", None, None, 0.0,
                  out.append, sleep=lambda _: None)
    assert code == 0 and out == ["l1\n", "l2\n", "l3\n", "l4\n"]
    out.clear()
    code = follow(GrowingRun(3, "KILLED"), "j", 0, "stdout", None, None, 0.0, out.append,
                  sleep=lambda _: None)
    assert code == 1 and "".join(out) == "l1\nl2\nl3\n"


def test_follow_reprints_a_replaced_log() -> None:
    out: list[str] = []
    follow(GrowingRun(4, "SUCCEEDED", rotate_at=4), "j", 0, "stdout", None, None, 0.0,
           out.append, sleep=lambda _: None)
    assert out == ["l1\n", "l2\n", "l4\n"]  # l1..l3 replaced by l4..: reprinted whole


@given(st.lists(st.text(alphabet="ab\n", max_size=6), max_size=6))
def test_suffixes_of_a_growing_log_add_up_to_the_log(chunks: list[str]) -> None:
    printed, shown = "", ""
    for i in range(len(chunks) + 1):
        current = "".join(chunks[:i])
        shown += new_suffix(printed, current)
        printed = current
    assert shown == "".join(chunks)


@given(st.text(alphabet="ab\n", max_size=20), st.integers(0, 8))
def test_tail_lines_is_a_suffix_with_at_most_n_lines(text: str, n: int) -> None:
    tail = tail_lines(text, n)
    assert text.endswith(tail)
    assert len(tail.splitlines()) == min(n, len(text.splitlines()))
    assert tail_lines(text, None) == text


def test_run_outcome() -> None:
    history = [{"run": 1, "state": "RUNNING"}, {"run": 1, "state": "FAILED"}]
    assert run_outcome({"run": 1, "state": "RUNNING"}, 1) is None
    assert run_outcome({"run": 1, "state": "SUCCEEDED"}, 1) == 0
    assert run_outcome({"run": 1, "state": "LOST"}, 1) == 1
    assert run_outcome({"run": 2, "state": "RUNNING", "history": history}, 1) == 1
    assert run_outcome({"run": 1, "state": "PENDING"}, 2) is None  # not started yet
    assert json.dumps(run_outcome({"run": 3, "state": "RUNNING", "history": []}, 2)) == "1"
