"""A JobBook under test with its clock and log, and helpers to read its events.

Shared by the job manager's test modules (not a test module itself).
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

from event_bodies import (
    agent_status,
    job_submitted,
    launch,
    launch_requested,
    placement,
    placement_made,
    tasks_admitted,
)

from peloton.jobmgr.domain.book import JobBook, TaskRecord
from peloton.jobmgr.domain.snapshot import book_from_data, book_to_data
from peloton.model.event import Event
from peloton.model.jobfile import parse_job_file

__all__ = ["Body", "PUBLIC", "RECONCILE", "Jobmgr", "types", "changes", "job_states",
           "controlled", "replayed_and_restored"]

Body = dict[str, Any]
PUBLIC = ("JobSubmitted", "JobKillRequested", "JobStartRequested", "HostStateChanged",
          "JobUpdateRequested",
          "UpdateCommandRequested")  # replayed inputs
RECONCILE = "reconcile"  # a pseudo input: the shell's periodic reconcile


class Jobmgr:
    """A JobBook under test, its clock and its log (public inputs + emitted events)."""

    def __init__(self, book: JobBook | None = None) -> None:
        self.book = book or JobBook()
        self.now = 0
        self.log: list[tuple[str, Body]] = []

    def tick(self, advance_ms: int) -> list[Event]:
        """Let `advance_ms` of event time pass, then run the periodic decisions."""
        self.now += advance_ms
        out = self.book.tick(self.now)
        self.log += [(e.type, e.body) for e in out]
        return out

    def send(self, etype: str, body: Body | None = None) -> list[Event]:
        self.now += 10
        if etype == RECONCILE:
            out = self.book.reconcile(self.now)
        else:
            assert body is not None
            if etype in PUBLIC:  # the book keeps these bodies: give it its own copy
                body = copy.deepcopy(body)
                self.log.append((etype, body))
            out = self.book.handle(etype, body, self.now)
        self.log += [(e.type, e.body) for e in out]
        return out

    def task(self, job_id: str, instance: int) -> TaskRecord:
        return self.book.jobs[job_id].tasks[instance]

    def states(self, job_id: str) -> list[str]:
        return [t.state.value for t in self.book.jobs[job_id].tasks]

    def job_state(self, job_id: str) -> str:
        return self.book.jobs[job_id].state.value

    # ---- moving tasks along the happy path ------------------------------------------
    def submit(self, job_id: str, instances: int = 1, **kw: Any) -> list[Event]:
        return self.send("JobSubmitted", job_submitted(job_id, instances, **kw))

    def to_launching(self, job_id: str, instance: int, host: str, run: int = 1) -> None:
        self.send("TasksAdmitted", tasks_admitted(job_id, instance, run=run))
        self.send("PlacementMade", placement_made(placement(job_id, instance, host, run=run)))
        self.send("TaskLaunchRequested", launch_requested(host, launch(job_id, instance,
                                                                       run=run)))

    def to_running(self, job_id: str, instance: int, host: str, run: int = 1) -> list[Event]:
        self.to_launching(job_id, instance, host, run)
        return self.send("TaskStatusReported",
                         agent_status(host, job_id, instance, "RUNNING", run=run))

    def status(self, host: str, job_id: str, instance: int, state: str, run: int = 1,
               **kw: Any) -> list[Event]:
        return self.send("TaskStatusReported",
                         agent_status(host, job_id, instance, state, run=run, **kw))


def types(events: list[Event]) -> list[str]:
    return [e.type for e in events]


def changes(events: list[Event]) -> list[tuple[str, int, int, str, str]]:
    """(job, instance, run, previous_state, state) of every TaskStateChanged change."""
    return [(e.body["job_id"], c["instance"], c["run"], c["previous_state"], c["state"])
            for e in events if e.type == "TaskStateChanged" for c in e.body["changes"]]


def job_states(events: list[Event]) -> list[tuple[str, str]]:
    return [(e.body["previous_state"], e.body["state"]) for e in events
            if e.type == "JobStateChanged"]


CONTROLLED = """\
name: driver-and-workers
instanceCount: {n}
sla: {{preemptible: true}}
defaultConfig:
  resource: {{cpuLimit: 0.5, memLimitMb: 32}}
  command: {{value: ./work}}
  restartPolicy: {{maxFailures: {max_failures}}}
instanceConfig:
  0: {{controller: true, command: {{value: ./drive}}}}
"""


@functools.cache
def _controlled(job_id: str, n: int, max_failures: int) -> Body:
    return parse_job_file(CONTROLLED.format(n=n, max_failures=max_failures), job_id, 0)


def controlled(job_id: str, n: int = 3, max_failures: int = 0) -> Body:
    """A JobSubmitted body whose instance 0 is a controller task."""
    return copy.deepcopy(_controlled(job_id, n, max_failures))


def replayed_and_restored(j: Jobmgr) -> JobBook:
    """Check that replaying `j`'s log gives its book, and return the book restored from a
    JSON round trip of its snapshot (equal to the live one)."""
    replayed = JobBook()
    for etype, body in j.log:
        replayed.apply(etype, body)
    live = book_to_data(j.book)
    assert book_to_data(replayed) == live
    restored = book_from_data(json.loads(json.dumps(live)), j.book.retention_ms)
    assert book_to_data(restored) == live
    return restored
