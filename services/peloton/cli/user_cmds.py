"""User commands: `peloton job|task|host|respool ...` over the HTTP API.

Every command takes `-o/--output table|wide|json|yaml` (json/yaml print the API's answer,
for scripts; wide adds columns; see peloton.cli.output) and `--api URL` (default:
$PELOTON_API or http://127.0.0.1:5290). get/list commands take `--watch/-w` and
`--interval` (see peloton.cli.watch); `job list -l` a label selector (peloton.model.selector).
Exit codes: 0 ok; 1 the API answered with an error, or a waited-for job did not succeed;
2 invalid input (job and pool files are checked locally before anything is sent); 3 the
API is unreachable. Pool changes wait for the resource manager's answer (exit 1 when it
rejects them, with its reasons) unless --no-wait.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column, Table
from rich.text import Text
from rich.tree import Tree

from peloton.cli.client import ApiError, ApiUnreachable, PelotonClient, default_api
from peloton.cli.output import Output, OutputOpt, emit
from peloton.cli.pending_view import (
    never_admissible,
    pending_rows,
    reason_cell,
    warning_lines,
)
from peloton.cli.watch import IntervalOpt, WatchOpt, show
from peloton.jobmgr.domain.validation import check_job_document
from peloton.model.jobfile import JobFileError, parse_job_file

__all__ = ["register", "Output", "EXIT_API_ERROR", "EXIT_INVALID", "EXIT_UNREACHABLE"]

EXIT_API_ERROR = 1
EXIT_INVALID = 2
EXIT_UNREACHABLE = 3
TERMINAL_JOB_STATES = {"SUCCEEDED": 0, "FAILED": 1, "KILLED": 1, "REJECTED": 1}
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


ApiOpt = Annotated[str | None, typer.Option(
    "--api", help="API base URL (default: $PELOTON_API or http://127.0.0.1:5290)",
    show_default=False)]


# ---- plumbing -------------------------------------------------------------------------
def _out() -> Console:
    # piped output (grep, less) gets wide tables rather than truncated cells
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else 200)


def _err(message: str) -> None:
    typer.echo(message, err=True)


def read_input_file(file: Path) -> str:
    """A file the user named, or exit 2 saying why it cannot be read."""
    try:
        return file.read_text()
    except OSError as exc:
        _err(f"error: cannot read {file}: {exc.strerror or exc}")
        raise typer.Exit(EXIT_INVALID) from exc


@contextmanager
def _client(api: str | None) -> Iterator[PelotonClient]:
    """A client whose failures end the command with a clear message and exit code."""
    client = PelotonClient(api or default_api())
    try:
        yield client
    except ApiUnreachable as exc:
        _err(f"error: {exc}")
        raise typer.Exit(EXIT_UNREACHABLE) from exc
    except ApiError as exc:
        _err(f"error: {exc.error}")
        for d in exc.details:
            if isinstance(d, dict) and "message" in d:
                _err(f"  {d.get('field') or '-'}: {d['message']}")
            else:
                _err(f"  {d}")
        # a 400 is bad input (exit 2, as when the CLI finds it itself); others exit 1
        raise typer.Exit(EXIT_INVALID if exc.status == 400 else EXIT_API_ERROR) from exc
    finally:
        client.close()


api_client = _client  # for the other command modules


def _ts(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "-"


def _res(values: dict[str, float] | None, *kinds: str) -> str:
    if not values:
        return "-"
    return " ".join(f"{k} {values.get(k, 0):g}" for k in kinds if k in values)


# ---- job ------------------------------------------------------------------------------
def job_create(
    file: Annotated[Path, typer.Argument(help="job file (YAML or JSON)")],
    wait: Annotated[bool, typer.Option("--wait", help="follow the job until it ends")] = False,
    job_id: Annotated[str | None, typer.Option("--job-id", help="default: a new uuid")] = None,
    timeout: Annotated[float | None, typer.Option(help="give up waiting after seconds")] = None,
    interval: Annotated[float, typer.Option(help="seconds between polls", hidden=True)] = 0.5,
    output: OutputOpt = Output.table, api: ApiOpt = None,
) -> None:
    """Submit a job file. The file is checked locally first."""
    text = read_input_file(file)
    problems: list[str] = []
    if job_id is not None and not _JOB_ID.match(job_id):
        problems.append("--job-id: 1-128 letters, digits, '.', '_' or '-', starting with a "
                        "letter or digit")
    try:
        check_job_document(parse_job_file(text, job_id or "local-check",
                                          int(time.time() * 1000)))
    except JobFileError as exc:
        problems.extend(exc.problems)
    if problems:
        _err(f"error: {file} is not a valid job file:")
        for p in problems:
            _err(f"  {p}")
        raise typer.Exit(EXIT_INVALID)
    with _client(api) as client:
        accepted = client.submit_job(text, job_id)
        for line in warning_lines(accepted):
            _err(line)
        if not wait:
            if output.machine:
                emit(accepted, output)
            else:
                _out().print(f"job [bold]{accepted['job_id']}[/bold] submitted")
            return
        job = _wait(client, accepted["job_id"], output, timeout, interval)
    if output.machine:
        emit(job, output)
    else:
        _show_job(job)
    if job["state"] == "REJECTED":
        for reason in job["rejection_reasons"]:
            _err(f"  rejected: {reason}")
    raise typer.Exit(TERMINAL_JOB_STATES.get(job["state"], EXIT_API_ERROR))


def _wait(client: PelotonClient, job_id: str, output: Output, timeout: float | None,
          interval: float) -> dict[str, Any]:
    deadline = None if timeout is None else time.monotonic() + timeout
    progress = Progress(TextColumn("[bold]{task.description:<10}"), BarColumn(bar_width=30),
                        MofNCompleteColumn(), TextColumn("{task.fields[detail]}"),
                        TimeElapsedColumn(), console=Console(stderr=True),
                        disable=output.machine)
    if not output.machine:
        _err(f"waiting for job {job_id}")
    with progress:
        bar = progress.add_task("SUBMITTED", total=None, detail="succeeded")
        while True:
            job = poll_job(client, job_id)
            if job is not None:
                advance_bar(progress, bar, job)
                if job["state"] in TERMINAL_JOB_STATES:
                    return job
                if stuck := never_admissible(job):  # waiting would never end
                    progress.stop()
                    _err(f"error: job {job_id} can never run as configured:")
                    for line in stuck:
                        _err(f"  {line}")
                    raise typer.Exit(EXIT_API_ERROR)
            if deadline is not None and time.monotonic() > deadline:
                _err(f"error: job {job_id} did not finish within {timeout:g}s")
                raise typer.Exit(EXIT_API_ERROR)
            time.sleep(interval)


def poll_job(client: PelotonClient, job_id: str) -> dict[str, Any] | None:
    try:
        return client.get_job(job_id)
    except ApiError as exc:
        if exc.status == 404:  # not projected yet
            return None
        raise


def advance_bar(progress: Progress, bar: Any, job: dict[str, Any]) -> None:
    c = job["task_counts"]
    running = sum(c.get(s, 0) for s in ("LAUNCHING", "LAUNCHED", "STARTING", "RUNNING"))
    pending = sum(c.get(s, 0) for s in ("INITIALIZED", "PENDING", "READY", "PLACING",
                                        "PLACED"))
    failed = sum(c.get(s, 0) for s in ("FAILED", "LOST", "KILLED"))
    detail = f"succeeded, {running} running, {pending} pending"
    if failed:
        detail += f", {failed} failed/killed"
    progress.update(bar, description=job["state"], total=job["instance_count"] or None,
                    completed=c.get("SUCCEEDED", 0), detail=detail)


def _show_job(job: dict[str, Any]) -> None:
    _out().print(*_job_renderables(job, Output.table))


def _job_renderables(job: dict[str, Any], output: Output) -> list[Any]:
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    kill = job.get("kill_request")
    for key, value in (
        ("job id", job["job_id"]), ("name", job["name"]), ("owner", job["owner"]),
        ("state", job["state"]), ("respool", job["respool"]),
        ("instances", str(job["instance_count"])), ("priority", str(job["priority"])),
        ("tasks", _counts(job["task_counts"])), ("submitted", _ts(job["submitted_at"])),
        ("created", _ts(job["created_at"])), ("updated", _ts(job["updated_at"])),
    ):
        table.add_row(key, value)
    for reason in job["rejection_reasons"]:
        table.add_row("rejected", reason)
    if kill:
        which = ",".join(map(str, kill["instances"])) or "all"
        table.add_row("kill requested", f"{_ts(kill['at'])} (instances: {which})")
    for key, value in pending_rows(job):
        table.add_row(key, value)
    if output.more:
        table.add_row("type", job.get("type") or "-")
        table.add_row("preemptible", str(job.get("preemptible", "-")).lower())
        table.add_row("labels", _labels(job.get("labels")))
        table.add_row("description", job.get("description") or "-")
    return [table]


def _labels(labels: dict[str, str] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or "-"


def job_get(job_id: str, output: OutputOpt = Output.table, watch: WatchOpt = False,
            interval: IntervalOpt = 2.0, api: ApiOpt = None,
            at: Annotated[str | None, typer.Option(
                "--at", help="as of a past instant: ms since epoch, ISO 8601 or relative "
                             "(-1h)", show_default=False)] = None) -> None:
    """Show a job: state, task counts, rejection reasons (--at: as it was then)."""
    show(lambda client: client.get_job(job_id, at=at), _job_renderables, output, watch,
         interval, api)


def job_list(
    state: Annotated[str | None, typer.Option(help="only jobs in this state")] = None,
    limit: Annotated[int, typer.Option(min=1)] = 100,
    selector: Annotated[str | None, typer.Option(
        "--selector", "-l", help="label selector, e.g. 'team=a,tier in (1,2),!canary'",
        show_default=False)] = None,
    output: OutputOpt = Output.table, watch: WatchOpt = False, interval: IntervalOpt = 2.0,
    api: ApiOpt = None,
) -> None:
    """List jobs, newest first."""
    from peloton.model.selector import SelectorError, parse

    try:
        reqs = parse(selector) if selector is not None else None
    except SelectorError as exc:
        _err("error: invalid label selector")
        for p in exc.problems:
            _err(f"  selector: {p}")
        raise typer.Exit(EXIT_INVALID) from None

    def fetch(client: PelotonClient) -> dict[str, Any]:
        if reqs:  # the API filters (so --limit counts matching jobs); an older API that
            try:  # does not know label_selector answers 400: filter here instead
                return select_jobs(client.list_jobs(state, limit, selector), reqs)
            except ApiError as exc:
                if exc.status != 400:
                    raise
        return select_jobs(client.list_jobs(state, limit), reqs)

    show(fetch, _job_table, output, watch, interval, api)


def select_jobs(data: dict[str, Any], reqs: list[Any] | None) -> dict[str, Any]:
    """The job list answer with only the jobs whose labels match `reqs` (the API has
    applied it too, unless it is one without `label_selector`)."""
    from peloton.model.selector import matches

    if reqs is None:
        return data
    return {**data, "jobs": [j for j in data["jobs"] if matches(reqs, j.get("labels") or {})]}


def _job_table(data: dict[str, Any], output: Output) -> list[Any]:
    more = output.more
    table = Table(Column("JOB ID", overflow="fold"), "NAME", "OWNER", "STATE", "RESPOOL",
                  "INSTANCES", "TASKS", "SUBMITTED",
                  *(("TYPE", "PRIORITY", "PREEMPTIBLE", "LABELS", "UPDATED") if more else ()))
    for j in data["jobs"]:
        extra = (j.get("type") or "-", str(j.get("priority", "-")),
                 str(j.get("preemptible", "-")).lower(), _labels(j.get("labels")),
                 _ts(j.get("updated_at"))) if more else ()
        table.add_row(j["job_id"], j["name"], j["owner"], j["state"], j["respool"],
                      str(j["instance_count"]), _counts(j["task_counts"]),
                      _ts(j["submitted_at"]), *extra)
    return [table]


def _instances(value: str | None) -> list[int]:
    if not value:
        return []
    try:
        return sorted({int(v) for v in value.split(",") if v.strip()})
    except ValueError as exc:
        raise typer.BadParameter("a comma-separated list of instance numbers, e.g. 0,1,5",
                                 param_hint="--instances") from exc


def job_kill(
    job_id: str,
    instances: Annotated[str | None, typer.Option(help="e.g. 0,1 (default: all)")] = None,
    reason: Annotated[str, typer.Option(help="recorded with the kill")] = "",
    output: OutputOpt = Output.table, api: ApiOpt = None,
) -> None:
    """Kill a job, or some of its instances."""
    which = _instances(instances)
    with _client(api) as client:
        data = client.kill_job(job_id, which, reason)
    if output.machine:
        emit(data, output)
    else:
        target = ",".join(map(str, data["instances"])) or "all instances"
        _out().print(f"kill of job [bold]{job_id}[/bold] ({target}) requested")


# ---- task -----------------------------------------------------------------------------
def task_list(
    job_id: str,
    history: Annotated[bool, typer.Option("--history", help="show state transitions")] = False,
    output: OutputOpt = Output.table, watch: WatchOpt = False, interval: IntervalOpt = 2.0,
    api: ApiOpt = None,
) -> None:
    """List a job's tasks with state, host, exit code and reason."""
    show(lambda client: client.tasks(job_id),
         lambda data, out: _task_table(data, out, history), output, watch, interval, api)


