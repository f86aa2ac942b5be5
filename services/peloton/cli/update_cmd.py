"""Rolling updates from the command line, over the API (see peloton.api.updates):

    peloton job update JOB FILE [--batch-size N] [--max-unavailable N] [--max-failures N]
        [--max-instance-retries N] [--rollback-on-failure] [--start-paused] [--canary N]
        [--update-id ID] [--wait]
    peloton job restart JOB [--instances 0-3,7] [--batch-size N] [--max-unavailable N]
                        [--wait]
    peloton job stop JOB
    peloton update get ID | list JOB | pause ID | resume ID | abort ID | rollback ID

`--wait` polls the update until it is final, printing a progress line whenever it moves
(state, instances done/total, failed, the reason it gives), and exits 0 when it SUCCEEDED,
1 otherwise (ROLLED_BACK, ABORTED, FAILED, REJECTED, or --timeout). Every command takes
`-o json` (the API's JSON; with --wait the progress lines go to stderr) and `--api URL`.
Exit codes as the other user commands, every problem printed as `field: reason`: 2 invalid
input (the job file and the settings are checked before anything is sent; a 400 from the
API), 1 the API refused (unknown job or update, a live update, a state that forbids the
command), 3 the API is unreachable.
"""

from __future__ import annotations

import getpass
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from peloton.cli.client import ApiError, PelotonClient
from peloton.cli.output import emit
from peloton.cli.user_cmds import (
    EXIT_API_ERROR,
    EXIT_INVALID,
    ApiOpt,
    Output,
    OutputOpt,
    _ts,
    api_client,
    read_input_file,
)
from peloton.cli.watch import IntervalOpt as WatchIntervalOpt
from peloton.cli.watch import WatchOpt, show
from peloton.jobmgr.domain.validation import check_job_document
from peloton.model.jobfile import JobFileError, parse_job_file
from peloton.updates.domain.rolling import UpdateSettings, UpdateSpecError

__all__ = ["register", "FINAL"]

FINAL = ("SUCCEEDED", "ROLLED_BACK", "ABORTED", "FAILED", "REJECTED")
COMMANDS = ("pause", "resume", "abort", "rollback")
# API query parameter -> UpdateSettings attribute
_SETTINGS = {"batch_size": "batch_size", "max_unavailable": "max_unavailable",
             "max_failures": "max_tolerable_instance_failures",
             "max_instance_retries": "max_instance_retries", "canary": "canary"}

BatchOpt = Annotated[int | None, typer.Option(
    "--batch-size", help="Instances in flight at once (default 0: all).", show_default=False)]
MaxUnavailableOpt = Annotated[int | None, typer.Option(
    "--max-unavailable", help="Instances down at once (default: the job's "
    "sla.maximumUnavailableInstances, else no limit).", show_default=False)]
WaitOpt = Annotated[bool, typer.Option("--wait", help="Follow the update until it ends.")]
TimeoutOpt = Annotated[float | None, typer.Option(help="Give up waiting after seconds.")]
IntervalOpt = Annotated[float, typer.Option(help="Seconds between polls.", hidden=True)]
ByOpt = Annotated[str | None, typer.Option("--by", help="Who asks (default: your user name).")]


def _err(message: str) -> None:
    typer.echo(message, err=True)


def _invalid(problems: list[str], what: str = "invalid request") -> typer.Exit:
    _err(f"error: {what}")
    for p in problems:
        _err(f"  {p}")
    return typer.Exit(EXIT_INVALID)


def _settings_problems(params: dict[str, Any]) -> list[str]:
    out = []
    for param, attr in _SETTINGS.items():
        if params.get(param) is None:
            continue
        try:
            UpdateSettings(**{attr: params[param]})
        except UpdateSpecError as exc:
            out.append(f"{param}: {exc.reason}")
    return out


def _read_job_file(file: Path, job_id: str) -> str:
    text = read_input_file(file)
    try:
        check_job_document(parse_job_file(text, job_id, int(time.time() * 1000)))
    except JobFileError as exc:
        raise _invalid(exc.problems, f"{file} is not a valid job file:") from exc
    return text


def _done(u: dict[str, Any]) -> str:
    line = f"{len(u['done'])}/{u['instances']} done"
    if u["failed"]:
        line += f", {len(u['failed'])} failed ({','.join(map(str, u['failed']))})"
    if u["in_flight"]:
        line += f", in flight: {','.join(map(str, u['in_flight']))}"
    return line


def _progress(u: dict[str, Any]) -> str:
    line = f"{u['state']} {_done(u)}"
    return f"{line}: {u['reason']}" if u["reason"] else line


def _wait(client: PelotonClient, update_id: str, output: Output, timeout: float | None,
          interval: float) -> dict[str, Any]:
    deadline = None if timeout is None else time.monotonic() + timeout
    last = ""
    while True:
        try:
            u: dict[str, Any] | None = client.get_update(update_id)
        except ApiError as exc:
            if exc.status != 404:  # 404: not projected yet
                raise
            u = None
        if u is not None:
            line = _progress(u)
            if line != last:
                typer.echo(line, err=output.machine)
                last = line
            if u["state"] in FINAL:
                return u
        if deadline is not None and time.monotonic() > deadline:
            _err(f"error: update {update_id} did not end within {timeout:g}s")
            raise typer.Exit(EXIT_API_ERROR)
        time.sleep(interval)


