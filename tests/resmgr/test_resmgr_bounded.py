"""Bounded state of the whole resource manager core over many waves of small jobs.

Each wave submits small jobs, the core admits them (its decisions come back through the
log), the job manager runs them (some are requeued by a placement timeout first, some
fail and retry) and they finish. After every wave nothing is live, no decision is left
provisional, and the ledger's size and the snapshot stay flat: terminal work leaves the
core after the retention window.
"""

from __future__ import annotations

import json
from typing import Any

from event_bodies import (
    job_created,
    offer,
    offer_received,
    task_state_changed,
)

from peloton.model.event import Event
from peloton.resmgr.domain.cycle import ResourceManager

WAVE_MS = 2_000
RETENTION_MS = 5_000


class World:
    """The job manager's side: runs admitted tasks, finishes them, ends jobs."""

    def __init__(self) -> None:
        self.rm = ResourceManager(entitlement_cycle_ms=1_000, min_recompute_ms=0,
                                  retention_ms=RETENTION_MS)
        self.rm.fold("OfferReceived", offer_received(offer("h0", cpu=64, mem=100_000)))
        self.open: dict[str, set[int]] = {}
        self.requeued = self.retried = 0

    def change(self, job_id: str, i: int, state: str, previous: str, at: int,
               run: int = 1, **extra: Any) -> None:
        body = task_state_changed(job_id, (i, state), run=run, previous=previous, at=at)
        body["changes"][0].update(extra)
        self.rm.fold("TaskStateChanged", body)

    def submit(self, job_id: str, n: int, at: int) -> None:
        self.rm.fold("JobCreated", job_created(job_id, n, at=at, cpu=0.5))
        self.rm.fold("TaskStateChanged", task_state_changed(
            job_id, *((i, "PENDING") for i in range(n)), previous="INITIALIZED", at=at))
        self.open[job_id] = set(range(n))

    def tick(self, now: int) -> None:
        out: list[Event] = self.rm.tick(now)
        for ev in out:  # everything is published and comes back through the log
            if ev.type in ("TasksAdmitted", "TasksPreempted", "AdmissionDeferred"):
                self.rm.fold(ev.type, ev.body)
        for ev in out:
            if ev.type != "TasksAdmitted":
                continue
            for t in ev.body["tasks"]:
                job_id, i, run = t["job_id"], t["instance"], t["run"]
                entry = self.rm.ledger.entry(job_id, i)
                assert entry is not None
                if i == 1 and run == 1 and entry.requeues == 0:
                    # stayed READY past the placement timeout: back to PENDING
                    self.change(job_id, i, "READY", "PENDING", now + 1)
                    self.change(job_id, i, "PENDING", "READY", now + 2,
                                not_before_ms=now + 300)
                    self.requeued += 1
                elif i == 2 and run == 1:  # fails once, retried as run 2
                    self.change(job_id, i, "READY", "PENDING", now + 1)
                    self.change(job_id, i, "RUNNING", "READY", now + 2)
                    body = task_state_changed(job_id, (i, "FAILED"), previous="RUNNING",
                                              at=now + 3)
                    body["changes"] += task_state_changed(
                        job_id, (i, "PENDING"), run=2, previous="FAILED",
                        at=now + 3)["changes"]
                    self.rm.fold("TaskStateChanged", body)
                    self.retried += 1
                else:
                    self.change(job_id, i, "READY", "PENDING", now + 1, run=run)
                    self.change(job_id, i, "RUNNING", "READY", now + 2, run=run)
                    self.change(job_id, i, "SUCCEEDED", "RUNNING", now + 3, run=run)
                    self.open[job_id].discard(i)
                    if not self.open[job_id]:
                        del self.open[job_id]
                        self.rm.fold("JobStateChanged", {
                            "job_id": job_id, "at": now + 3, "state": "SUCCEEDED",
                            "previous_state": "RUNNING", "task_counts": {}})


def test_many_waves_of_small_jobs_leave_the_core_flat() -> None:
    world = World()
    rm = world.rm
    sizes: list[dict[str, int]] = []
    snapshots: list[int] = []
    for wave in range(30):
        start = wave * WAVE_MS
        for j in range(25):
            world.submit(f"w{wave}-{j}", 1 + j % 4 + (j % 3), start)
        for now in range(start, start + WAVE_MS, 100):
            world.tick(now)
        assert world.open == {}, f"wave {wave}: jobs left unfinished"
        assert rm.ledger.pending == {} and rm.ledger.holding == {}
        assert len(rm.provisional) == 0
        sizes.append(rm.ledger.size())
        snapshots.append(len(json.dumps(rm.snapshot())))
    assert world.requeued > 100 and world.retried > 100
    assert all(s["jobs"] == 0 and s["tasks"] == 0 and s["ended"] == 0 and s["orphans"] == 0
               for s in sizes)
    # tombstones of the jobs ended within the retention window (plus one sweep), no more
    bound = 25 * (RETENTION_MS // WAVE_MS + 2)
    assert max(s["forgotten"] for s in sizes) <= bound
    settled = snapshots[10:]
    assert max(settled) <= min(settled) * 1.2  # flat, whatever the number of waves
    assert max(settled) < 10_000