def _task_table(data: dict[str, Any], output: Output, history: bool) -> list[Any]:
    more = output.more
    table = Table("INSTANCE", "RUN", "STATE", "HOST", "EXIT", "FAILURES", "REASON",
                  *(("CONFIG", "HEALTH", "UPDATED", "SANDBOX") if more else ()))
    for t in data["tasks"]:
        extra = (str(t.get("config_version", "-")), t.get("health") or "-",
                 _ts(t.get("updated_at")), t.get("sandbox") or "-") if more else ()
        table.add_row(str(t["instance"]), str(t["run"]), t["state"], t["host"] or "-",
                      "-" if t["exit_code"] is None else str(t["exit_code"]),
                      str(t["failures"]), reason_cell(t), *extra)
        if history:
            for h in t["history"]:
                table.add_row("", str(h["run"]), f"  {h['previous_state']} -> {h['state']}",
                              h["host"] or "", "", "", f"{_ts(h['at'])} {h['reason']}",
                              *(("",) * len(extra)), style="dim")
    return [table]


# ---- host, respool ----------------------------------------------------------------------
def host_list(output: OutputOpt = Output.table, watch: WatchOpt = False,
              interval: IntervalOpt = 2.0, api: ApiOpt = None) -> None:
    """List hosts with maintenance state (UP, DRAINING, DRAINED, DOWN), the agent's
    state (REGISTERED, UP, LOST), tasks on the host, free/total resources and last
    heartbeat."""
    show(lambda client: client.hosts(), _host_table, output, watch, interval, api)


