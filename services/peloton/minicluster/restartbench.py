"""Restart benchmark: kill -9 each service over a long history and time its comeback.

What "N finished tasks in the log" means here: the log holds `jobs` batch jobs of
`tasks_per_job` tasks each (N = jobs x tasks_per_job), every one of them finished: for each
job there are the records the services write for a job that runs to SUCCEEDED - the
JobSubmitted (job-submitted), JobCreated, TaskStateChanged batches up to SUCCEEDED and the
JobStateChanged records (job-events), the TasksAdmitted (tasks-admitted), PlacementMade
(placement-made), TaskLaunchRequested (task-launch-requested) and the agents'
TaskStatusReported (task-status-reported). They are not invented: a template job of
`tasks_per_job` simulated tasks is run through the real services first, every record
that names it (on any topic) is captured, and the history is `jobs` copies of those
records with the job id replaced, the times (`at`, `submitted_at`, `not_before_ms`)
moved into the past (copies spread over `span_s`, the newest ending `age_s` ago) and the
placement round numbers moved up. Host facts (registrations, heartbeats, offers) are not
multiplied: their volume grows with uptime, not with tasks.

Procedure: minicluster with simulated hosts (one fleet process) -> template job ->
services stopped -> history written -> services started again and a probe job run (the
cold start: full replay, and the live consumers catch up on the history they had not
committed) -> then, for each service in turn: kill -9, start it again, and measure
- consuming_s: from the kill to its readiness marker (bus/readiness.py: partitions
  assigned, which the shell reaches only after its start-up replay or snapshot load);
- job_s: a new job of `probe_tasks` tasks submitted right at readiness, until its
  JobStateChanged SUCCEEDED (read from job-events);
- rebuild_s / folded / rebuild_from: the shell's "state rebuilt" log line at that start
  (seconds to load the snapshot and fold the tail, records folded, from what);
- cold_rebuild_s / cold_folded / cold_rebuild_from: the same line at the cold start, where
  the newest snapshot predates the whole history (written before it), so the tail is the
  whole history: what a full replay of it costs, side by side with snapshot + tail;
- startup: the start-up lines (fallback warnings, "state rebuilt") of the restart.
Before the first kill it waits (up to `snapshot_wait_s`) until each service has written a
snapshot over the history; those that did not are listed (`no_snapshot_before_kill`).
The benchmark measures whatever the shell does (full replay, or snapshot plus tail).
"""

from __future__ import annotations

import asyncio
import re
import signal
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from peloton.bus.catalog import TOPICS
from peloton.bus.codec import DecodeError, default_codec
from peloton.bus.devbroker import producer_settings
from peloton.minicluster.cluster import Cluster, Layout, down, up
from peloton.minicluster.fleet import start_fleets
from peloton.minicluster.load import JobFollower, read_to_end, submit_jobs, wait_offers
from peloton.model.joinedchanges import JOINED_EVENT

__all__ = ["restart_bench", "Captured", "capture", "copy_record", "SERVICES"]

Progress = Callable[[str, float], None]
SERVICES = ("jobmgr", "resmgr-1", "placement", "hostmgr")
_TIME_KEYS = frozenset({"at", "submitted_at", "not_before_ms"})
_NOT_COPIED = frozenset({"HostStatusReported", "HostRegistered", "OfferReceived", "HostLost",
                         "DeadLetterRecorded"})
_STARTUP_WORDS = ("state rebuilt", "replaying the whole log")
_LOG_PREFIX = re.compile(r"^(\[[^\]]*\] )+")
_REBUILT = re.compile(r"state rebuilt in ([0-9.]+)s \((.*?), (\d+) records folded\)")
_SNAPSHOT_WRITTEN = re.compile(r"snapshot \S+ written")


@dataclass(frozen=True)
class Captured:
    """One record of the template job: its topic, key, timestamp, type and body."""

    topic: str
    key: str
    timestamp: int
    etype: str
    body: dict[str, Any]


async def capture(bootstrap: str, job_id: str) -> list[Captured]:
    """Every record on any catalog topic that names `job_id`, in timestamp order."""
    codec = default_codec()
    needle = job_id.encode()
    out: list[tuple[int, str, int, Captured]] = []
    async with aclosing(read_to_end(bootstrap, [t.name for t in TOPICS])) as records:
        async for rec in records:
            if rec.value is None or needle not in rec.value:
                continue
            try:
                facts = codec.decode_each(rec.value)
            except DecodeError:
                continue
            for etype, body in facts:  # a joined TaskStateChanged: the template job's part
                if etype in _NOT_COPIED or (etype == JOINED_EVENT and body["job_id"] != job_id):
                    continue
                key = job_id if etype == JOINED_EVENT else rec.key.decode() if rec.key else ""
                out.append((rec.timestamp, rec.topic, rec.offset,
                            Captured(rec.topic, key, rec.timestamp, etype, body)))
    return [c for *_o, c in sorted(out, key=lambda x: x[:3])]


