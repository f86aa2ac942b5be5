"""`peloton placement plan FILE [-o table|wide|json|yaml]`: a placement dry run.

Reads hosts and tasks (YAML or JSON, see `peloton.placement.planfile`), runs the same pure
placement core the placement service runs, and prints the placements and a reason for
every task left unplaced. Unreadable or invalid input: every problem on stderr (the plan
file parser collects them all), one per line as `path: reason`, exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from peloton.cli.output import Output, OutputOpt, emit
from peloton.placement.domain import PlacementInputError, place
from peloton.placement.planfile import PlanFileError, load_plan, report

__all__ = ["OutputFormat", "register", "plan", "render"]


OutputFormat = Output  # the name this module used to export


def register(app: typer.Typer) -> None:
    """Add the `placement` command group (with `plan`) to the top-level app."""
    placement_app = typer.Typer(no_args_is_help=True, help="Placement engine tools.")
    placement_app.command("plan")(plan)
    app.add_typer(placement_app, name="placement")


def plan(
    file: Annotated[Path, typer.Argument(help="Plan file: hosts and jobs/tasks (YAML/JSON).")],
    output: OutputOpt = Output.table,
) -> None:
    """Dry-run one placement round: which task goes where, and why others cannot."""
    err = Console(stderr=True, soft_wrap=True)
    try:
        parsed = load_plan(file)
        result = place(parsed.hosts, parsed.tasks, parsed.config)
    except OSError as exc:
        err.print(f"error: cannot read {file}: {exc.strerror or exc}", markup=False)
        raise typer.Exit(2) from None
    except PlanFileError as exc:
        err.print(f"error: {file}:", markup=False)
        for problem in exc.problems:
            err.print(f"  {problem}", markup=False)
        raise typer.Exit(2) from None
    except PlacementInputError as exc:
        err.print(f"error: {file}: {exc}", markup=False)
        raise typer.Exit(2) from None
    out = report(parsed, result)
    if output.machine:
        emit(out, output)
        return
    render(out, Console())


def render(out: dict[str, Any], console: Console) -> None:
    """Placements, then unplaced tasks with their reasons, then the summary."""
    placed = Table("task", "host", "ports", title="placements")
    for p in out["placements"]:
        ports = " ".join(f"{k}={v}" for k, v in sorted(p["ports"].items()))
        placed.add_row(p["task"], p["host"], ports)
    console.print(placed)
    if out["unplaced"]:
        unplaced = Table("task", "code", "reason", title="not placed")
        for u in out["unplaced"]:
            unplaced.add_row(u["task"], u["code"], u["reason"])
        console.print(unplaced)
    s = out["summary"]
    console.print(
        f"{s['placed']} of {s['tasks']} tasks placed on {s['hosts_used']} of {s['hosts']} hosts",
        markup=False,
    )
