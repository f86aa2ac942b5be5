"""`peloton respool entitlement FILE [-o table|wide|json|yaml]`: the what-if entitlement.

Reads a scenario (YAML or JSON, see `peloton.resmgr.whatif`), runs the same entitlement
core the resource manager runs, and prints every pool's entitlement as a table (default)
or JSON/YAML. Unreadable or unparseable input: every problem on stderr (see
`peloton.cli.whatif_check`), one per line as `field: reason`, and exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from peloton.cli.output import Output, OutputOpt, emit
from peloton.cli.whatif_check import scenario_problems
from peloton.model.resources import KINDS
from peloton.resmgr.whatif import PoolConfigError, entitlement_report

__all__ = ["OutputFormat", "register", "render_table"]


OutputFormat = Output  # the name this module used to export


def register(respool_app: typer.Typer) -> None:
    """Add the `entitlement` command to the `respool` command group."""
    respool_app.command("entitlement")(entitlement)


def entitlement(
    file: Annotated[Path, typer.Argument(help="Scenario file (YAML or JSON).")],
    output: OutputOpt = Output.table,
) -> None:
    """Compute each pool's entitlement for a what-if scenario (capacity, pools, usage)."""
    err = Console(stderr=True, soft_wrap=True)
    try:
        doc = yaml.safe_load(file.read_text(encoding="utf-8"))
        problems = scenario_problems(doc)
        if problems:
            err.print(f"error: {file} is not a valid scenario:", markup=False)
            for problem in problems:
                err.print(f"  {problem}", markup=False)
            raise typer.Exit(2)
        report = entitlement_report(doc)
    except OSError as exc:
        err.print(f"error: cannot read {file}: {exc.strerror or exc}", markup=False)
        raise typer.Exit(2) from None
    except yaml.YAMLError as exc:
        err.print(f"error: {file} is not valid YAML/JSON: {exc}", markup=False)
        raise typer.Exit(2) from None
    except PoolConfigError as exc:
        err.print(f"error: {file}: {exc}", markup=False)
        raise typer.Exit(2) from None
    if output.machine:
        emit(report, output)
        return
    Console().print(render_table(report))
    for warning in report["warnings"]:
        err.print(f"warning: {warning}", markup=False, style="yellow")


def render_table(report: dict[str, Any]) -> Table:
    """One row per pool and kind (kinds that are zero everywhere are left out)."""
    pools: dict[str, Any] = report["pools"]
    kinds = [
        k
        for k in KINDS
        if any(
            p[field][k] for p in pools.values() for field in ("entitlement", "slack_entitlement")
        )
    ] or ["cpu"]
    table = Table(title="Entitlement")
    for header in ("pool", "kind", "entitlement", "non-slack", "slack"):
        table.add_column(header, justify="left" if header in ("pool", "kind") else "right")
    for name, values in pools.items():
        for i, kind in enumerate(kinds):
            table.add_row(
                name if i == 0 else "",
                kind,
                _fmt(values["entitlement"][kind]),
                _fmt(values["nonslack_entitlement"][kind]),
                _fmt(values["slack_entitlement"][kind]),
                end_section=i == len(kinds) - 1,
            )
    return table


def _fmt(x: float) -> str:
    return f"{x:,.2f}".rstrip("0").rstrip(".")