def _rewrite(value: Any, field: str, old: str, new: str, shift_ms: int, round_add: int) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if field in _TIME_KEYS:
            return value + shift_ms
        if field == "round" and value >= 0:  # -1: "no round" (TaskStateChanged v2)
            return value + round_add
        return value
    if isinstance(value, dict):
        return {k: _rewrite(v, k if isinstance(k, str) else field, old, new, shift_ms,
                            round_add) for k, v in value.items()}
    if isinstance(value, list):
        return [_rewrite(v, field, old, new, shift_ms, round_add) for v in value]
    return value


def copy_record(rec: Captured, old: str, new: str, shift_ms: int, round_add: int
                ) -> tuple[str, dict[str, Any]]:
    """(key, body) of `rec` as if job `new` had run `shift_ms` later, its placement
    rounds `round_add` later."""
    body = _rewrite(rec.body, "", old, new, shift_ms, round_add)
    return rec.key.replace(old, new), body


async def write_history(bootstrap: str, template: list[Captured], old: str, jobs: int,
                        span_s: float, age_s: float, say: Progress) -> int:
    """Write `jobs` copies of the template (see module docstring); returns records written."""
    codec = default_codec()
    last = max(c.timestamp for c in template)
    now = int(time.time() * 1000)
    step = int(span_s * 1000 / max(1, jobs))
    rounds = max([c.body.get("round", 0) for c in template if isinstance(c.body.get("round"), int)]
                 + [0]) + 1
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20,
                                max_batch_size=1 << 20, max_request_size=16 << 20,
                                **producer_settings())  # type: ignore[arg-type]
    await producer.start()
    tag = uuid.uuid4().hex[:6]
    written = 0
    try:
        for k in range(jobs):
            shift = (now - int(age_s * 1000) - last) - (jobs - 1 - k) * step
            new = f"hist-{tag}-{k}"
            for rec in template:
                key, body = copy_record(rec, old, new, shift, (k + 1) * rounds)
                await producer.send(rec.topic, codec.encode(rec.etype, body),
                                    key=key.encode(), timestamp_ms=rec.timestamp + shift)
                written += 1
            if k % 200 == 0:
                say(f"writing history: job {k:,}/{jobs:,}", k / jobs)
        await producer.flush()
    finally:
        await producer.stop()
    return written


async def _probe(bootstrap: str, tasks: int, timeout: float, prefix: str = "probe"
                 ) -> tuple[float, str, str]:
    """Submit one job now; (seconds until it is terminal or timeout, job id, last state)."""
    job_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
    follower = JobFollower(bootstrap)
    follower.want({job_id: tasks})
    await follower.start(from_end=True)
    try:
        started = time.monotonic()
        await submit_jobs(bootstrap, [(job_id, tasks)], duration_s=0.05)
        while follower.pending_jobs() and time.monotonic() - started < timeout:
            await follower.poll(100)
        return (time.monotonic() - started, job_id,
                follower.job_state.get(job_id, "no JobStateChanged"))
    finally:
        await follower.stop()


def _startup_note(log: Path, offset: int) -> str:
    """The start-up lines (snapshot fallback warnings, "state rebuilt") logged after
    `offset`, prefixes cut."""
    lines = _log_text(log, offset).splitlines()
    notes = [_LOG_PREFIX.sub("", ln) for ln in lines
             if any(w in ln for w in _STARTUP_WORDS)]
    return " | ".join(n[n.find(": ", n.find("peloton.")) + 2:] if "peloton." in n else n
                      for n in notes)[:240]


def _log_text(log: Path, offset: int) -> str:
    try:
        with log.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _log_size(cluster: Cluster, name: str) -> int:
    log = Path(cluster.procs[name].log)
    return log.stat().st_size if log.exists() else 0


def rebuild_figures(text: str) -> dict[str, Any]:
    """The shell's last "state rebuilt in S s (FROM, N records folded)" line in `text`:
    {"rebuild_s", "rebuild_from", "folded"}; empty when there is none."""
    found = _REBUILT.findall(text)
    if not found:
        return {}
    secs, source, folded = found[-1]
    return {"rebuild_s": float(secs), "rebuild_from": "snapshot + tail"
            if "snapshot" in source else source, "folded": int(folded)}


def _wait_snapshot(cluster: Cluster, offsets: dict[str, int], timeout: float) -> list[str]:
    """Wait until each service in `offsets` logged a snapshot written after its offset;
    returns those that did not within `timeout`."""
    deadline = time.monotonic() + timeout
    left = set(offsets)
    while left and time.monotonic() < deadline:
        left = {n for n in left if not _SNAPSHOT_WRITTEN.search(
            _log_text(Path(cluster.procs[n].log), offsets[n]))}
        time.sleep(0.5)
    return sorted(left)


