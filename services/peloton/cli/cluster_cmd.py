"""`peloton cluster up|down|status|demo`: the local minicluster."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from peloton.minicluster.cluster import Cluster

__all__ = ["register", "ensure_up"]

RunDir = Annotated[Path, typer.Option(envvar="PELOTON_RUN_DIR", help="state and logs")]
JobsDir = Annotated[Path | None, typer.Option(
    help="job files (default: examples/jobs shipped with peloton)")]
UpdatesDir = Annotated[Path | None, typer.Option(
    help="update files (default: examples/updates shipped with peloton)")]
_err = Console(stderr=True)


def register(app: typer.Typer) -> None:
    cluster = typer.Typer(no_args_is_help=True, help="The local minicluster.")
    app.add_typer(cluster, name="cluster")
    register_demo(cluster)

    @cluster.command("up")
    def up_cmd(run_dir: RunDir = Path(".run"), agents: int = 3, cpu: float = 4.0,
               simulated: bool = False, heartbeat_timeout: float = 5.0,
               entitlement_cycle: float = 10.0) -> None:
        """Start broker, etcd, all services and AGENTS agents in the background; print the
        API's admin token and point the CLI config (PELOTON_CONFIG, else
        ~/.config/peloton/config.yaml) at this cluster unless it names another API."""
        ensure_up(run_dir, agents=agents, cpu=cpu, simulated=simulated,
                  heartbeat_timeout_s=heartbeat_timeout, entitlement_cycle_s=entitlement_cycle)

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


def ensure_up(run_dir: Path, **layout: Any) -> Cluster:
    """The running minicluster in run_dir, started (detached) if it is not fully up."""
    from peloton.minicluster.cluster import Layout, down, load, up

    existing = load(run_dir)
    if existing is not None and all(existing.alive(n) for n in existing.procs):
        _print_where(existing, run_dir, "already up")
        return existing
    if existing is not None:
        down(run_dir)
    # a new user's local cluster: /default reserves it (peloton.minicluster.defaultpool)
    lay = Layout.local(run_dir.resolve(), **{"reserve_default": True, **layout})
    try:
        cluster = up(lay, progress=lambda m: _err.print(f"[dim]… {m}[/dim]"))
    except (RuntimeError, TimeoutError) as exc:
        _err.print(f"[red]minicluster failed to start:[/red] {exc}")
        raise typer.Exit(1) from exc
    _print_where(cluster, run_dir, "up")
    return cluster


def _print_where(cluster: Cluster, run_dir: Path, what: str) -> None:
    api_url = cluster.layout.api_url
    _err.print(f"[green]minicluster {what}[/green]: API {api_url} (docs {api_url}/docs, "
               f"web UI {api_url}/ui), logs {run_dir}/logs/, stop with `task down`")
    token = cluster.admin_token
    if token:
        _print_token(api_url, token, run_dir)
    sys.stdout.flush()


def _print_token(api_url: str, token: str, run_dir: Path) -> None:
    """The admin token, and the CLI config pointed at this cluster (peloton.cli.config:
    only a config that names no API, or a local one, is rewritten)."""
    from peloton.cli import config

    _err.print(f"admin token: {token} (also in {run_dir}/admin-token; send it as "
               "`Authorization: Bearer <token>`)", soft_wrap=True, highlight=False)
    where = config.config_path()
    if config.write_local(api_url, token):
        _err.print(f"the CLI uses it: {where} points at this cluster", soft_wrap=True)
    else:
        _err.print(f"{where} names another API and was left alone; for this cluster: "
                   f"export PELOTON_API={api_url} PELOTON_TOKEN=$(cat {run_dir}/admin-token)",
                   soft_wrap=True, highlight=False)


def register_demo(cluster: typer.Typer) -> None:
    @cluster.command("demo")
    def demo_cmd(run_dir: RunDir = Path(".run"), jobs_dir: JobsDir = None,
                 updates_dir: UpdatesDir = None, timeout: float = 180.0) -> None:
        """Bring the minicluster up and show every workload: batch, service, stateful and
        daemon jobs at once, then a rolling update and a host maintenance (see
        `peloton.minicluster.demo`)."""
        from peloton.cli.client import ClientError, PelotonClient
        from peloton.datafiles import examples_dir
        from peloton.minicluster.demo import run_demo

        cluster_state = ensure_up(run_dir)
        client = PelotonClient(cluster_state.layout.api_url, token=cluster_state.admin_token)
        try:
            result = run_demo(client, jobs_dir or examples_dir() / "jobs",
                              updates_dir or examples_dir() / "updates", _err, timeout)
        except ClientError as exc:
            _err.print(f"[red]demo failed:[/red] {exc}")
            raise typer.Exit(1) from exc
        table = Table("job", "id", "type")
        for name, job_id in result.jobs.items():
            table.add_row(name, job_id, result.types[name])
        Console().print(table)
        first = next(iter(result.jobs.values()), "")
        _err.print(f"try: peloton job get {first} -o json; peloton task list {first}; "
                   f"peloton host list; open {cluster_state.layout.api_url}/docs")
        if result.failed:
            _err.print("[red]failed:[/red] " + "; ".join(result.failed))
            raise typer.Exit(1)