def _host_table(data: dict[str, Any], output: Output) -> list[Any]:
    more = output.more
    table = Table("HOST", "STATE", "AGENT", "TASKS", "FREE", "CAPACITY", "LABELS",
                  "HEARTBEAT", "LOG URL",
                  *(("INCARNATION", "PORTS", "REGISTERED", "LOST") if more else ()))
    for h in data["hosts"]:
        ports = h.get("port_range")
        extra = (h.get("incarnation") or "-", "-" if not ports else "-".join(map(str, ports)),
                 _ts(h.get("registered_at")),
                 f"{_ts(h['lost_at'])} {h.get('lost_reason') or ''}".strip()
                 if h.get("lost_at") else "-") if more else ()
        labels = ",".join(f"{k}={v}" for k, v in sorted(h["labels"].items())) or "-"
        state = h.get("maintenance_state") or "UP"
        if h.get("maintenance_deadline") and state != "UP":
            state += f" (until {_ts(h['maintenance_deadline'])})"
        table.add_row(h["host"], state, h["state"], str(h.get("task_count", 0)),
                      _res(h["free"], "cpu", "memory", "gpu"),
                      _res(h["capacity"], "cpu", "memory", "gpu"), labels,
                      _ts(h["last_heartbeat"]), h["log_url"] or "-", *extra)
    return [table]