def _accepted(client: PelotonClient, accepted: dict[str, Any], what: str, wait: bool,
              output: Output, timeout: float | None, interval: float) -> None:
    if not wait:
        if output.machine:
            emit(accepted, output)
        else:
            typer.echo(f"{what} of job {accepted['job_id']} requested: update "
                       f"{accepted['update_id']}")
        return
    if not output.machine:
        typer.echo(f"waiting for update {accepted['update_id']} of job {accepted['job_id']}")
    final = _wait(client, accepted["update_id"], output, timeout, interval)
    if output.machine:
        emit(final, output)
    if final["state"] != "SUCCEEDED":
        raise typer.Exit(EXIT_API_ERROR)


# ---- job update, restart, stop ----------------------------------------------------------
def job_update(
    job_id: Annotated[str, typer.Argument(help="The job to update.")],
    file: Annotated[Path, typer.Argument(help="Its new job file (YAML or JSON).")],
    batch_size: BatchOpt = None, max_unavailable: MaxUnavailableOpt = None,
    max_failures: Annotated[int | None, typer.Option(
        "--max-failures", help="Failed instances before the update fails (default 0: "
        "never).", show_default=False)] = None,
    max_instance_retries: Annotated[int | None, typer.Option(
        "--max-instance-retries", help="Failed runs at the new version before an instance "
        "counts as failed (default 0: no limit).", show_default=False)] = None,
    rollback_on_failure: Annotated[bool, typer.Option(
        "--rollback-on-failure", help="Roll back when the update fails.")] = False,
    start_paused: Annotated[bool, typer.Option(
        "--start-paused", help="Start paused: `peloton update resume` starts it.")] = False,
    canary: Annotated[int | None, typer.Option(
        "--canary", help="Update this many instances, then pause.",
        show_default=False)] = None,
    update_id: Annotated[str | None, typer.Option("--update-id",
                                                  help="Default: a new uuid.")] = None,
    wait: WaitOpt = False, timeout: TimeoutOpt = None, interval: IntervalOpt = 0.5,
    requested_by: ByOpt = None, output: OutputOpt = Output.table, api: ApiOpt = None,
) -> None:
    """Roll a SERVICE or STATEFUL job to a new job file, a batch at a time."""
    params: dict[str, Any] = {
        "batch_size": batch_size, "max_unavailable": max_unavailable,
        "max_failures": max_failures, "max_instance_retries": max_instance_retries,
        "rollback_on_failure": rollback_on_failure or None,
        "start_paused": start_paused or None, "canary": canary, "update_id": update_id,
        "requested_by": requested_by or getpass.getuser()}
    problems = _settings_problems(params)
    if problems:
        raise _invalid(problems)
    text = _read_job_file(file, job_id)
    with api_client(api) as client:
        accepted = client.update_job(job_id, text, params)
        _accepted(client, accepted, "update", wait, output, timeout, interval)


def job_restart(
    job_id: Annotated[str, typer.Argument(help="The job to restart.")],
    batch_size: BatchOpt = None, max_unavailable: MaxUnavailableOpt = None,
    wait: WaitOpt = False, timeout: TimeoutOpt = None, interval: IntervalOpt = 0.5,
    requested_by: ByOpt = None, output: OutputOpt = Output.table, api: ApiOpt = None,
    instances: Annotated[str | None, typer.Option(
        "--instances", help="Only these instances, e.g. 0-3,7 (default: all).")] = None,
) -> None:
    """Restart every instance (or --instances) of a SERVICE or STATEFUL job, a batch at a
    time and never more than maximumUnavailableInstances down (a rolling update to its
    current config)."""
    params: dict[str, Any] = {"batch_size": batch_size, "max_unavailable": max_unavailable,
                              "requested_by": requested_by or getpass.getuser(),
                              "instances": instances}
    problems = _settings_problems(params)
    if problems:
        raise _invalid(problems)
    with api_client(api) as client:
        accepted = client.restart_job(job_id, params)
        _accepted(client, accepted, "restart", wait, output, timeout, interval)


def job_stop(job_id: Annotated[str, typer.Argument(help="The job to stop.")],
             requested_by: ByOpt = None, output: OutputOpt = Output.table,
             api: ApiOpt = None,
             instances: Annotated[str | None, typer.Option(
                 "--instances", help="Only these instances, e.g. 0-3,7 (default: all).")] =
             None) -> None:
    """Stop a job, or some of its instances: they are killed and not restarted. A SERVICE
    or STATEFUL job stopped whole is STOPPED and `job start` runs it again (`job kill`
    ends a job for good)."""
    with api_client(api) as client:
        data = client.stop_job(job_id, requested_by or getpass.getuser(), instances)
    if output.machine:
        emit(data, output)
    else:
        typer.echo(f"stop of job {job_id} requested")


