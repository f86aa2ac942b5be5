"""`peloton bench ...`: benchmarks that print figures (never timed unit tests)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
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
        if isinstance(value, bool):
            value = "yes" if value else "NO"
        table.add_row(key, f"{value:,}" if isinstance(value, (int, float)) else str(value))
    Console().print(table)


@contextmanager
def _bar(title: str, every_s: float = 5.0) -> Iterator[Callable[[str, float], None]]:
    """Progress on stderr; yields update(message, fraction). A transient rich bar on a
    terminal; elsewhere (a log, CI) one plain line per new step, and per new message at
    most every `every_s` seconds, so a long run still shows where it is."""
    err = Console(stderr=True)
    if not err.is_terminal:
        started = time.monotonic()
        last_at, last_msg = [-every_s], [""]

        def line(message: str, _fraction: float) -> None:
            now = time.monotonic()
            new_step = message.split()[:2] != last_msg[0].split()[:2]
            if message != last_msg[0] and (new_step or now - last_at[0] >= every_s):
                last_at[0], last_msg[0] = now, message
                print(f"[{title} {now - started:6.1f}s] {message}", file=sys.stderr,
                      flush=True)

        yield line
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as bar:
        task = bar.add_task(title, total=1.0)
        yield lambda m, f: bar.update(task, description=m, completed=f)


def register(app: typer.Typer) -> typer.Typer:
    bench = typer.Typer(no_args_is_help=True, help="Benchmarks.")
    app.add_typer(bench, name="bench")

    @bench.callback()
    def _bench() -> None:
        from peloton.minicluster.terminate import exit_on_sigterm

        exit_on_sigterm()  # stopped by SIGTERM, a benchmark still takes its clusters down

    @bench.command("pipeline")
    def pipeline_cmd(tasks: int = 10_000, jobs: int = 10, agents: int = 2,
                     raw_events: int = 100_000, output: Output = "table") -> None:
        """Raw bus events/s beside end-to-end tasks/s (simulated agents), one run."""
        from peloton.minicluster.bench import pipeline

        with _bar("pipeline") as update:
            result = pipeline(tasks, jobs, agents, raw_events, progress=update)
        show(result, output, "pipeline")

    @bench.command("intake")
    def intake_cmd(records: Annotated[int, typer.Option(
                       min=1, help="records each reader reads")] = 100_000,
                   repeats: Annotated[int, typer.Option(
                       min=1, help="rounds (the best of each reader is shown)")] = 2,
                   output: Output = "table") -> None:
        """CPU per record a reader pays before its own work: the raw aiokafka consumer,
        a Faust agent and the shells' batch intake, side by side in one run."""
        from peloton.bus.intakebench import intake_bench

        with _bar("intake") as update:
            result = intake_bench(records, repeats, progress=update)
        show(result, output, "intake")

    @bench.command("joined")
    def joined_cmd(facts: Annotated[int, typer.Option(
                       min=1, help="TaskStateChanged facts in each log")] = 100_000,
                   batch: Annotated[int, typer.Option(
                       min=1, help="facts the job manager publishes together")] = 32,
                   repeats: Annotated[int, typer.Option(
                       min=1, help="rounds (the best of each log is shown)")] = 2,
                   output: Output = "table") -> None:
        """CPU per fact a reader of job-events pays (the shells' intake and driver), a
        record per job's TaskStateChanged against joined records, side by side."""
        from peloton.bus.joinedbench import joined_bench

        with _bar("joined") as update:
            result = joined_bench(facts, batch, repeats, progress=update)
        show(result, output, "joined")

    @bench.command("devbroker")
    def devbroker_cmd(held: Annotated[list[int] | None, typer.Option(
                          help="batches stored before each row (growing; repeat the "
                               "option)")] = None,
                      rate: Annotated[int, typer.Option(
                          min=1, help="one-record batches a second of the load")] = 300,
                      readers: Annotated[int, typer.Option(
                          min=1, help="consumers tailing the load")] = 3,
                      seconds: Annotated[float, typer.Option(
                          min=0.5, help="measured seconds a row")] = 5.0,
                      output: Output = "table") -> None:
        """What the dev broker pays for one steady load as its store grows: fresh, with
        batches held in a topic nobody reads, and in the load's own partitions."""
        from peloton.bus.brokerbench import broker_bench, held_steps

        try:
            steps = held_steps(held or [20_000, 40_000])
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--held") from None
        with _bar("devbroker") as update:
            result = broker_bench(steps, rate, readers, seconds, progress=update)
        show(result, output, "devbroker")

    @bench.command("burst")
    def burst_cmd(
        jobs: int = 5_000, hosts: int = 50,
        agent_processes: Annotated[int, typer.Option(
            help="processes serving the simulated hosts (one AgentCore per host each)")] = 2,
        min_tasks: int = 1, max_tasks: int = 8, seed: int = 7, cpu_per_host: float = 64.0,
        task_cpu: float = 0.1,
        duration: Annotated[float, typer.Option(help="simulated task run time, s")] = 0.1,
        settle: Annotated[float, typer.Option(
            help="stop when nothing changed for this long, s")] = 60.0,
        timeout: Annotated[float, typer.Option(help="stop after this long in all, s")] = 900.0,
        run_dir: Annotated[Path | None, typer.Option(
            help="keep the cluster's logs here (default: a temporary directory)")] = None,
        rate: Annotated[float, typer.Option(
            help="submit this many jobs/s (a sustained load); 0: all at once")] = 0.0,
        output: Output = "table",
    ) -> None:
        """Many small jobs at once over many simulated hosts: tasks/s, submit -> RUNNING
        and -> terminal percentiles, jobs not terminal (exit status 1 unless 0)."""
        from peloton.minicluster.burst import burst

        with _bar("burst") as update:
            result = burst(jobs, hosts, agent_processes, min_tasks, max_tasks, seed,
                           cpu_per_host, task_cpu, duration, settle, timeout, run_dir,
                           progress=update, rate=rate)
        show(result, output, "burst")
        if result["jobs_not_terminal"]:
            raise typer.Exit(1)

    @bench.command("agents")
    def agents_cmd(
        idle_hosts: Annotated[int, typer.Option(help="(a) simulated hosts, idle")] = 1_000,
        idle_heartbeat: Annotated[float, typer.Option(help="(a) heartbeat, s")] = 1.0,
        idle_seconds: Annotated[float, typer.Option(help="(a) CPU window, s")] = 20.0,
        hosts: Annotated[int, typer.Option(
            help="(b) simulated hosts registered and offered (0: skip (b))")] = 10_000,
        agent_processes: Annotated[int, typer.Option(help="(b) agent processes")] = 2,
        heartbeat: Annotated[float, typer.Option(
            help="(b) heartbeat, s (the host manager's timeout: 3x)")] = 10.0,
        run_dir: Annotated[Path | None, typer.Option(
            help="keep the logs here (default: a temporary directory)")] = None,
        output: Output = "table",
    ) -> None:
        """Agents at scale: (a) idle CPU of the broker plus the agent processes serving
        1,000 simulated hosts (goal < 0.3 core); (b) 10,000 simulated hosts registered and
        offered by the host manager (goal < 60 s). Exit status 1 if a goal is missed."""
        from peloton.minicluster.agentbench import agents_bench

        with _bar("agents") as update:
            result = agents_bench(idle_hosts=idle_hosts, idle_heartbeat_s=idle_heartbeat,
                                  idle_s=idle_seconds, hosts=hosts,
                                  processes=agent_processes, heartbeat_s=heartbeat,
                                  progress=update, run_dir=run_dir)
        show(result, output, "agents at scale")
        if not all(v for k, v in result.items() if "_goal_" in k):
            raise typer.Exit(1)

    @bench.command("scale")
    def scale_cmd(
        tasks: Annotated[int, typer.Option(help="tasks in the largest wave")] = 100_000,
        hosts: Annotated[int | None, typer.Option(
            help="simulated hosts [default: 10,000; --quick: 1,000]")] = None,
        agent_processes: Annotated[int, typer.Option(
            help="processes serving the simulated hosts")] = 2,
        paced: Annotated[list[float] | None, typer.Option(
            help="paced waves at this fraction of the reference rate (repeatable; "
                 "default 0.25 0.5 0.75)")] = None,
        paced_s: Annotated[float, typer.Option(help="length of each paced wave, s")] = 20.0,
        goal_wave: Annotated[bool, typer.Option(
            help="a paced wave at half of the goal's 2,000 tasks/s first")] = True,
        max_rate: Annotated[float, typer.Option(
            help="reference rate of the paced waves, tasks/s (0: the 'small 10%' wave's)")]
        = 0.0,
        quick: Annotated[bool, typer.Option(
            help="a small try: --tasks 10000, 1,000 hosts, one paced wave at 0.5 for 5 s")]
        = False,
        config: Annotated[list[str] | None, typer.Option(
            help="run only these configurations (repeatable; default all)")] = None,
        seed: int = 7,
        timeout: Annotated[float, typer.Option(help="longest wave, s")] = 900.0,
        plot: Annotated[Path | None, typer.Option(
            help="write the plot here (e.g. docs/bench-scale.png)")] = None,
        run_dir: Annotated[Path | None, typer.Option(
            help="keep the clusters' logs here (default: a temporary directory)")] = None,
        output: Output = "table",
    ) -> None:
        """Waves of small and large jobs over many simulated hosts, per cluster
        configuration: tasks/s, p50/p99 submit -> RUNNING, CPU s per 1,000 tasks per
        service, the ratio to the raw bus, cost per task at 10x the tasks (exit status 1
        if a configuration failed or left jobs not terminal)."""
        from peloton.minicluster.scalebench import CONFIGS, GOAL_TASKS_PER_S, scale, tables
        from peloton.minicluster.scalebench import plot as draw

        if quick:
            tasks, paced, paced_s = 10_000, paced or [0.5], 5.0
        hosts = hosts or (1_000 if quick else 10_000)
        chosen = [c for c in CONFIGS if not config or c.name in config]
        if not chosen:
            raise typer.BadParameter(f"no such configuration; known: "
                                     f"{', '.join(c.name for c in CONFIGS)}")
        with _bar("scale") as update:
            result = scale(tasks, hosts, agent_processes, chosen,
                           paced if paced is not None else (0.25, 0.5, 0.75), paced_s,
                           GOAL_TASKS_PER_S / 2 if goal_wave else 0.0, max_rate, seed=seed,
                           timeout_s=timeout, run_dir=run_dir, progress=update)
        if plot is not None:
            draw(result, plot)
        if output == "json":
            print(json.dumps(result, indent=2))
        else:
            console = Console(width=max(Console().width, 160))
            for table in tables(result):
                console.print(table)
        if any("error" in c or any(r["jobs_not_terminal"] for r in c["waves"])
               for c in result["configs"]):
            raise typer.Exit(1)

    @bench.command("workloads")
    def workloads_cmd(hosts: int = 500, instances: int = 2_000, seed: int = 1,
                      output: Output = "table") -> None:
        """A daemon on every host and a big health-checked SERVICE come up, roll to a new
        version in batches, then a tenth of the hosts drain; on the production cores in
        the in-memory runner: simulated and wall seconds per phase, most instances down
        at once against the SLA (exit status 1 if a phase did not finish)."""
        from peloton.runner.workloadbench import run_workloads

        with _bar("workloads") as update:
            result = run_workloads(hosts, instances, update, seed)
        show(result, output, "workloads")
        if not all(v for k, v in result.items() if k.endswith(": ok")):
            raise typer.Exit(1)

    @bench.command("restart")
    def restart_cmd(
        tasks: Annotated[int, typer.Option(help="finished tasks in the log")] = 1_000_000,
        tasks_per_job: int = 100, hosts: int = 4, probe_tasks: int = 4,
        service: Annotated[list[str] | None, typer.Option(
            help="services to kill -9 in turn (repeatable; default jobmgr, resmgr-1, "
                 "placement, hostmgr)")] = None,
        timeout: Annotated[float, typer.Option(help="longest wait for any one step, s")] =
        900.0,
        run_dir: Annotated[Path | None, typer.Option(
            help="keep the cluster's logs here (default: a temporary directory)")] = None,
        output: Output = "table",
    ) -> None:
        """kill -9 and restart each service over a long finished history: seconds until it
        consumes again and until a new job submitted right after has SUCCEEDED."""
        from peloton.minicluster.restartbench import SERVICES, restart_bench

        with _bar("restart") as update:
            result = restart_bench(tasks, tasks_per_job, hosts, tuple(service or SERVICES),
                                   probe_tasks, timeout_s=timeout, run_dir=run_dir,
                                   progress=update)
        if output == "json":
            print(json.dumps(result, indent=2))
            return
        show({k: v for k, v in result.items() if k != "restarts"}, output, "restart: setup")
        table = Table("service", "consuming_s", "job_s", "kill_to_job_done_s", "probe",
                      "rebuild after kill -9", "rebuild at cold start (whole history)",
                      title="restart: kill -9, then start again (rebuild: seconds, records "
                            "folded, from)")

        def rebuild(row: dict[str, Any], pre: str) -> str:
            if f"{pre}rebuild_s" not in row:
                return "-"
            return (f"{row[pre + 'rebuild_s']:.2f}s, {row[pre + 'folded']:,} rec, "
                    f"{row[pre + 'rebuild_from']}")

        for row in result["restarts"]:
            table.add_row(row["service"], str(row["consuming_s"]), str(row["job_s"]),
                          str(row["restart_to_job_done_s"]), row["probe_state"],
                          rebuild(row, ""), rebuild(row, "cold_"))
        Console(width=max(Console().width, 140)).print(table)
        for row in result["restarts"]:
            if row["startup"]:
                Console().print(f"{row['service']} start-up: {row['startup']}", soft_wrap=True)

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

    @bench.command("backlog")
    def backlog_cmd(jobs: int = 20_000, hosts: int = 100, task_cpu: float = 1.0,
                    ticks: int = 5, seed: int = 7,
                    ends: Annotated[int, typer.Option(
                        min=0, help="admitted runs that end before each later tick")] = 50,
                    unconfirmed: Annotated[bool, typer.Option(
                        help="no decision comes back before the later ticks (a leader "
                             "reading its own admissions late, as in a burst)")] = False,
                    output: Output = "table") -> None:
        """CPU seconds of the resource manager's tick with `jobs` jobs (1-8 tasks) queued
        at once on `hosts` hosts of 64 cpus, `ends` admitted runs ending before each later
        tick, and the pending reasons those ticks published (peloton.resmgr.backlogbench)."""
        from peloton.resmgr.backlogbench import backlog_tick_bench

        show(backlog_tick_bench(jobs, hosts, task_cpu, ticks, seed, ends, unconfirmed),
             output, "resource manager tick with a backlog")

    return bench
