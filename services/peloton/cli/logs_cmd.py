"""`peloton task logs JOB INSTANCE [--run N] [--stderr] [--tail N] [--follow]`.

Prints a task run's stdout (or stderr) as the API serves it (GET
/v1/jobs/{job}/tasks/{instance}/logs, fetched from the agent of the run's host). `--tail N`
prints only the last N lines. `--follow` pins the run (the current one unless --run), then
polls: the task's state first, then the whole log (the endpoint has no offsets or ranges),
printing only the new suffix (all of it again if the log was replaced rather than grown),
until the run has ended; then the command exits with the run's outcome: 0 SUCCEEDED, 1
FAILED, KILLED or LOST. A run not yet placed simply has no log yet. Ctrl-C exits 130.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Annotated, Any, Protocol

import typer

from peloton.cli.client import ApiError
from peloton.cli.output import Output, OutputOpt, emit
from peloton.cli.user_cmds import EXIT_INVALID, ApiOpt, api_client

__all__ = ["follow", "new_suffix", "run_outcome", "tail_lines", "task_logs"]

TERMINAL = {"SUCCEEDED": 0, "FAILED": 1, "KILLED": 1, "LOST": 1}


class LogSource(Protocol):
    def task(self, job_id: str, instance: int) -> dict[str, Any]: ...

    def logs(self, job_id: str, instance: int, stream: str = "stdout",
             run: int | None = None) -> str: ...


def tail_lines(text: str, n: int | None) -> str:
    """The last `n` lines of `text` (all of it when n is None)."""
    if n is None:
        return text
    if n <= 0:
        return ""
    return "".join(text.splitlines(keepends=True)[-n:])


def new_suffix(printed: str, current: str) -> str:
    """What to print now that the log reads `current`, `printed` having been printed."""
    return current[len(printed):] if current.startswith(printed) else current


def run_outcome(task: dict[str, Any], run: int) -> int | None:
    """The exit code for run `run` of `task` once it has ended (None: still going)."""
    if int(task["run"]) == run:
        return TERMINAL.get(task["state"])
    if int(task["run"]) < run:
        return None  # not started yet
    ends = [h["state"] for h in task.get("history") or []
            if h["run"] == run and h["state"] in TERMINAL]
    return TERMINAL[ends[-1]] if ends else 1  # replaced by a later run: it ended


def _fetch(client: LogSource, job_id: str, instance: int, stream: str, run: int) -> str:
    try:
        return client.logs(job_id, instance, stream, run)
    except ApiError as exc:
        if exc.status == 404:  # not placed yet, or no log written yet
            return ""
        raise


def follow(client: LogSource, job_id: str, instance: int, stream: str, run: int | None,
           tail: int | None, interval: float, write: Callable[[str], Any],
           sleep: Callable[[float], None] = time.sleep) -> int:
    """Print the run's log as it grows until the run ends; return its exit code."""
    the_run = run or int(client.task(job_id, instance)["run"])
    printed: str | None = None
    while True:
        code = run_outcome(client.task(job_id, instance), the_run)
        text = _fetch(client, job_id, instance, stream, the_run)
        chunk = tail_lines(text, tail) if printed is None else new_suffix(printed, text)
        if chunk:
            write(chunk)
        printed = text
        if code is not None:
            return code
        sleep(interval)


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def task_logs(
    job_id: str, instance: int,
    stream: Annotated[str, typer.Option(help="stdout or stderr")] = "stdout",
    stderr: Annotated[bool, typer.Option("--stderr", help="same as --stream stderr")] = False,
    run: Annotated[int | None, typer.Option(min=1, help="default: the current run")] = None,
    tail: Annotated[int | None, typer.Option(
        min=0, help="print only the last N lines", show_default=False)] = None,
    follow_: Annotated[bool, typer.Option(
        "--follow", "-f", help="keep printing until the run ends; exit with its outcome "
        "(0 succeeded, 1 otherwise)")] = False,
    interval: Annotated[float, typer.Option(min=0.05, help="seconds between polls with "
                                            "--follow")] = 1.0,
    output: OutputOpt = Output.table, api: ApiOpt = None,
) -> None:
    """Print a task run's stdout or stderr (fetched from its host's agent)."""
    if stream not in ("stdout", "stderr"):
        raise typer.BadParameter("stdout or stderr", param_hint="--stream")
    stream = "stderr" if stderr else stream
    if follow_ and output.machine:
        typer.echo("error: --follow prints text; it does not take -o json or yaml", err=True)
        raise typer.Exit(EXIT_INVALID)
    with api_client(api) as client:
        if follow_:
            try:
                code = follow(client, job_id, instance, stream, run, tail, interval, _write)
            except KeyboardInterrupt:
                raise typer.Exit(130) from None
            raise typer.Exit(code)
        text = tail_lines(client.logs(job_id, instance, stream, run), tail)
    if output.machine:
        emit({"job_id": job_id, "instance": instance, "run": run, "stream": stream,
              "log": text}, output)
    else:
        _write(text)