def host_get(host: str, output: OutputOpt = Output.table, watch: WatchOpt = False,
             interval: IntervalOpt = 2.0, api: ApiOpt = None) -> None:
    """One host: its maintenance state, the runs it still has, and its events, newest
    first (state changes, refused requests, and what each drain step moved and why the
    rest still waits)."""
    show(lambda client: client.host(host), _host_detail, output, watch, interval, api)


def _host_detail(h: dict[str, Any], output: Output) -> list[Any]:
    state = h.get("maintenance_state") or "UP"
    head = Text(f"{h['host']}: {state} (agent {h['state']}), {h.get('task_count', 0)} "
                f"task(s): " + (", ".join(str(r) for r in h.get("runs") or []) or "none"))
    out: list[Any] = [head]
    if output.more:
        out.append(Text(f"capacity {_kinds(h.get('capacity'))}; free {_kinds(h.get('free'))}"
                        f"; labels {_labels(h.get('labels'))}; log url "
                        f"{h.get('log_url') or '-'}"))
    table = Table("AT", "KIND", "STATE", "REASON")
    for e in h.get("events") or []:
        table.add_row(_ts(e["at"]), e["kind"], e.get("state") or "-", e.get("reason") or "")
    return [*out, table]


def _kinds(values: dict[str, float] | None) -> str:
    return _res(values, "cpu", "memory", "disk", "gpu")


