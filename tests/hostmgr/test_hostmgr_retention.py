"""HostBook's memory stays flat over many waves of jobs (bounded state).

Each wave creates a few small jobs, places and launches their tasks, fails one task once
(so a second run is placed and launched), ends every run (agent status and job event, in
either order), ends the job, and leaves a straggler: a late agent status of a job pruned
long ago, and a placement of a job whose JobCreated never comes. After the retention window
the book's records and its snapshot must stop growing, and no host keeps resources.
"""

from __future__ import annotations

import json
from typing import Any

from event_bodies import (
    agent_status,
    host_registered,
    job_created,
    job_state_changed,
    placement,
    placement_made,
    task_state_changed,
)

from peloton.hostmgr.domain import snapshot
from peloton.hostmgr.domain.hosts import HostBook
from peloton.model.resources import Resources

Body = dict[str, Any]
HOSTS = ("h1", "h2", "h3")
JOBS_PER_WAVE, TASKS = 4, 3
WAVE_MS, RETENTION_MS = 1_000, 5_000
TEMPLATE = job_created("template", TASKS)


class Wave:
    def __init__(self) -> None:
        self.book = HostBook(heartbeat_timeout_ms=10**9, retention_ms=RETENTION_MS,
                             hold_ms=500)
        self.round = 0
        for name in HOSTS:
            self.book.fold("HostRegistered", host_registered(name, cpu=64), received_ms=0)

    def fold(self, etype: str, body: Body, now: int) -> None:
        self.book.fold(etype, body, received_ms=now)

    def tick(self, now: int) -> list[tuple[str, str, int, int]]:
        """Tick, fold our own events back; the launches as (host, job, instance, run)."""
        out = []
        for ev in self.book.tick(now):
            self.book.fold(ev.type, ev.body, received_ms=now)
            if ev.type == "TaskLaunchRequested":
                out += [(ev.body["host"], x["job_id"], x["instance"], x["run"])
                        for x in ev.body["launches"]]
        return out

    def place(self, runs: list[tuple[str, int, int]], now: int) -> None:
        self.round += 1
        self.fold("PlacementMade", placement_made(*[
            placement(j, i, HOSTS[(i + r) % len(HOSTS)], run=r, cpu=0.5)
            for j, i, r in runs], round_=self.round, at=now), now)

    def end(self, host: str, job: str, instance: int, run: int, state: str, now: int,
            agent_first: bool) -> None:
        facts = [("TaskStatusReported", agent_status(host, job, instance, state, run=run,
                                                     at=now)),
                 ("TaskStateChanged", task_state_changed(job, (instance, state), run=run,
                                                         host=host, at=now,
                                                         previous="RUNNING"))]
        for etype, body in facts if agent_first else reversed(facts):
            self.fold(etype, body, now)

    def run(self, w: int) -> None:
        now = w * WAVE_MS
        jobs = [f"w{w}-j{k}" for k in range(JOBS_PER_WAVE)]
        for job in jobs:
            self.fold("JobCreated", dict(TEMPLATE, job_id=job, at=now), now)
        self.place([(j, i, 1) for j in jobs for i in range(TASKS)], now)
        launched = self.tick(now + 10)
        assert len(launched) == JOBS_PER_WAVE * TASKS
        for host, job, instance, run in launched:
            failed = instance == 0
            self.end(host, job, instance, run, "FAILED" if failed else "SUCCEEDED",
                     now + 20, agent_first=instance % 2 == 0)
        self.place([(j, 0, 2) for j in jobs], now + 30)
        retried = self.tick(now + 40)
        assert len(retried) == JOBS_PER_WAVE
        for host, job, instance, run in retried:
            self.end(host, job, instance, run, "SUCCEEDED", now + 50, agent_first=False)
        for job in jobs:
            self.fold("JobStateChanged", job_state_changed(
                job, "SUCCEEDED", "RUNNING", {"SUCCEEDED": TASKS}, at=now + 60), now + 60)
        # stragglers: a late report of a job pruned long ago, a job never created
        if w > 10:
            self.fold("TaskStatusReported", agent_status(
                "h1", f"w{w - 10}-j0", 1, "SUCCEEDED", at=now + 70), now + 70)
        self.place([(f"ghost-{w}", 0, 1)], now + 80)
        self.tick(now + 90)

    def sizes(self) -> tuple[int, int, int, int]:
        book = self.book
        entries = sum(len(j.ended) + len(j.decided) + len(j.on_host)
                      for j in book.jobs.values())
        return (len(book.jobs), entries, len(book.pending) + len(book.early),
                len(json.dumps(snapshot.dump(book))))


def test_records_and_snapshot_stay_flat_over_many_waves() -> None:
    wave = Wave()
    sizes = []
    for w in range(1, 61):
        wave.run(w)
        sizes.append(wave.sizes())
    window = RETENTION_MS // WAVE_MS + 2  # waves a finished job may stay (plus prune cadence)
    jobs_bound = (JOBS_PER_WAVE + 2) * window
    assert max(s[0] for s in sizes) <= jobs_bound, max(s[0] for s in sizes)
    settled, late = sizes[15:30], sizes[45:]
    for k in range(4):  # jobs, per-run entries, waiting facts, snapshot bytes
        assert max(s[k] for s in late) <= max(s[k] for s in settled) * 1.05, (k, sizes)
    # finished jobs left: only the last waves' jobs remain, and records made by late
    # facts (no spec: a straggler's report, a ghost's placement) only while recent
    now = 60 * WAVE_MS + 90
    for job_id, job in wave.book.jobs.items():
        if job.spec is not None:
            assert int(job_id.split("-")[0][1:]) >= 60 - window, job_id
        else:
            assert job.last_at >= now - window * WAVE_MS, (job_id, job.last_at)
    for host in wave.book.hosts.values():
        assert host.runs == {} and (host.allocated - Resources()).is_zero()
