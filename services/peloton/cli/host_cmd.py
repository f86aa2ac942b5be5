"""`peloton host maintenance start|complete|cancel HOST... [--deadline 10m]` over the API.

Each host gets its own request (POST /v1/hosts/{host}/maintenance); the host manager then
decides (its answer shows in `peloton host list`: STATE, and in GET /v1/hosts/{host}).
Output: one line per accepted request, or with `-o json` {"requests": [...], "errors":
[...]} (each request as the API answered it). Exit codes as the other user commands, with
every problem printed as `field: reason`: 2 invalid input (a bad --deadline is checked
before anything is sent; a 400 from the API), 1 the API refused a host (unknown host,
a state that forbids it: the other hosts are still asked), 3 the API is unreachable.
"""

from __future__ import annotations

import getpass
from typing import Annotated, Any

import typer

from peloton.cli.client import ApiError, ApiUnreachable, PelotonClient, default_api
from peloton.cli.output import emit
from peloton.cli.user_cmds import (
    EXIT_API_ERROR,
    EXIT_INVALID,
    EXIT_UNREACHABLE,
    ApiOpt,
    Output,
    OutputOpt,
)
from peloton.model.duration import parse_duration_ms

__all__ = ["register", "maintenance"]

HostsArg = Annotated[list[str], typer.Argument(help="Host names.", show_default=False)]


def _err(message: str) -> None:
    typer.echo(message, err=True)


def _details(exc: ApiError) -> list[str]:
    out = []
    for d in exc.details:
        if isinstance(d, dict) and "message" in d:
            out.append(f"{d.get('field') or '-'}: {d['message']}")
        else:
            out.append(str(d))
    return out or [exc.error]


def _request(action: str, hosts: list[str], deadline: str | None, requested_by: str | None,
             output: Output, api: str | None) -> None:
    if deadline is not None:
        try:
            parse_duration_ms(deadline)
        except ValueError as exc:
            _err(f"error: invalid request\n  deadline: {exc}")
            raise typer.Exit(EXIT_INVALID) from None
    if not hosts:
        _err("error: invalid request\n  host: at least one host expected")
        raise typer.Exit(EXIT_INVALID)
    requests: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    code = 0
    by = requested_by or getpass.getuser()
    with PelotonClient(api or default_api()) as client:
        for host in hosts:
            try:
                requests.append(client.host_maintenance(host, action, deadline, by))
            except ApiUnreachable as exc:
                _err(f"error: {exc}")
                raise typer.Exit(EXIT_UNREACHABLE) from exc
            except ApiError as exc:
                problems = _details(exc)
                errors.append({"host": host, "status": exc.status, "error": exc.error,
                               "problems": problems})
                _err(f"error: host {host}: {exc.error}")
                for p in problems:
                    _err(f"  {p}")
                worst = EXIT_INVALID if exc.status == 400 else EXIT_API_ERROR
                code = max(code, worst)
    if output.machine:
        emit({"requests": requests, "errors": errors}, output)
    else:
        for r in requests:
            until = f" (deadline {r['deadline_ms']})" if r.get("deadline_ms") else ""
            typer.echo(f"{r['host']}: {r['command']} requested{until}")
    if code:
        raise typer.Exit(code)


def start(hosts: HostsArg, deadline: Annotated[str | None, typer.Option(
        "--deadline", help="How long the drain may take, e.g. 10m, 1h30m (from now).")] = None,
          requested_by: Annotated[str | None, typer.Option(
              "--by", help="Who asks (default: your user name).")] = None,
          output: OutputOpt = Output.table, api: ApiOpt = None) -> None:
    """Start maintenance: the hosts get no new work and drain (UP -> DRAINING -> DRAINED
    -> DOWN)."""
    _request("start", hosts, deadline, requested_by, output, api)


def complete(hosts: HostsArg, requested_by: Annotated[str | None, typer.Option(
        "--by", help="Who asks (default: your user name).")] = None,
             output: OutputOpt = Output.table, api: ApiOpt = None) -> None:
    """Complete maintenance: DOWN hosts come back UP and get work again."""
    _request("complete", hosts, None, requested_by, output, api)


def cancel(hosts: HostsArg, requested_by: Annotated[str | None, typer.Option(
        "--by", help="Who asks (default: your user name).")] = None,
           output: OutputOpt = Output.table, api: ApiOpt = None) -> None:
    """Cancel maintenance: DRAINING or DRAINED hosts go back UP."""
    _request("cancel", hosts, None, requested_by, output, api)


maintenance = typer.Typer(help="Host maintenance: start, complete, cancel.",
                          no_args_is_help=True)
maintenance.command("start")(start)
maintenance.command("complete")(complete)
maintenance.command("cancel")(cancel)


def register(host_app: typer.Typer) -> None:
    """Add `maintenance` to the `host` command."""
    host_app.add_typer(maintenance, name="maintenance")