def job_start(job_id: Annotated[str, typer.Argument(help="The job to start again.")],
              requested_by: ByOpt = None, output: OutputOpt = Output.table,
              api: ApiOpt = None,
              instances: Annotated[str | None, typer.Option(
                  "--instances", help="Only these instances, e.g. 0-3,7 (default: all).")] =
              None) -> None:
    """Start a STOPPED SERVICE or STATEFUL job, or its stopped instances, again (a killed
    job has ended and is submitted again)."""
    with api_client(api) as client:
        data = client.start_job(job_id, requested_by or getpass.getuser(), instances)
    if output.machine:
        emit(data, output)
    else:
        typer.echo(f"start of job {job_id} requested")


# ---- update get, list, commands ----------------------------------------------------------
def update_get(update_id: Annotated[str, typer.Argument(help="The update's id.")],
               output: OutputOpt = Output.table, watch: WatchOpt = False,
               interval: WatchIntervalOpt = 2.0, api: ApiOpt = None) -> None:
    """Show an update: state, progress and why it waits."""
    show(lambda client: client.get_update(update_id), _update_detail, output, watch,
         interval, api)


def _update_detail(u: dict[str, Any], output: Output) -> list[Any]:
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    versions = ("-" if u["from_version"] is None
                else f"{u['from_version']} -> {u['to_version']}")
    state = u["state"] + (f" (resumes {u['resume_to']})" if u.get("resume_to") else "")
    rows = [("update id", u["update_id"]), ("job id", u["job_id"]), ("state", state),
            ("progress", _done(u)),
            ("reason", u["reason"] or "-"), ("versions", versions),
            ("instances", f"{u['from_instance_count']} -> {u['to_instance_count']}"),
            ("settings", " ".join(f"{k}={v}" for k, v in sorted(u["settings"].items()))
             or "-"),
            ("requested by", u["requested_by"] or "-"), ("created", _ts(u["created_at"])),
            ("updated", _ts(u["updated_at"]))]
    rejection = u.get("last_command_rejection")
    if rejection:
        rows.append(("refused", f"{rejection['command']}: {rejection['reason']}"))
    if output.more:
        rows += [("done", ",".join(map(str, u.get("done") or [])) or "-"),
                 ("failed", ",".join(map(str, u.get("failed") or [])) or "-")]
    for key, value in rows:
        table.add_row(key, value)
    return [table]


def update_list(job_id: Annotated[str, typer.Argument(help="The job.")],
                output: OutputOpt = Output.table, watch: WatchOpt = False,
                interval: WatchIntervalOpt = 2.0, api: ApiOpt = None) -> None:
    """List a job's updates, newest first."""
    show(lambda client: client.job_updates(job_id), _update_table, output, watch, interval,
         api)


def _update_table(data: dict[str, Any], output: Output) -> list[Any]:
    more = output.more
    table = Table("UPDATE ID", "STATE", "DONE", "FAILED", "VERSIONS", "CREATED", "REASON",
                  *(("UPDATED", "REQUESTED BY", "SETTINGS") if more else ()))
    for u in data["updates"]:
        extra = (_ts(u.get("updated_at")), u.get("requested_by") or "-",
                 " ".join(f"{k}={v}" for k, v in sorted((u.get("settings") or {}).items()))
                 or "-") if more else ()
        versions = ("-" if u["from_version"] is None
                    else f"{u['from_version']} -> {u['to_version']}")
        table.add_row(u["update_id"], u["state"], f"{len(u['done'])}/{u['instances']}",
                      str(len(u["failed"])), versions, _ts(u["created_at"]), u["reason"],
                      *extra)
    return [table]


def _command(command: str) -> Any:
    def run(update_id: Annotated[str, typer.Argument(help="The update's id.")],
            requested_by: ByOpt = None, output: OutputOpt = Output.table,
            api: ApiOpt = None) -> None:
        with api_client(api) as client:
            data = client.update_command(update_id, command,
                                         requested_by or getpass.getuser())
        if output.machine:
            emit(data, output)
        else:
            typer.echo(f"{command} of update {update_id} (job {data['job_id']}) requested")

    run.__doc__ = {"pause": "Pause an update (resume continues it).",
                   "resume": "Resume a paused update.",
                   "abort": "Abort an update: instances stay as they are.",
                   "rollback": "Roll an update back to the job's previous config."}[command]
    return run


def register(job_app: typer.Typer) -> typer.Typer:
    """Add `update`, `restart`, `stop` and `start` to `job`; return the `update`
    command's typer."""
    job_app.command("update")(job_update)
    job_app.command("restart")(job_restart)
    job_app.command("stop")(job_stop)
    job_app.command("start")(job_start)
    update_app = typer.Typer(help="Inspect, pause, resume, abort or roll back rolling "
                                  "updates.", no_args_is_help=True)
    update_app.command("get")(update_get)
    update_app.command("list")(update_list)
    for command in COMMANDS:
        update_app.command(command)(_command(command))
    return update_app