def respool_list(output: OutputOpt = Output.table, watch: WatchOpt = False,
                 interval: IntervalOpt = 2.0, api: ApiOpt = None) -> None:
    """Show the resource pool tree: reservation, limit, share, entitlement, allocation and
    demand (cpu and memory; `respool get` shows every kind; `-o wide` every kind too)."""
    show(lambda client: client.pools(), _pool_tree, output, watch, interval, api)


def _pool_tree(data: dict[str, Any], output: Output) -> list[Any]:
    kinds = ("cpu", "memory", "disk", "gpu") if output.more else ("cpu", "memory")
    pools = {p["pool"]: p for p in data["pools"]}
    if not pools:
        return [Text("no resource pools yet (no entitlement cycle seen)")]
    children: dict[str | None, list[str]] = {}
    for name, p in sorted(pools.items()):
        parent = p["parent"] if p["parent"] in pools else None
        children.setdefault(parent, []).append(name)
    cycle = max(p["cycle"] for p in pools.values())
    tree = Tree(f"[bold]resource pools[/bold] (cycle {cycle})")

    def grow(node: Tree, name: str) -> None:
        p = pools[name]
        share = f" · share {_res(p['share'], *kinds)}" if p.get("share") else ""
        label = (f"[bold]{name}[/bold]  reservation {_res(p['reservation'], *kinds)}"
                 f" · limit {_res(p['limit'], *kinds)}{share}"
                 f" · entitlement {_res(p['entitlement'], *kinds)}"
                 f" · allocation {_res(p['allocation'], *kinds)}"
                 f" · demand {_res(p['demand'], *kinds)}")
        branch = node.add(label)
        for child in children.get(name, []):
            grow(branch, child)

    for root in children.get(None, []):
        grow(tree, root)
    return [tree]


