"""Scale benchmark: waves of small and large jobs over many simulated hosts, with the CPU
each service spent and the raw bus beside it, for each cluster configuration in turn.

Each configuration of `CONFIGS` (the keywords it gives `Layout.local`, and its topics'
partition count: as many as it runs instances of the partitioned services, unless the
caller's PELOTON_TOPIC_PARTITIONS says otherwise) gets its own minicluster on the dev
broker (`burst.fleet_cluster`: the services as processes, `hosts` simulated hosts in
`agent_processes` fleet processes), and runs the same plan (`plan_waves`) of waves, one
after the other, each followed to the end (`burst.run_burst`):

- `small 10%`: jobs of 1-8 tasks, a tenth of `tasks`, all submitted at once: its tasks/s
  is the reference (max) rate of the paced waves, unless `max_rate` is given;
- `large`: jobs of 200-2,000 tasks, a fifth of `tasks`, all at once;
- `paced 1,000/s (goal)`: small jobs offered at half of the goal's 2,000 tasks/s for
  `paced_s` (`goal_rate`; the goal's own point, measured on any machine);
- `paced N%`: small jobs offered at N% of the reference rate (tasks/s) for `paced_s`;
- `small 100%`: jobs of 1-8 tasks, `tasks` of them, all at once (last: a cluster that
  cannot drain it is stuck for the waves after it, and a wave that does not finish ends
  the plan).

Per wave (figures of `burst.burst_figures`): tasks/s, p50/p99 submit -> RUNNING; the CPU
seconds per 1,000 tasks of each service process (utime + stime from /proc/<pid>/stat
before and after the wave, broker, etcd and the bench client included; fleet processes
summed as `agent-fleet`), and the records the wave added to the catalog's topics. The CPU
of a wave includes the cluster's idle work meanwhile (heartbeats), measured alone first
(`idle_s`). The raw bus is then measured on the same broker with as many records as all
the waves wrote (`bench.raw_bus`: produced and consumed through aiokafka): a wave's bus
floor is the tasks/s the bus would carry at that wave's records per task, its ratio
tasks/s / floor. Cost per task is flat when `small 100%` costs what `small 10%` cost per
1,000 tasks (`cost_ratio` near 1; the summary gives it for every process and for the
scheduling services alone, `SCHEDULING`: the dev broker's cost per task grows with the
history its partitions hold, which Apache Kafka's does not).

A paced wave also gets its `drift` (`pacedrift`): the p50/p99 submit -> RUNNING of the
tasks submitted in its first and its last quarter, and the broker's and the machine's
cores busy meanwhile (the same load offered throughout: what grew while it ran).

The result names the partition counts as the broker has them (`partitions_per_topic`).
Adding a configuration is one more `ScaleConfig` in `CONFIGS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from peloton.bus.catalog import INTERNAL_TOPICS, TOPICS
from peloton.bus.partitions import ENV
from peloton.interpreter import interpreter
from peloton.minicluster.bench import raw_bus, topic_ends, topic_partitions
from peloton.minicluster.burst import (
    SETTLE_S,
    burst_figures,
    fleet_cluster,
    run_burst,
    stuck_diagnosis,
)
from peloton.minicluster.cluster import PARTITIONABLE
from peloton.minicluster.pacedrift import CpuTimeline, drift

__all__ = ["ScaleConfig", "CONFIGS", "Wave", "plan_waves", "wave_sizes", "jobs_per_s",
           "stat_cpu_s", "cpu_sample", "cpu_per_thousand", "service_of", "bus_floor",
           "summarize", "goal_verdicts", "GOAL_TASKS_PER_S", "GOAL_P99_MS", "scale", "plot",
           "tables", "partitions_env", "partitions_text"]

Progress = Callable[[str, float], None]
log = logging.getLogger(__name__)

SMALL = (1, 8)
LARGE = (200, 2_000)


@dataclass(frozen=True)
class ScaleConfig:
    """One cluster configuration: a name and the `Layout.local` keywords that make it; its
    topics get as many partitions as it runs instances of the partitioned services
    (`partitions`, `partitions_env`)."""

    name: str
    layout: dict[str, Any] = field(default_factory=dict)

    @property
    def partitions(self) -> int:
        """Instances of the most partitioned service (`Layout`'s `<service>_instances`, 0
        for one unpartitioned instance; the resource manager's are standbys)."""
        return max(1, *(self.layout.get(f"{s}_instances", 0) for s in PARTITIONABLE))

    def layout_keywords(self, env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """`layout`, its processes' environment with the partition counts added (unless
        `env`, the caller's environment, sets PELOTON_TOPIC_PARTITIONS itself)."""
        setting = partitions_env(self.partitions, os.environ if env is None else env)
        if not setting:
            return dict(self.layout)
        return {**self.layout, "env": {**self.layout.get("env", {}), **setting}}


def partitions_env(count: int | None, env: Mapping[str, str]) -> dict[str, str]:
    """PELOTON_TOPIC_PARTITIONS giving `count` partitions to every topic the catalog gives
    more than one (events and the partitioned services' inboxes; {} when `count` is None
    or `env` already sets the variable: the caller's setting wins)."""
    if count is None or ENV in env:
        return {}
    many = [t.name for t in (*TOPICS, *INTERNAL_TOPICS) if t.partitions > 1]
    return {ENV: ",".join(f"{name}={count}" for name in many)}


# As many partitions as instances of the partitioned services: a partition is the unit of
# their parallelism, and the dev broker charges every fetch by the partitions it names and
# keeps every batch a partition was sent, so partitions no instance needs cost every
# process (measured side by side: docs/performance.md, "Partitions per instance").
CONFIGS: tuple[ScaleConfig, ...] = (
    ScaleConfig("1 of each service", {"resmgr_instances": 1}),
    # Eleven busy processes on 2 cores: with the dev broker's 2 s session timeout the
    # partitioned members missed heartbeats, every rebalance rebuilt their shards (12 s
    # each, starving them more) and the 100,000-task wave never ended. 10 s is Apache
    # Kafka's default (peloton.bus.kafkaconfig); on the dev broker a join then takes ~5 s.
    ScaleConfig("2 of each partitioned service", {
        "resmgr_instances": 1, "jobmgr_instances": 2, "hostmgr_instances": 2,
        "placement_instances": 2, "env": {"PELOTON_KAFKA_SESSION_TIMEOUT_S": "10"}}),
)


def heartbeat_for(hosts: int) -> float:
    """The hosts' heartbeat interval: 1 s up to 1,000 hosts, then as many seconds as
    thousands of hosts (the host manager reads about 1,000 heartbeats a second in all,
    as a Mesos master's agents ping less often in a larger cluster)."""
    return max(1.0, hosts / 1000)


@dataclass(frozen=True)
class Wave:
    """`tasks` tasks in jobs of `job_tasks` (min, max) tasks, all at once when neither
    `fraction` nor `rate` is set, else offered for the paced duration at `rate` tasks/s,
    or at `fraction` of the reference rate (then `tasks` is 0: known once the rate is)."""

    name: str
    job_tasks: tuple[int, int]
    tasks: int = 0
    fraction: float = 0.0
    rate: float = 0.0

    @property
    def paced(self) -> bool:
        return self.fraction > 0 or self.rate > 0

    def offered(self, reference: float) -> float:
        """The tasks/s this wave offers given the reference rate (0: at once)."""
        return self.rate or self.fraction * reference


def plan_waves(tasks: int, paced: Iterable[float] = (0.25, 0.5, 0.75),
               goal_rate: float = 0.0) -> list[Wave]:
    """The waves of one run (module docstring), `tasks` in the last and largest; with a
    `goal_rate`, a paced wave at that rate first (the goal's point, whatever the
    machine's own rate)."""
    waves = [Wave("small 10%", SMALL, max(1, tasks // 10)),
             Wave("large", LARGE, max(1, tasks // 5))]
    if goal_rate > 0:
        waves.append(Wave(f"paced {goal_rate:,.0f}/s (goal)", SMALL, rate=goal_rate))
    waves += [Wave(f"paced {f:.0%}", SMALL, fraction=f) for f in paced]
    return waves + [Wave("small 100%", SMALL, tasks)]


def is_paced(row: dict[str, Any]) -> bool:
    """Whether a wave row is of a paced wave (its offered rate a number, not "at once")."""
    return isinstance(row.get("offered_tasks_per_s"), (int, float))


def wave_sizes(wave: Wave, seed: int, rate: float = 0.0, paced_s: float = 0.0) -> list[int]:
    """Job sizes drawn uniformly from `wave.job_tasks` (seeded) until they sum to the
    wave's tasks exactly (the last job takes what is left, so it may be smaller); a paced
    wave has `rate * paced_s` tasks (at least one)."""
    total = max(1, round(rate * paced_s)) if wave.paced else wave.tasks
    rng = random.Random(f"{seed}/{wave.name}")
    lo, hi = wave.job_tasks
    sizes: list[int] = []
    left = total
    while left > 0:
        n = min(left, rng.randint(lo, hi))
        sizes.append(n)
        left -= n
    return sizes


def jobs_per_s(sizes: list[int], tasks_per_s: float) -> float:
    """The job rate that offers `tasks_per_s` tasks/s with jobs of these sizes on average."""
    return tasks_per_s * len(sizes) / sum(sizes) if sizes and tasks_per_s > 0 else 0.0


def stat_cpu_s(stat: str, ticks_per_s: int) -> float:
    """utime + stime of a /proc/<pid>/stat line, in seconds (fields 14 and 15; the
    command name in parentheses may hold spaces, so fields count from its last ')')."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks_per_s


def cpu_sample(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds used so far by each named live process; one gone or unreadable is left
    out with a warning (its CPU is then missing from the wave's figures)."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for name, pid in pids.items():
        try:
            out[name] = stat_cpu_s(Path(f"/proc/{pid}/stat").read_text(), ticks)
        except (OSError, IndexError, ValueError) as exc:
            log.warning("scale bench: no CPU figure for %s (pid %d): %s", name, pid, exc)
    return out


def service_of(process: str) -> str:
    """The service a process is an instance of: its name without a trailing -<number>
    (`resmgr-1` -> `resmgr`, `agent-fleet-2` -> `agent-fleet`)."""
    return re.sub(r"-\d+$", "", process)


def cpu_per_thousand(before: dict[str, float], after: dict[str, float],
                     tasks: int) -> dict[str, float]:
    """CPU seconds per 1,000 tasks per service (instances summed) between two samples,
    processes in both only; `total` is the sum."""
    per: dict[str, float] = {}
    for name in sorted(before.keys() & after.keys()):
        svc = service_of(name)
        per[svc] = per.get(svc, 0.0) + max(0.0, after[name] - before[name])
    scale = 1000 / tasks if tasks > 0 else 0.0
    out = {svc: round(s * scale, 3) for svc, s in per.items()}
    out["total"] = round(sum(per.values()) * scale, 3)
    return out


def cpu_seconds(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds per service (and `total`) between two samples (`cpu_per_thousand` of
    1,000 tasks)."""
    return cpu_per_thousand(before, after, 1000)


def bus_floor(raw_events_per_s: float, records: int, tasks: int) -> float:
    """Tasks/s the raw bus carries when each task costs records/tasks records."""
    return raw_events_per_s * tasks / records if records > 0 and tasks > 0 else 0.0


#: the scheduling services: a cost ratio of theirs leaves out the dev broker, whose cost per
#: fetch grows with the batches its partitions hold (docs/performance.md), the simulated
#: agents and the benchmark's client
SCHEDULING = ("jobmgr", "resmgr", "placement", "hostmgr")

#: issue 10's goals on a 2-core machine: tasks/s with many small jobs at once, and the p99
#: submit -> RUNNING (ms) under a load offered at half of that rate
GOAL_TASKS_PER_S = 2_000.0
GOAL_P99_MS = 1_000.0


def goal_verdicts(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Whether one configuration's waves met the goals: every small-job wave at once at
    `GOAL_TASKS_PER_S` or more (and finished); the p99 under `GOAL_P99_MS` in the paced
    waves offered at half of the goal's rate or more, judged at the least loaded of them
    (the plan's paced waves follow the measured rate: when none was offered that much,
    the goal's point was not measured, and `--max-rate` sets it)."""
    half = GOAL_TASKS_PER_S / 2
    small = [r for r in rows if not is_paced(r) and r["wave"].startswith("small")]
    out: dict[str, str] = {}
    if small:
        rates = ", ".join(f"{r['tasks_per_s']:,.0f}" for r in small)
        met = all(r["tasks_per_s"] >= GOAL_TASKS_PER_S and not r["jobs_not_terminal"]
                  for r in small)
        out[f"goal >= {GOAL_TASKS_PER_S:,.0f} tasks/s, small jobs at once"] = (
            f"{'met' if met else 'missed'} ({rates})")
    paced = sorted((r for r in rows if is_paced(r) and r["offered_tasks_per_s"] >= half),
                   key=lambda r: r["offered_tasks_per_s"])
    key = f"goal p99 < {GOAL_P99_MS / 1000:g} s at {half:,.0f} tasks/s or more"
    if not paced:
        out[key] = f"not measured (no paced wave offered {half:,.0f}/s or more)"
    else:
        at = paced[0]
        p99 = at["p99_submit_to_running_ms"]
        met = p99 is not None and p99 < GOAL_P99_MS and not at["jobs_not_terminal"]
        shown = "-" if p99 is None else f"{p99 / 1000:.2f} s"
        out[key] = (f"{'met' if met else 'missed'} ({shown} at "
                    f"{at['offered_tasks_per_s']:,.0f}/s, {at['wave']})")
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The goal figures of one configuration's wave rows (module docstring): the rates of
    small jobs at once, every wave that did not finish (and where its runs were lost), the
    p99 of the paced wave nearest half of the reference rate, the cost per task of the
    largest small wave against the first, which service spent the most, and whether the
    goals were met (`goal_verdicts`)."""
    by_name = {r["wave"]: r for r in rows}
    first, last = by_name.get("small 10%"), by_name.get("small 100%")
    out: dict[str, Any] = {}
    for row in (first, last):
        if row is not None:
            out[f"tasks_per_s, {row['tasks']:,} small-job tasks at once"] = row["tasks_per_s"]
    for row in rows:  # any wave that did not finish (the plan stops after it)
        if row.get("ends_recovered_by_reconciliation"):
            where = row.get("recovered_ends_trail", {}).get("by_step")
            out[f"ends recovered by reconciliation ({row['wave']})"] = (
                f"{row['ends_recovered_by_reconciliation']:,}"
                + (f"; first reports: {where}" if where else ""))
        if row["jobs_not_terminal"]:
            lost = row.get("stuck_diagnosis", {}).get("by_class")
            out[f"jobs not terminal ({row['wave']})"] = (
                f"{row['jobs_not_terminal']:,}: {row['stuck_task_states']}"
                + (f"; lost: {lost}" if lost else ""))
    paced = [r for r in rows if r.get("fraction")]  # the waves at a fraction of the rate
    if paced:
        half = min(paced, key=lambda r: abs(r["fraction"] - 0.5))
        out[f"p99_submit_to_running_ms at {half['wave']}"] = half["p99_submit_to_running_ms"]
        out[f"offered_tasks_per_s at {half['wave']}"] = half["offered_tasks_per_s"]
    if first is not None and last is not None:
        a, b = first["cpu_s_per_1000_tasks"]["total"], last["cpu_s_per_1000_tasks"]["total"]
        out[f"cpu_s_per_1000_tasks at {first['tasks']:,} tasks"] = a
        out[f"cpu_s_per_1000_tasks at {last['tasks']:,} tasks"] = b
        out["cost_ratio (largest / first small wave; flat = 1)"] = round(b / a, 2) if a else None
        a, b = (sum(row["cpu_s_per_1000_tasks"].get(s, 0.0) for s in SCHEDULING)
                for row in (first, last))
        out[f"cost_ratio, scheduling services only ({', '.join(SCHEDULING)})"] = (
            round(b / a, 2) if a else None)
    if last is not None:
        svc = {k: v for k, v in last["cpu_s_per_1000_tasks"].items()
               if k not in ("total", "bench client")}
        if svc:
            top = max(svc, key=lambda k: svc[k])
            out["busiest service (small 100%)"] = f"{top} ({svc[top]} cpu s/1000 tasks)"
        out["ratio_to_bus (small 100%)"] = last.get("ratio_to_bus")
    return {**out, **goal_verdicts(rows)}


def _wave_row(wave: Wave, sizes: list[int], rate: float, fig: dict[str, Any],
              cpu: dict[str, float], records: int) -> dict[str, Any]:
    return {"wave": wave.name, "fraction": wave.fraction, "jobs": len(sizes),
            "tasks": sum(sizes), "offered_tasks_per_s": round(rate, 1) if rate else "at once",
            "submit_s": fig["submit_s"], "tasks_per_s": fig["tasks_per_s"],
            "p50_submit_to_running_ms": fig["p50_submit_to_running_ms"],
            "p99_submit_to_running_ms": fig["p99_submit_to_running_ms"],
            "p99_submit_to_terminal_ms": fig["p99_submit_to_terminal_ms"],
            "p50_p99_ms_to_each_state": fig["p50_p99_ms_to_each_state"],
            "jobs_not_terminal": fig["jobs_not_terminal"],
            "ends_recovered_by_reconciliation": fig["ends_recovered_by_reconciliation"],
            "stuck_task_states": fig["stuck_task_states"],
            "stopped_because": fig["stopped_because"], "wall_s": fig["wall_s"],
            **{k: fig[k] for k in ("stuck_diagnosis", "recovered_ends_trail", "drift")
               if k in fig},
            "records": records, "records_per_task": round(records / max(1, sum(sizes)), 3),
            "cpu_s_per_1000_tasks": cpu}


def _run_config(config: ScaleConfig, waves: list[Wave], hosts: int, agent_processes: int,
                cpu_per_host: float, seed: int, max_rate: float, paced_s: float,
                idle_s: float, settle_s: float, timeout_s: float, offer_timeout_s: float,
                run_dir: Path | None, say: Progress) -> dict[str, Any]:
    duration_s, task_cpu = 0.1, 0.1
    with fleet_cluster(hosts, agent_processes, cpu_per_host, say, run_dir, offer_timeout_s,
                       heartbeat_s=heartbeat_for(hosts), **config.layout_keywords()) as fleet:
        boot = fleet.cluster.layout.bootstrap
        partitions = asyncio.run(topic_partitions(boot))
        pids = {n: p.pid for n, p in fleet.cluster.procs.items()}
        pids["bench client"] = os.getpid()
        say(f"idle for {idle_s:.0f}s", 0.0)
        before = cpu_sample(pids)
        time.sleep(idle_s)
        after = cpu_sample(pids)
        # cores busy per service while nothing is submitted (per 1,000 "tasks" of 1,000:
        # the seconds themselves)
        idle = {k: round(v / idle_s, 3) for k, v in cpu_seconds(before, after).items()}
        rows: list[dict[str, Any]] = []
        ref = max_rate
        for i, wave in enumerate(waves):
            rate = wave.offered(ref)
            if wave.paced and rate <= 0:
                say(f"skipping {wave.name}: no reference rate", 0.0)
                continue
            sizes = wave_sizes(wave, seed, rate, paced_s)
            say(f"wave {wave.name}: {len(sizes):,} jobs, {sum(sizes):,} tasks", 0.0)
            records0 = asyncio.run(topic_ends(boot))
            cpu0 = cpu_sample(pids)
            # CPU samples during the wave: a paced wave's drift (`pacedrift`) needs them
            timeline = CpuTimeline(partial(cpu_sample, pids)) if wave.paced else None
            with timeline or contextlib.nullcontext():
                out = asyncio.run(run_burst(boot, sizes, duration_s, task_cpu, settle_s,
                                            timeout_s, say, jobs_per_s(sizes, rate),
                                            from_end=i > 0))
            cpu1 = cpu_sample(pids)
            records = asyncio.run(topic_ends(boot)) - records0
            fig = {**burst_figures(out), **asyncio.run(stuck_diagnosis(boot, out, say))}
            if timeline is not None:
                fig["drift"] = drift(out.follower.running_by_submit(out.submitted),
                                     timeline.samples, cpu_seconds)
            rows.append(_wave_row(wave, sizes, rate, fig,
                                  cpu_per_thousand(cpu0, cpu1, sum(sizes)), records))
            if not ref and wave.name == "small 10%":
                ref = fig["tasks_per_s"]
            if fig["jobs_not_terminal"]:
                say(f"wave {wave.name} did not finish ({fig['stuck_task_states']}): the "
                    f"later waves would only queue behind it, skipped", 0.0)
                break
        total_records = sum(r["records"] for r in rows)
        say(f"raw bus: {total_records:,} records", 0.0)
        bus_pids = {"broker": pids["broker"], "bench client": os.getpid()}
        cpu0 = cpu_sample(bus_pids)
        raw = asyncio.run(raw_bus(boot, max(1, total_records)))
        cpu1 = cpu_sample(bus_pids)
    bus_cpu = sum(cpu1[k] - cpu0[k] for k in cpu0.keys() & cpu1.keys())
    for r in rows:
        floor = bus_floor(raw["raw_bus_events_per_s"], r["records"], r["tasks"])
        r["bus_floor_tasks_per_s"] = round(floor, 1)
        r["ratio_to_bus"] = round(r["tasks_per_s"] / floor, 3) if floor else None
        r["bus_cpu_s_per_1000_tasks"] = round(
            bus_cpu / max(1, total_records) * r["records_per_task"] * 1000, 3)
    return {"config": config.name, "hosts": hosts, "agent_processes": agent_processes,
            "hosts_offered_s": round(fleet.offered_s, 1), "reference_tasks_per_s": ref,
            "partitions_per_topic": partitions_text(partitions),
            "idle_cores": idle, "raw_bus_events_per_s": round(raw["raw_bus_events_per_s"], 1),
            "raw_bus_records": total_records, "raw_bus_cpu_s": round(bus_cpu, 2),
            "waves": rows, "summary": summarize(rows)}


def partitions_text(counts: Mapping[str, int]) -> str:
    """The topics' partition counts, the most common first, then the others by how many
    topics have them: "4" when every topic has 4, "1 (entitlement-updated, respool-events:
    4)" when two differ."""
    by_count: dict[int, list[str]] = {}
    for name, n in sorted(counts.items()):
        by_count.setdefault(n, []).append(name)
    if not by_count:
        return "-"
    ranked = sorted(by_count, key=lambda n: (-len(by_count[n]), n))
    others = "; ".join(f"{', '.join(by_count[n])}: {n}" for n in ranked[1:])
    return f"{ranked[0]} ({others})" if others else str(ranked[0])


def scale(tasks: int = 100_000, hosts: int = 1_000, agent_processes: int = 2,
          configs: Iterable[ScaleConfig] = CONFIGS,
          paced: Iterable[float] = (0.25, 0.5, 0.75), paced_s: float = 20.0,
          goal_rate: float = GOAL_TASKS_PER_S / 2,
          max_rate: float = 0.0, cpu_per_host: float = 64.0, seed: int = 7,
          idle_s: float = 5.0, settle_s: float = SETTLE_S, timeout_s: float = 900.0,
          offer_timeout_s: float = 120.0, run_dir: Path | None = None,
          progress: Progress | None = None) -> dict[str, Any]:
    """Run the plan on each configuration in turn (module docstring); a configuration that
    fails (say its hosts are not all offered in time) is reported with its error."""
    say: Progress = progress or (lambda _m, _f: None)
    waves = plan_waves(tasks, paced, goal_rate)
    results = []
    for config in configs:
        where = None if run_dir is None else run_dir / re.sub(r"\W+", "-", config.name)
        try:
            results.append(_run_config(config, waves, hosts, agent_processes, cpu_per_host,
                                       seed, max_rate, paced_s, idle_s, settle_s, timeout_s,
                                       offer_timeout_s, where, say))
        except (TimeoutError, RuntimeError) as exc:
            results.append({"config": config.name, "hosts": hosts, "error": str(exc)})
    # every process of the run (services, fleets, this client) runs this interpreter
    return {"tasks": tasks, "hosts": hosts, "seed": seed, "python": interpreter(),
            "configs": results}


def plot(result: dict[str, Any], path: Path) -> Path:
    """tasks/s (solid, left axis) and p99 submit -> RUNNING in s (dashed, right axis) per
    wave: against the wave's tasks for the waves submitted at once, against the offered
    rate for the paced ones; one colour per configuration; a wave that did not finish is
    a hollow marker (its p99 is of the tasks that ran)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, panels = plt.subplots(1, 2, figsize=(12, 6))
    twins = [ax.twinx() for ax in panels]
    for n, cfg in enumerate(c for c in result["configs"] if "waves" in c):
        colour = f"C{n}"
        at_once = sorted((r for r in cfg["waves"] if not is_paced(r)),
                         key=lambda r: r["tasks"])
        series = [(panels[0], twins[0], [r for r in at_once if r["wave"] != "large"],
                   "tasks", "small jobs", ("o-", "s--")),
                  (panels[0], twins[0], [r for r in at_once if r["wave"] == "large"],
                   "tasks", "large jobs", ("^", "v")),
                  (panels[1], twins[1], sorted((r for r in cfg["waves"]
                                                if is_paced(r) and r["fraction"]),
                                               key=lambda r: r["offered_tasks_per_s"]),
                   "offered_tasks_per_s", "small jobs", ("o-", "s--")),
                  # the goal's wave, offered at its own rate before the others: a point
                  (panels[1], twins[1], [r for r in cfg["waves"]
                                         if is_paced(r) and not r["fraction"]],
                   "offered_tasks_per_s", "small jobs, the goal's wave (first)", ("*", "X"))]
        for ax, twin, rows, x, shape, styles in series:
            for key, axis, style, label in (
                    ("tasks_per_s", ax, styles[0], "tasks/s"),
                    ("p99_submit_to_running_ms", twin, styles[1], "p99 submit->RUNNING, s")):
                pts = [(r[x], r[key] / (1000 if axis is twin else 1), r["jobs_not_terminal"])
                       for r in rows if r[key] is not None]
                if not pts:
                    continue
                axis.plot([p[0] for p in pts], [p[1] for p in pts], style, color=colour,
                          label=f"{cfg['config']}, {shape}: {label}")
                for px, py, stuck in pts:
                    if stuck:
                        axis.plot([px], [py], "o", mfc="white", color=colour, ms=9)
            for r in rows if x == "tasks" else ():  # name the waves at once
                ax.annotate(r["wave"] + (" (not finished)" if r["jobs_not_terminal"] else ""),
                            (r[x], r["tasks_per_s"]), fontsize=7)
    panels[0].set_xscale("log")
    panels[0].set_xlabel("tasks submitted at once (wave)")
    panels[1].set_xlabel("offered tasks/s (small jobs, paced)")
    twins[1].axhline(1.0, color="grey", lw=0.8, ls=":", label="p99 goal 1 s")
    for ax, twin in zip(panels, twins, strict=True):
        ax.set_ylabel("tasks/s")
        twin.set_ylabel("p99 submit -> RUNNING, s")
        ax.set_ylim(bottom=0)
        twin.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        lines = ax.get_legend_handles_labels()
        more = twin.get_legend_handles_labels()
        ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="upper center",
                  bbox_to_anchor=(0.5, -0.14), ncol=1, frameon=False)
    fig.suptitle(f"peloton bench scale: {result['hosts']:,} simulated hosts, "
                 f"{result['tasks']:,} tasks in the largest wave")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")  # the legends below the panels
    plt.close(fig)
    return path


def tables(result: dict[str, Any]) -> list[Any]:
    """The result as rich tables: per configuration its waves, the time from submit to
    each task state, and the CPU seconds per 1,000 tasks of each service per wave; then
    the goal figures, configurations side by side."""
    from rich.table import Table

    out: list[Any] = []
    cols = ("jobs", "tasks", "offered_tasks_per_s", "tasks_per_s", "p50_submit_to_running_ms",
            "p99_submit_to_running_ms", "records_per_task", "bus_floor_tasks_per_s",
            "ratio_to_bus", "jobs_not_terminal")
    for cfg in result["configs"]:
        if "waves" not in cfg:
            continue
        waves = Table("wave", *(c.replace("_", " ") for c in cols),
                      title=f"scale: {cfg['config']}, {cfg['hosts']:,} hosts (offered in "
                            f"{cfg['hosts_offered_s']} s), partitions per topic "
                            f"{cfg.get('partitions_per_topic', '-')}, raw bus "
                            f"{cfg['raw_bus_events_per_s']:,} records/s, on "
                            f"{result.get('python', 'an unnamed Python')}")
        for r in cfg["waves"]:
            waves.add_row(r["wave"], *(_cell(r.get(c)) for c in cols))
        out.append(waves)
        stages = Table("wave", "p50/p99 ms from submit to each state",
                       title=f"scale: {cfg['config']}: where the time goes")
        for r in cfg["waves"]:
            stages.add_row(r["wave"], _cell(r.get("p50_p99_ms_to_each_state")))
        out.append(stages)
        services = sorted({s for r in cfg["waves"] for s in r["cpu_s_per_1000_tasks"]},
                          key=lambda s: (s == "total", s))
        cpu = Table("service", "idle cores", *(r["wave"] for r in cfg["waves"]),
                    title=f"scale: {cfg['config']}: CPU s per 1,000 tasks (idle: cores busy "
                          f"with nothing submitted)")
        for svc in services:
            cpu.add_row(svc, _cell(cfg["idle_cores"].get(svc)),
                        *(_cell(r["cpu_s_per_1000_tasks"].get(svc)) for r in cfg["waves"]))
        cpu.add_row("cores busy (total / wave's wall time)", "-", *(_cell(round(
            r["cpu_s_per_1000_tasks"]["total"] * r["tasks"] / 1000 / r["wall_s"], 2))
            for r in cfg["waves"]))
        cpu.add_row("raw bus (broker + client)", "-",
                    *(_cell(r["bus_cpu_s_per_1000_tasks"]) for r in cfg["waves"]))
        out.append(cpu)
        drifting = [r for r in cfg["waves"] if r.get("drift")]
        if drifting:
            out.append(_drift_table(cfg["config"], drifting))
        stuck = [r for r in cfg["waves"] if r.get("stuck_diagnosis")]
        if stuck:
            lost = Table("wave", "stuck runs", "by class", "hosts (most first)", "samples",
                         title=f"scale: {cfg['config']}: where the runs of the jobs that "
                               f"did not end were lost")
            for r in stuck:
                d = r["stuck_diagnosis"]
                lost.add_row(r["wave"], _cell(d["stuck_runs"]), _cell(d["by_class"]),
                             f"{d['hosts']:,}: {d['top_hosts']}",
                             "\n".join(x for xs in d["samples"].values() for x in xs))
            out.append(lost)
    summary = Table("figure", *(c["config"] for c in result["configs"]),
                    title="scale: goals (>= 2,000 tasks/s; p99 < 1 s at half of it; flat cost)")
    keys = list(dict.fromkeys(k for c in result["configs"]
                              for k in ("error", *c.get("summary", {}))
                              if k != "error" or "error" in c))
    for key in keys:
        summary.add_row(key, *(_cell(c.get("summary", {}).get(key, c.get(key)))
                               for c in result["configs"]))
    out.append(summary)
    return out


def _drift_table(config: str, rows: list[dict[str, Any]]) -> Any:
    """The paced waves' first quarter against their last (`pacedrift.drift`)."""
    from rich.table import Table

    table = Table("wave", "quarter", "tasks", "p50 / p99 ms submit -> RUNNING",
                  "broker cores", "machine cores",
                  title=f"scale: {config}: paced waves, first quarter against last (the "
                        f"same load offered; what grew while it ran)")
    for r in rows:
        for name, q in r["drift"].items():
            table.add_row(r["wave"], name, _cell(q["tasks"]),
                          f"{_cell(q['p50_ms'])} / {_cell(q['p99_ms'])}",
                          _cell(q["broker_cores"]), _cell(q["machine_cores"]))
    return table


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)
