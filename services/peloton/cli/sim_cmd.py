"""`peloton sim run SCENARIO [--out DIR] [-o json|table] [--seed N] [--engine E]`: the
cluster simulator.

Runs the scenario under simulated time, on the production services end to end in the
in-memory runner (`--engine runner`, `peloton.sim.runner_engine`) or on the simulator's
fast engine around the shared scheduling algorithms (`--engine fast`, `peloton.sim`);
`auto` (the default) takes the runner up to `AUTO_RUNNER_MAX_HOSTS` hosts. A progress bar
on stderr (simulated time / end time), metrics.json and PNG plots into `--out` (default
`sim-out/<scenario name>`), and a summary: a table (default) or JSON (`-o json`, every
summary field plus the wall-time figures `wall_s`, `events_per_s`, `placements_per_s`
and `peak_rss_mb`). This shell is the only place that reads the clock. An unreadable or
invalid scenario: a message on stderr and exit code 2.
"""

from __future__ import annotations

import importlib.util
import json
import resource
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

__all__ = ["register", "OutputFormat", "summary_table"]


class OutputFormat(StrEnum):
    table = "table"
    json = "json"


class Engine(StrEnum):
    auto = "auto"
    runner = "runner"
    fast = "fast"


#: `--engine auto` runs the production cores (the runner) up to this many hosts, the fast
#: engine above (10,000 hosts and a million tasks take hours on the runner)
AUTO_RUNNER_MAX_HOSTS = 1000


def register(app: typer.Typer) -> None:
    """Add the `sim` command group (`sim run`) to the `peloton` app."""
    sim_app = typer.Typer(no_args_is_help=True, help="Cluster simulator (simulated time).")
    app.add_typer(sim_app, name="sim")
    sim_app.command("run")(run)
    sim_app.command("mixed")(mixed)


def mixed(
    scenario: Annotated[Path, typer.Argument(help="Scenario file (YAML), e.g. "
                                             "examples/sim/mixed.yaml.")],
    out: Annotated[Path | None, typer.Option("--out", help="Directory for metrics.json "
                                             "and the plot [default: sim-out/<name>].")] = None,
    output: Annotated[OutputFormat, typer.Option("--output", "-o",
                                                 help="Summary format.")] = OutputFormat.table,
) -> None:
    """Every job type (batch, service, stateful, daemon), rolling updates and host
    maintenance on the production cores under simulated time (see peloton.sim.mixed)."""
    import json

    from peloton.cli.bench_cmd import _bar
    from peloton.sim.mixed import load_mixed, run_mixed, write_mixed

    sc = load_mixed(scenario.read_text())
    with _bar("sim mixed") as update:
        result = run_mixed(sc, update, clock=time.perf_counter)
    written = write_mixed(result, out or Path("sim-out") / sc.name)
    if output is OutputFormat.json:
        print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=2))
        return
    table = Table("figure", "value", title=f"sim mixed: {sc.name}")
    for key, value in result.items():
        if key != "samples":
            table.add_row(key, json.dumps(value) if isinstance(value, (dict, list))
                          else str(value))
    Console().print(table)
    Console(stderr=True).print(f"wrote {', '.join(str(p) for p in written)}")