def _restart(cluster: Cluster, name: str, probe_tasks: int, timeout: float) -> dict[str, Any]:
    proc = cluster.procs[name]
    log = Path(proc.log)
    offset = _log_size(cluster, name)
    cluster.stop(name, signal.SIGKILL, timeout=5.0)
    killed = time.monotonic()
    cluster.spawn(name, proc.argv)
    cluster.wait_consuming([name], timeout)
    consuming = time.monotonic() - killed
    job_s, _job, state = asyncio.run(_probe(cluster.layout.bootstrap, probe_tasks, timeout))
    return {"service": name, "consuming_s": round(consuming, 2), "job_s": round(job_s, 2),
            "restart_to_job_done_s": round(time.monotonic() - killed, 2),
            "probe_state": state, **rebuild_figures(_log_text(log, offset)),
            "startup": _startup_note(log, offset)}


def restart_bench(tasks: int = 1_000_000, tasks_per_job: int = 100, hosts: int = 4,
                  services: tuple[str, ...] = SERVICES, probe_tasks: int = 4,
                  span_s: float = 3600.0, age_s: float = 600.0, timeout_s: float = 900.0,
                  snapshot_wait_s: float = 60.0, run_dir: Path | None = None,
                  progress: Progress | None = None) -> dict[str, Any]:
    """Run the benchmark (module docstring). Returns the setup figures and one row per
    service under "restarts"."""
    say: Progress = progress or (lambda _m, _f: None)
    jobs = max(1, tasks // tasks_per_job)
    with tempfile.TemporaryDirectory(prefix="peloton-restart-") as tmp:
        layout = Layout.local(run_dir or Path(tmp), agents=0, free=True, detach=False,
                              simulated=True, resmgr_instances=1, with_api=False)
        try:
            say("starting minicluster", 0.0)
            cluster = up(layout)
            start_fleets(cluster, hosts, 1, 64.0)
            boot = layout.bootstrap
            asyncio.run(wait_offers(boot, {f"host-{i + 1}" for i in range(hosts)}, 90.0))
            say(f"template job of {tasks_per_job} tasks", 0.0)
            template_s, tmpl, state = asyncio.run(_probe(boot, tasks_per_job, timeout_s,
                                                         "template"))
            if state != "SUCCEEDED":
                raise RuntimeError(f"template job ended {state}, not SUCCEEDED")
            time.sleep(1.0)  # trailing facts (the last statuses' echoes)
            template = asyncio.run(capture(boot, tmpl))
            names = [n for n in cluster.procs if n not in ("broker", "etcd")]
            for name in names:
                cluster.stop(name)
            started = time.monotonic()
            written = asyncio.run(write_history(boot, template, tmpl, jobs, span_s, age_s,
                                                say))
            write_s = time.monotonic() - started
            say(f"cold start over {jobs * tasks_per_job:,} finished tasks", 0.0)
            started = time.monotonic()
            offsets = {name: _log_size(cluster, name) for name in names}
            for name in names:
                cluster.spawn(name, cluster.procs[name].argv)
            cluster.wait_consuming(names, timeout_s)
            cold_consuming = time.monotonic() - started
            cold_job, _probe_id, cold_state = asyncio.run(_probe(boot, probe_tasks, timeout_s))
            cold = {n: rebuild_figures(_log_text(Path(cluster.procs[n].log), offsets[n]))
                    for n in services}
            say("waiting for each service's first snapshot over the history", 0.0)
            no_snapshot = _wait_snapshot(cluster, {n: offsets[n] for n in services},
                                         snapshot_wait_s)
            rows = []
            for i, name in enumerate(services):
                say(f"kill -9 {name}", i / len(services))
                row = _restart(cluster, name, probe_tasks, timeout_s)
                row.update({f"cold_{k}": v for k, v in cold.get(name, {}).items()})
                rows.append(row)
        finally:
            down(layout.run_dir)
    return {"finished_tasks": jobs * tasks_per_job, "jobs": jobs,
            "records_per_job": len(template),
            "record_types": ", ".join(f"{t}={n}" for t, n in sorted(Counter(
                c.etype for c in template).items())),
            "records_written": written,
            "write_s": round(write_s, 1), "template_job_s": round(template_s, 2),
            "cold_start_consuming_s": round(cold_consuming, 2),
            "cold_start_job_s": round(cold_job, 2), "cold_start_probe_state": cold_state,
            "no_snapshot_before_kill": ", ".join(no_snapshot) or "-",
            "restarts": rows}

