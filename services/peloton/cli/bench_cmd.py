"""`peloton bench ...`: benchmarks that print figures (never timed unit tests)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

__all__ = ["register", "show"]

Output = Annotated[str, typer.Option("-o", "--output", help="table or json")]


def show(result: dict[str, Any], output: str, title: str) -> None:
    if output == "json":
        print(json.dumps(result, indent=2))
        return
    table = Table("figure", "value", title=title)
    for key, value in result.items():
        table.add_row(key, f"{value:,}" if isinstance(value, (int, float)) else str(value))
    Console().print(table)


def register(app: typer.Typer) -> typer.Typer:
    bench = typer.Typer(no_args_is_help=True, help="Benchmarks.")
    app.add_typer(bench, name="bench")

    @bench.command("pipeline")
    def pipeline_cmd(tasks: int = 10_000, jobs: int = 10, agents: int = 2,
                     raw_events: int = 100_000, output: Output = "table") -> None:
        """Raw bus events/s beside end-to-end tasks/s (simulated agents), one run."""
        from peloton.minicluster.bench import pipeline

        with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                      console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task("pipeline", total=1.0)
            result = pipeline(tasks, jobs, agents, raw_events,
                              progress=lambda m, f: bar.update(task, description=m, completed=f))
        show(result, output, "pipeline")

    @bench.command("entitlement")
    def entitlement_cmd(output: Output = "table", seed: int = 7) -> None:
        """Entitlement cycle time for 1,000 and 10,000 pools, and admission throughput."""
        from peloton.resmgr.bench import admission_bench, entitlement_cycle_bench

        result: dict[str, Any] = {}
        for n in (1_000, 10_000):
            r = entitlement_cycle_bench(n, seed)
            result[f"cycle_ms_{n}_pools"] = r["cycle_ms"]
        result.update({f"admission_{k}": v for k, v in admission_bench(10_000).items()})
        show(result, output, "resource manager")

    return bench