def run(
    scenario: Annotated[Path, typer.Argument(help="Scenario file (YAML), e.g. "
                                             "examples/sim/small.yaml.")],
    out: Annotated[Path | None, typer.Option("--out", help="Directory for metrics.json "
                                             "and plots [default: sim-out/<name>].")] = None,
    output: Annotated[OutputFormat, typer.Option("--output", "-o",
                                                 help="Summary format.")] = OutputFormat.table,
    seed: Annotated[int | None, typer.Option("--seed", help="Override the scenario's "
                                             "seed.")] = None,
    plots: Annotated[bool, typer.Option("--plots/--no-plots",
                                        help="Write the PNG plots.")] = True,
    engine: Annotated[Engine, typer.Option(
        "--engine", help="runner: the production services end to end in the in-memory "
        "runner; fast: the simulator's own engine around the shared algorithms; auto: the "
        f"runner up to {AUTO_RUNNER_MAX_HOSTS:,} hosts, else fast.")] = Engine.auto,
    step_ms: Annotated[int, typer.Option(
        "--step-ms", min=10, max=2500, help="The runner's step (simulated ms; coarser is "
        "faster; at most half the host manager's 5 s heartbeat timeout, which a coarser "
        "step would turn into false or missed host losses).")] = 500,
) -> None:
    """Simulate a scenario and report utilization, fairness, queueing and preemption."""
    import numpy as np

    from peloton.sim import (
        ScenarioError,
        Simulation,
        load_scenario,
        write_metrics,
        write_report,
    )
    from peloton.sim.runner_engine import RunnerSimulation

    err = Console(stderr=True, soft_wrap=True)
    try:
        sc = load_scenario(scenario, seed)
    except ScenarioError as exc:
        err.print(f"error: {scenario}: {exc}", markup=False)
        raise typer.Exit(2) from None
    if engine is Engine.auto:
        engine = Engine.runner if sc.host_count <= AUTO_RUNNER_MAX_HOSTS else Engine.fast
    started = time.perf_counter()
    sim: Simulation | RunnerSimulation
    if engine is Engine.runner:
        sim = RunnerSimulation(sc, np.random.default_rng(sc.seed), clock=time.perf_counter,
                               step_ms=step_ms)
    else:
        sim = Simulation(sc, np.random.default_rng(sc.seed), clock=time.perf_counter)
    with Progress(TextColumn("{task.description}"), BarColumn(),
                  TextColumn("{task.fields[now]}"), TimeElapsedColumn(),
                  console=err, transient=True, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task(f"simulating {sc.name}", total=sc.duration_s, now="")

        def progress(now: float, end: float) -> None:
            bar.update(task, completed=now, now=f"{now / 3600:.2f} h / {end / 3600:.2f} h")

        result = sim.run(progress)
    for job, reasons in result.summary.get("jobs_rejected", {}).items():
        err.print(f"warning: the job manager rejected job {job}: {'; '.join(reasons)}",
                  markup=False)
    result.performance["total_wall_s"] = round(time.perf_counter() - started, 3)
    result.performance["peak_rss_mb"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    target = out if out is not None else Path("sim-out") / sc.name
    if plots and importlib.util.find_spec("matplotlib") is None:
        err.print("warning: plots skipped: matplotlib is not installed (pip install "
                  "'peloton-py[bench]'); metrics.json is written", markup=False)
        plots = False
    if plots:
        write_report(result, target)
    else:
        write_metrics(result, target)
    figures = {**result.summary, **result.performance, "out": str(target)}
    if output is OutputFormat.json:
        typer.echo(json.dumps(figures, indent=2))
        return
    Console().print(summary_table(figures))


def summary_table(f: dict[str, Any]) -> Table:
    table = Table("figure", "value", title=f"sim {f['scenario']} (seed {f['seed']}, "
                                           f"{f.get('engine', 'fast')} engine)")
    ttc = f["time_to_entitlement_s"]
    rows = [
        ("hosts / tasks / jobs", f"{f['hosts']:,} / {f['tasks']:,} / {f['jobs']:,}"),
        ("simulated", f"{f['simulated_s'] / 3600:.2f} h in {f['wall_s']:.1f} s wall"),
        ("events (per wall s)", f"{f['events']:,} ({f['events_per_s']:,.0f}/s)"),
        ("placements (per wall s)", f"{f['placements']:,} ({f['placements_per_s']:,.0f}/s)"),
        ("utilization cpu alloc / used", _pair(f["utilization"]["cpu_allocated_mean"],
                                               f["utilization"]["cpu_used_mean"])),
        ("utilization mem alloc / used", _pair(f["utilization"]["memory_allocated_mean"],
                                               f["utilization"]["memory_used_mean"])),
        ("Jain index (alloc / min(ent, demand))", _num(f["jain_index"])),
        ("time to entitlement p50 / p99", f"{_num(ttc['p50'])} / {_num(ttc['p99'])} s "
                                          f"({ttc['n']:,} episodes)"),
        ("queueing delay p50 / p90 / p99",
         f"{_num(f['queue_delay_p50_s'])} / {_num(f['queue_delay_p90_s'])} / "
         f"{_num(f['queue_delay_p99_s'])} s"),
    ]
    for tier, d in f["queue_delay_by_tier_s"].items():
        rows.append((f"  tier {tier} p50 / p99", f"{_num(d['p50'])} / {_num(d['p99'])} s "
                                                 f"(n={d['n']:,})"))
    rows += [
        ("preemptions (per 1,000 placements)",
         f"{f['preemptions']:,} ({f['preemptions_per_1000_placements']:g})"),
        ("wasted cpu-s by preemption/loss", f"{f['wasted_cpu_s']:,.0f}"),
        ("host failures / tasks lost", f"{f['host_failures']:,} / {f['lost']:,}"),
        ("queued / running at end", f"{f['queued_at_end']:,} / {f['running_at_end']:,}"),
        *([("jobs rejected (runner)", ", ".join(f["jobs_rejected"]))]
          if f.get("jobs_rejected") else []),
        ("peak RSS", f"{f['peak_rss_mb']:,.0f} MB"),
        ("output", f["out"]),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:,.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def _pair(a: float | None, b: float | None) -> str:
    return f"{_num(a)} / {_num(b)}"