def respool_get(
    path: Annotated[str, typer.Argument(help="pool path, e.g. /team-a/batch")],
    output: OutputOpt = Output.table, watch: WatchOpt = False, interval: IntervalOpt = 2.0,
    api: ApiOpt = None,
) -> None:
    """Show one pool: config per kind with its entitlement, allocation and demand."""
    show(lambda client: client.pool(path), _pool_detail, output, watch, interval, api)


def _pool_detail(pool: dict[str, Any], output: Output) -> list[Any]:
    config = pool.get("config") or {}
    head = Table(show_header=False, box=None)
    head.add_column(style="bold")
    head.add_column()
    for key, value in (
        ("pool", pool["pool"]), ("parent", pool["parent"] or "-"),
        ("description", config.get("description") or "-"),
        ("cycle", f"{pool['cycle']} at {_ts(pool['at'])}"),
        ("slack limit", f"{config['slack_limit_percent']:g}%" if config else "-"),
        ("controller limit", "-" if config.get("controller_limit_percent") is None
         else f"{config['controller_limit_percent']:g}%"),
    ):
        head.add_row(key, value)
    types = {r["kind"]: r["type"] for r in config.get("resources", [])}
    table = Table("KIND", "RESERVATION", "LIMIT", "SHARE", "TYPE", "ENTITLEMENT", "NON-SLACK",
                  "SLACK", "ALLOCATION", "DEMAND")
    shares = pool.get("share") or {}

    def num(field: str, kind: str) -> str:
        return f"{pool[field].get(kind, 0.0):g}"

    for kind in ("cpu", "memory", "disk", "gpu"):
        share = f"{shares[kind]:g}" if kind in shares else "-"
        table.add_row(kind, num("reservation", kind), num("limit", kind), share,
                      types.get(kind, "-"),
                      *(num(f, kind) for f in ("entitlement", "nonslack_entitlement",
                                               "slack_entitlement", "allocation", "demand")))
    return [head, table]


def _read_pool_file(file: Path, path: str, allow_move: bool) -> str:
    """The file's text after a local check; invalid input ends the command with exit 2."""
    from peloton.resmgr.domain.poolbook import normalize_path, parse_pool_document, split_path

    text = read_input_file(file)
    try:
        wanted = normalize_path(path)
        doc = yaml.safe_load(text)
    except ValueError as exc:  # a path not starting with "/"
        _err(f"error: {exc}")
        raise typer.Exit(EXIT_INVALID) from exc
    except yaml.YAMLError as exc:
        _err(f"error: {file} is not valid YAML/JSON: {exc}")
        raise typer.Exit(EXIT_INVALID) from exc
    _, parent, problems = parse_pool_document(doc, wanted)
    if parent is not None and not allow_move and parent != split_path(wanted)[0]:
        problems.append(f"parent: {parent} is not the path's parent {split_path(wanted)[0]}")
    if problems:
        _err(f"error: {file} is not a valid resource pool config:")
        for problem in problems:
            _err(f"  {problem}")
        raise typer.Exit(EXIT_INVALID)
    return text


def _outcome(client: PelotonClient, accepted: dict[str, Any], wait: bool, timeout: float,
             output: Output, done: str) -> None:
    """Follow a pool request to the resource manager's answer (unless --no-wait)."""
    if not wait:
        if output.machine:
            emit(accepted, output)
        else:
            _out().print(f"{accepted['operation'].lower()} of pool [bold]{accepted['path']}"
                         f"[/bold] requested ({accepted['request_id']})")
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            answer = client.pool_request(accepted["request_id"])
        except ApiError as exc:
            if exc.status != 404:
                raise
            answer = None
        if answer is not None and answer["state"] != "REQUESTED":
            break
        if time.monotonic() > deadline:
            _err(f"error: no answer to request {accepted['request_id']} within {timeout:g}s "
                 "(is the resource manager running?)")
            raise typer.Exit(EXIT_API_ERROR)
        time.sleep(0.2)
    if output.machine:
        emit(answer, output)
    if answer["state"] == "REJECTED":
        _err(f"error: {answer['operation'].lower()} of pool {answer['path']} rejected:")
        for reason in answer["reasons"]:
            _err(f"  {reason}")
        raise typer.Exit(EXIT_API_ERROR)
    if not output.machine:
        _out().print(f"pool [bold]{answer['path']}[/bold] {done}")


