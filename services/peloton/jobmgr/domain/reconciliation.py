"""Asking agents about runs with no news: the job manager's task reconciliation (pure).

Peloton reconciles its tasks with Mesos periodically, so a task whose status update was
lost does not stay RUNNING for ever. Here a run's end reaches the job manager only as an
agent's TaskStatusReported, read live; if that report is lost on the way (a core bug whose
record was dead-lettered, a decision the broker refused for good), nothing else brings the
end back. So, at every tick from `scan_every_ms` on:

- every run the book holds on a host (`JobBook.on_host`) in an on-host state other than
  PREEMPTING (which has its own timeout), with no change for `after_ms` of event time,
  is asked about: one `TaskReconcileRequested` per host (at most `CHUNK` runs each),
  which the host's agent answers with a status per run (RUNNING, its end if it ended
  within its retention, or LOST if it does not know the run; `peloton.agent.app`);
- a run asked about is asked again only `every_ms` later while nothing changes for it
  (a long-running service instance costs one question and one answer that often);
- the answers are ordinary agent statuses: RUNNING changes nothing for a RUNNING run,
  an end ends it, LOST ends it LOST (retried as any lost run).
- a drain's outgoing run (the run a replacement supersedes, still on its draining host
  until its end: `handover`) is asked about alike, counted quiet from the first scan that
  saw it as it is now (serving, or its kill decided): the book keeps no time of its own
  for it. Its end answered again, or LOST, ends it as the older run it is (the current
  run goes on), so a lost report of its end no longer keeps the host from DRAINED.

`asked` and `outgoing_seen` are soft state: not snapshotted nor folded (a restarted job
manager asks again, at worst once more per run, and an outgoing run's quiet time starts
again), and they keep only runs still on a host. Deterministic: the
times are the ticks' `now_ms`, the questions are sorted. A scan costs O(runs on hosts):
about 0.1 s for 100,000 runs on 1,000 hosts (once per `scan_every_ms`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from peloton.jobmgr.domain.records import JobRecord
from peloton.model.event import Event
from peloton.model.taskstate import ON_HOST, TaskState

__all__ = ["Reconciler", "ASKED", "CHUNK"]

#: the states a run may be asked about in (on a host, no timeout of their own)
ASKED: frozenset[TaskState] = ON_HOST - {TaskState.PREEMPTING}
#: runs per TaskReconcileRequested
CHUNK = 500

RunKey = tuple[str, int, int]


class _Book(Protocol):
    jobs: dict[str, JobRecord]
    on_host: dict[str, dict[tuple[str, int], None]]
    outgoing: dict[str, dict[tuple[str, int], None]]


@dataclass
class Reconciler:
    """When to ask which host's agent about which runs (module doc); 0 turns it off."""

    after_ms: int = 60_000
    every_ms: int = 600_000
    scan_every_ms: int = 10_000
    asked: dict[RunKey, int] = field(default_factory=dict)  # run -> when last asked
    #: outgoing run -> (its kill decided?, the first scan that saw it so)
    outgoing_seen: dict[RunKey, tuple[bool, int]] = field(default_factory=dict)
    next_scan_ms: int = 0

    def due(self, book: _Book, now_ms: int) -> list[Event]:
        """The questions of this tick (module doc)."""
        if self.after_ms <= 0 or now_ms < self.next_scan_ms:
            return []
        self.next_scan_ms = now_ms + self.scan_every_ms
        by_host: dict[str, list[RunKey]] = {}
        still: dict[RunKey, int] = {}
        asked = self.asked
        quiet_since = now_ms - self.after_ms  # a change at or before this is old enough
        for host, key, since, askable in self._runs_on_hosts(book, now_ms):
            last = asked.get(key)
            if last is not None:
                still[key] = last
            if since > quiet_since or not askable:
                continue
            if last is not None and last >= since and now_ms - last < self.every_ms:
                continue
            still[key] = now_ms
            by_host.setdefault(host, []).append(key)
        self.asked = still  # runs that left their host are forgotten
        out = []
        for host, keys in sorted(by_host.items()):
            keys.sort()
            refs = [{"job_id": j, "instance": i, "run": r} for j, i, r in keys]
            out += [Event("TaskReconcileRequested", host,
                          {"host": host, "at": now_ms, "runs": refs[k:k + CHUNK]})
                    for k in range(0, len(refs), CHUNK)]
        return out

    def _runs_on_hosts(self, book: _Book,
                       now_ms: int) -> Iterator[tuple[str, RunKey, int, bool]]:
        """(host, run, news since, may be asked) of every run on a host: the current runs,
        with their last change's time (asked in the `ASKED` states), then the drains'
        outgoing runs, with when a scan first saw them as they are (module doc)."""
        jobs = book.jobs
        for host, runs in book.on_host.items():  # any order: the questions are sorted
            for job_id, instance in runs:
                task = jobs[job_id].tasks[instance]
                yield host, (job_id, instance, task.run), task.since, task.state in ASKED
        seen: dict[RunKey, tuple[bool, int]] = {}
        for host, runs in book.outgoing.items():
            for job_id, instance in runs:
                out = jobs[job_id].tasks[instance].outgoing
                if out is None:
                    continue
                key = (job_id, instance, out.run)
                ending, since = self.outgoing_seen.get(key, (out.ending, now_ms))
                seen[key] = (out.ending, since if ending == out.ending else now_ms)
                yield host, key, seen[key][1], True
        self.outgoing_seen = seen  # outgoing runs that ended are forgotten
