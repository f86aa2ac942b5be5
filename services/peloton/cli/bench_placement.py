"""`peloton bench placement --hosts N --tasks M [--seed S] [-o json]`.

Runs `peloton.placement.bench`: placements/s and per-round latency of the pure placement
core on a synthetic cluster (by default with one host table kept across rounds, as the
placement service keeps it; --host-table rebuild builds a new one per round), violations
found by the independent checker, the same figures for the placement service's own loop
(service_*, unless --no-service), and (unless --no-quality) PACK's packing quality
against OR-Tools CP-SAT on small instances.
"""

from __future__ import annotations

from typing import Annotated

import typer

from peloton.cli.bench_cmd import show

__all__ = ["register"]


def register(bench_app: typer.Typer) -> None:
    """Add the `placement` command to the `bench` command group."""
    bench_app.command("placement")(placement)


def placement(
    hosts: Annotated[int, typer.Option("--hosts", min=1, help="Hosts in the cluster.")] = 10_000,
    tasks: Annotated[int, typer.Option("--tasks", min=1, help="Tasks to place.")] = 100_000,
    seed: Annotated[int, typer.Option("--seed", help="Workload seed.")] = 0,
    round_size: Annotated[
        int, typer.Option("--round-size", min=1, help="Tasks per placement round.")
    ] = 5_000,
    quality: Annotated[
        bool, typer.Option("--quality/--no-quality", help="Packing quality vs CP-SAT.")
    ] = True,
    check: Annotated[
        bool, typer.Option("--check/--no-check", help="Verify every round independently.")
    ] = True,
    service: Annotated[
        bool, typer.Option("--service/--no-service",
                           help="Also time the placement service's own loop (service_*).")
    ] = True,
    host_table: Annotated[str, typer.Option(
        "--host-table",
        help="incremental: one host table kept across rounds, the changed rows updated "
             "(what the placement service does); rebuild: a new table per round.",
    )] = "incremental",
    output: Annotated[str, typer.Option("-o", "--output", help="table or json")] = "table",
) -> None:
    """Placement throughput, p99 round latency, violations and packing quality."""
    from peloton.placement.bench import BenchConfig, run_bench

    if output not in ("table", "json"):
        typer.echo(f"error: --output must be table or json, got {output!r}", err=True)
        raise typer.Exit(2)
    if host_table not in ("incremental", "rebuild"):
        typer.echo(f"error: --host-table must be incremental or rebuild, got {host_table!r}",
                   err=True)
        raise typer.Exit(2)
    result = run_bench(BenchConfig(hosts=hosts, tasks=tasks, seed=seed, round_size=round_size,
                                   pack_quality=quality, check=check, host_table=host_table,
                                   service=service))
    show(result, output, "placement")