WaitOpt = Annotated[bool, typer.Option(
    "--wait/--no-wait", help="wait for the resource manager's answer")]
TimeoutOpt = Annotated[float, typer.Option(help="seconds to wait for the answer")]


def respool_create(
    path: Annotated[str, typer.Argument(help="the new pool's path, e.g. /team-a/batch")],
    file: Annotated[Path, typer.Argument(help="a ResourcePoolConfig (YAML or JSON)")],
    wait: WaitOpt = True, timeout: TimeoutOpt = 30.0,
    output: OutputOpt = Output.table, api: ApiOpt = None,
) -> None:
    """Create a resource pool (its parent must exist). The file is checked locally first."""
    text = _read_pool_file(file, path, allow_move=False)
    with _client(api) as client:
        _outcome(client, client.create_pool(path, text), wait, timeout, output, "created")


def respool_update(
    path: Annotated[str, typer.Argument(help="the pool's path")],
    file: Annotated[Path, typer.Argument(
        help="its new ResourcePoolConfig; a `parent` field different from the current "
             "parent moves the pool")],
    wait: WaitOpt = True, timeout: TimeoutOpt = 30.0,
    output: OutputOpt = Output.table, api: ApiOpt = None,
) -> None:
    """Replace a pool's config (and move it when the file names another parent)."""
    text = _read_pool_file(file, path, allow_move=True)
    with _client(api) as client:
        _outcome(client, client.update_pool(path, text), wait, timeout, output, "updated")


def respool_delete(
    path: Annotated[str, typer.Argument(help="the pool's path")],
    wait: WaitOpt = True, timeout: TimeoutOpt = 30.0,
    output: OutputOpt = Output.table, api: ApiOpt = None,
) -> None:
    """Delete a leaf pool that holds no tasks."""
    with _client(api) as client:
        _outcome(client, client.delete_pool(path), wait, timeout, output, "deleted")


# ---- registration ---------------------------------------------------------------------
def _typer(help_text: str, commands: dict[str, Callable[..., None]]) -> typer.Typer:
    sub = typer.Typer(help=help_text, no_args_is_help=True)
    for name, fn in commands.items():
        sub.command(name)(fn)
    return sub


def register(app: typer.Typer) -> typer.Typer:
    """Add `job`, `update`, `task`, `host` and `respool` to `app`; return the respool
    typer."""
    from peloton.cli import (  # they use this module's options
        history_cmd,
        host_cmd,
        logs_cmd,
        update_cmd,
    )
    from peloton.cli.validate_cmd import validate

    job_app = _typer("Submit, inspect, update, restart, stop and kill jobs.", {
        "create": job_create, "get": job_get, "list": job_list, "kill": job_kill,
        "validate": validate})
    update_app = update_cmd.register(job_app)  # job update|restart|stop
    app.add_typer(job_app, name="job")
    app.add_typer(update_app, name="update")
    app.add_typer(_typer("Inspect tasks and their logs.",
                         {"list": task_list, "logs": logs_cmd.task_logs}), name="task")

    host_app = _typer("Inspect hosts; start, complete or cancel their maintenance.",
                      {"list": host_list, "get": host_get})
    host_cmd.register(host_app)
    app.add_typer(host_app, name="host")
    respool = _typer("Resource pools.", {
        "create": respool_create, "get": respool_get, "list": respool_list,
        "update": respool_update, "delete": respool_delete,
        "history": history_cmd.respool_history})
    app.add_typer(respool, name="respool")
    return respool
