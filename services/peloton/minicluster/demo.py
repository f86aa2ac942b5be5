"""The demo (`task demo`, `peloton cluster demo`): every workload type on one local
cluster, then a rolling update and a host maintenance, shown as a live table.

Steps, each waiting (with a timeout) for what it says:
1. create the pools of examples/respool/{services,batch}.yaml (/services reserves half
   the cluster's cpus, /batch little) and submit `backfill` (pool /batch): batch work
   borrows the idle cpus of /services;
2. submit the other job files of examples/jobs: batch jobs, the `web` SERVICE (3
   instances, an HTTP health check), the `node-agent` DAEMON and the `counter-db` STATEFUL
   job, all in /services: the resource manager preempts borrowed batch tasks to give
   /services its reservation back (they run again later). Wait until the batch jobs have
   SUCCEEDED, web runs 3/3 healthy, node-agent runs once on every host and counter-db
   runs;
3. roll web to examples/updates/web-service-v2.yaml, one instance at a time;
4. put a host that runs web (and not counter-db, whose data stays on its host) into
   maintenance: it drains within web's SLA, goes DOWN, then maintenance completes and the
   daemon comes back on it;
5. stop the long-running jobs and print a summary.
`run_demo` returns the steps that failed (empty: all passed).
examples/ is `peloton.datafiles.examples_dir()`: the repository's, or an installed wheel's
copy, wherever the command runs from.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from peloton.cli.client import ApiError, PelotonClient
from peloton.datafiles import examples_dir

__all__ = ["run_demo", "DemoState", "StepFailed"]

LONG_RUNNING = ("SERVICE", "STATEFUL", "DAEMON")


class StepFailed(Exception):
    """A step can no longer succeed (an update failed): stop waiting for it."""


@dataclass
class DemoState:
    jobs: dict[str, str] = field(default_factory=dict)  # name -> job id
    types: dict[str, str] = field(default_factory=dict)
    step: str = ""
    detail: str = ""
    log: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    plain: Console | None = None  # not a terminal (a log, CI): one line per event instead

    def say(self, line: str) -> None:
        self.log.append(line)
        if self.plain is not None:
            self.plain.print(f"  {line}", highlight=False)

    def begin(self, step: str) -> None:
        self.step = step
        if self.plain is not None:
            self.plain.print(f"step {step}", style="bold", highlight=False)


def _table(client: PelotonClient, state: DemoState) -> Group:
    table = Table("job", "type", "state", "tasks", "detail", expand=False)
    for name, job_id in state.jobs.items():
        try:
            job = client.get_job(job_id)
            tasks = client.tasks(job_id)["tasks"]
        except Exception:  # noqa: BLE001 - the read model may not have it yet
            table.add_row(name, state.types.get(name, ""), "SUBMITTED", "", "")
            continue
        counts: dict[str, int] = {}
        for t in tasks:
            counts[t["state"]] = counts.get(t["state"], 0) + 1
        running = [t for t in tasks if t["state"] == "RUNNING"]
        detail = ""
        if state.types.get(name) in LONG_RUNNING and running:
            healthy = sum(1 for t in running if t.get("health") in (None, "HEALTHY"))
            versions = sorted({str(t.get("config_version", 1)) for t in running})
            hosts = sorted({str(t["host"]) for t in running})
            detail = (f"{healthy}/{len(running)} healthy, version {'/'.join(versions)}, "
                      f"on {', '.join(hosts)}")
        table.add_row(name, state.types.get(name, job.get("type", "")), job["state"],
                      " ".join(f"{k}:{v}" for k, v in sorted(counts.items())), detail)
    lines = [Text(f"step: {state.step}", style="bold"), Text(state.detail)]
    lines += [Text(line, style="dim") for line in state.log[-6:]]
    return Group(table, *lines)


def _wait(live: Live, client: PelotonClient, state: DemoState, what: str,
          check: Callable[[], bool | str], timeout: float) -> bool:
    """Poll `check` (True: done; a string: progress to show) until done or timeout."""
    state.detail = f"waiting for {what}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = check()
        except StepFailed as exc:
            state.failed.append(what)
            state.say(f"FAILED: {what}: {exc}")
            return False
        except Exception as exc:  # noqa: BLE001 - show it and keep polling
            result = f"({exc})"
        if result is True:
            state.say(f"ok: {what}")
            live.update(_table(client, state))
            return True
        if isinstance(result, str) and result:
            state.detail = f"waiting for {what}: {result}"
        live.update(_table(client, state))
        time.sleep(0.5)
    state.failed.append(what)
    state.say(f"TIMED OUT: {what}")
    return False


def _tasks(client: PelotonClient, job_id: str) -> list[dict[str, Any]]:
    return list(client.tasks(job_id)["tasks"])


def _submit(client: PelotonClient, state: DemoState, path: Path) -> None:
    import yaml

    doc = yaml.safe_load(path.read_text())
    state.jobs[path.stem] = client.submit_job(path.read_text())["job_id"]
    state.types[path.stem] = str(doc.get("type", "BATCH")).upper()


def _pools(client: PelotonClient, pools_dir: Path) -> None:
    """Create /services and /batch (already there: fine) and wait for an entitlement
    cycle that knows them (the job manager checks a job's pool against it). /default
    gives back the reservation `peloton cluster up` gave it (the two pools need room
    among the root's reservations; peloton.minicluster.defaultpool)."""
    from peloton.minicluster.defaultpool import release_default

    release_default(client)
    for name in ("services", "batch"):
        try:
            client.create_pool(f"/{name}", (pools_dir / f"{name}.yaml").read_text())
        except ApiError as exc:
            if exc.status != 409:
                raise


def _borrowing(client: PelotonClient, job_id: str) -> bool | str:
    running = sum(1 for t in _tasks(client, job_id) if t["state"] == "RUNNING")
    pool = client.pool("/batch")
    alloc, reserved = pool["allocation"].get("cpu", 0.0), pool["reservation"].get("cpu", 0.0)
    return (alloc > reserved and running > 0) or (
        f"{running} tasks running; /batch uses {alloc:g} of its {reserved:g} reserved cpus")


def run_demo(client: PelotonClient, jobs_dir: Path, updates_dir: Path,
             console: Console, timeout: float = 180.0,
             pools_dir: Path | None = None) -> DemoState:
    pools_dir = examples_dir() / "respool" if pools_dir is None else pools_dir
    state = DemoState(plain=None if console.is_terminal else console)
    files = sorted(jobs_dir.glob("*.yaml"))
    backfill = jobs_dir / "backfill.yaml"
    # on a terminal the table is live; elsewhere (a log) the steps are printed as lines
    # and the table once at the end
    with Live(console=console, refresh_per_second=4,
              transient=state.plain is not None) as live:
        state.begin("1/5 pools /services and /batch; backfill borrows idle cpus")
        _pools(client, pools_dir)
        _wait(live, client, state, "an entitlement cycle with /services and /batch",
              partial(_pools_known, client), 60)
        if backfill.exists():
            _submit(client, state, backfill)
            _wait(live, client, state, "backfill borrowing cpus beyond /batch's "
                  "reservation", partial(_borrowing, client, state.jobs["backfill"]), 120)

        state.begin("2/5 every workload: services take their reservation back")
        for f in files:
            if f != backfill:
                _submit(client, state, f)
        batch = [n for n, t in state.types.items() if t not in LONG_RUNNING]
        hosts = sorted(h["host"] for h in client.hosts()["hosts"])
        for name in batch:
            _wait(live, client, state, f"{name} SUCCEEDED",
                  partial(_job_in, client, state.jobs[name], "SUCCEEDED"), timeout)
        if backfill.exists():
            taken = client.preemptions(job_id=state.jobs["backfill"])["preemptions"]
            state.say(f"{len(taken)} backfill task(s) preempted to give /services "
                             "its reservation back" if taken else
                             "no backfill task had to be preempted")
        for name, kind in state.types.items():
            if kind == "SERVICE" or kind == "STATEFUL":
                _wait(live, client, state, f"{name}: every instance RUNNING and healthy",
                      partial(_all_healthy, client, state.jobs[name]), timeout)
            elif kind == "DAEMON":
                _wait(live, client, state, f"{name}: one instance on each of {len(hosts)} "
                      "hosts", partial(_on_hosts, client, state.jobs[name], hosts), timeout)

        web = state.jobs.get("web-service")
        update_file = updates_dir / "web-service-v2.yaml"
        if web and update_file.exists():
            state.begin("3/5 rolling update of web to version 2, one instance at a time")
            update_id = client.update_job(web, update_file.read_text(),
                                          {"batch_size": 1})["update_id"]
            _wait(live, client, state, "the update SUCCEEDED",
                  lambda: _update_done(client, update_id), timeout)

        stateful = {t["host"] for n, k in state.types.items() if k == "STATEFUL"
                    for t in _tasks(client, state.jobs[n])}
        target = next((t["host"] for t in (_tasks(client, web) if web else [])
                       if t["host"] and t["host"] not in stateful), None)
        if web and target:
            state.begin(f"4/5 maintenance of {target}: drain within web's SLA, then DOWN")
            client.host_maintenance(target, "start", deadline="2m")
            _wait(live, client, state, f"{target} DOWN",
                  lambda: _host_state(client, target, "DOWN"), timeout)
            moved = [t["host"] for t in _tasks(client, web) if t["state"] == "RUNNING"]
            state.say(f"web now runs on {', '.join(sorted(moved))}")
            client.host_maintenance(target, "complete")
            _wait(live, client, state, f"{target} UP again, with its daemon back",
                  lambda: _host_state(client, target, "UP") is True and all(
                      _on_hosts(client, state.jobs[n], hosts) is True
                      for n, k in state.types.items() if k == "DAEMON"), timeout)

        state.begin("5/5 stop the long-running jobs")
        for name, kind in state.types.items():
            if kind in LONG_RUNNING:
                client.kill_job(state.jobs[name])
        for name, kind in state.types.items():
            if kind in LONG_RUNNING:
                _wait(live, client, state, f"{name} KILLED",
                      partial(_job_in, client, state.jobs[name], "KILLED"), 60)
        state.begin("done" if not state.failed else f"{len(state.failed)} step(s) failed")
        state.detail = ""
        live.update(_table(client, state))
    if state.plain is not None:
        console.print(_table(client, state).renderables[0])
    console.print()
    return state


def _pools_known(client: PelotonClient) -> bool | str:
    cycles = {p["pool"]: p["cycle"] for p in client.pools()["pools"]}
    missing = [p for p in ("/services", "/batch") if not cycles.get(p)]
    return not missing or f"waiting for {', '.join(missing)}"


def _job_in(client: PelotonClient, job_id: str, want: str) -> bool | str:
    now = str(client.get_job(job_id)["state"])
    return now == want or now


def _all_healthy(client: PelotonClient, job_id: str) -> bool | str:
    job = client.get_job(job_id)
    tasks = _tasks(client, job_id)
    good = [t for t in tasks if t["state"] == "RUNNING" and t.get("health") in (None,
                                                                                "HEALTHY")]
    return len(good) == job["instance_count"] or f"{len(good)}/{job['instance_count']}"


def _on_hosts(client: PelotonClient, job_id: str, hosts: list[str]) -> bool | str:
    running = {t["host"] for t in _tasks(client, job_id) if t["state"] == "RUNNING"}
    return running >= set(hosts) or f"on {len(running)}/{len(hosts)} hosts"


def _update_done(client: PelotonClient, update_id: str) -> bool | str:
    u = client.get_update(update_id)
    if u["state"] == "SUCCEEDED":
        return True
    if u["state"] in ("FAILED", "ROLLED_BACK", "ABORTED", "REJECTED"):
        raise StepFailed(f"update {u['state']}: {u.get('reason', '')}")
    return f"{u['state']}: {u.get('reason', '')}"


def _host_state(client: PelotonClient, host: str, want: str) -> bool | str:
    h = client.host(host)
    return h.get("maintenance_state") == want or str(h.get("maintenance_state"))
