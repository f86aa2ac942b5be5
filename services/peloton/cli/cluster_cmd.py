"""`peloton cluster up|down|status|demo`: the local minicluster."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

__all__ = ["register"]

RunDir = Annotated[Path, typer.Option(envvar="PELOTON_RUN_DIR", help="state and logs")]
_err = Console(stderr=True)


def register(app: typer.Typer) -> None:
    cluster = typer.Typer(no_args_is_help=True, help="The local minicluster.")
    app.add_typer(cluster, name="cluster")

    @cluster.command("up")
    def up_cmd(run_dir: RunDir = Path(".run"), agents: int = 3, cpu: float = 4.0,
               simulated: bool = False, heartbeat_timeout: float = 5.0,
               entitlement_cycle: float = 10.0) -> None:
        """Start broker, etcd, all services and AGENTS agents in the background."""
        from peloton.minicluster.cluster import Layout, load, up

        existing = load(run_dir)
        if existing is not None and all(existing.alive(n) for n in existing.procs):
            _print_where(existing.layout.api_url, run_dir, "already up")
            return
        if existing is not None:
            from peloton.minicluster.cluster import down

            down(run_dir)
        layout = Layout.local(run_dir.resolve(), agents=agents, cpu=cpu, simulated=simulated,
                              heartbeat_timeout_s=heartbeat_timeout,
                              entitlement_cycle_s=entitlement_cycle)
        try:
            up(layout, progress=lambda m: _err.print(f"[dim]… {m}[/dim]"))
        except (RuntimeError, TimeoutError) as exc:
            _err.print(f"[red]minicluster failed to start:[/red] {exc}")
            raise typer.Exit(1) from exc
        _print_where(layout.api_url, run_dir, "up")

    @cluster.command("down")
    def down_cmd(run_dir: RunDir = Path(".run")) -> None:
        """Stop everything the state file names."""
        from peloton.minicluster.cluster import down

        stopped = down(run_dir)
        _err.print(f"stopped {len(stopped)} processes" if stopped else "nothing running")

    @cluster.command("status")
    def status_cmd(run_dir: RunDir = Path(".run"),
                   output: Annotated[str, typer.Option("-o", "--output")] = "table") -> None:
        """Which processes run, with their logs."""
        from peloton.minicluster.cluster import status

        rows = status(run_dir)
        if output == "json":
            print(json.dumps(rows, indent=2))
        else:
            table = Table("process", "pid", "alive", "log")
            for r in rows:
                table.add_row(r["name"], str(r["pid"]),
                              "[green]yes[/green]" if r["alive"] else "[red]no[/red]", r["log"])
            Console().print(table if rows else "minicluster is not running")
        if not rows or not all(r["alive"] for r in rows):
            raise typer.Exit(1)


def _print_where(api_url: str, run_dir: Path, what: str) -> None:
    _err.print(f"[green]minicluster {what}[/green]: API {api_url} (docs {api_url}/docs), "
               f"logs {run_dir}/logs/, stop with `task down`")
    sys.stdout.flush()
