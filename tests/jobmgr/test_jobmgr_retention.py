"""Bounded state and no scans of the whole book on the hot path (issue 8, item 4).

Terminal jobs (and rejected submissions, and kills of jobs never seen) leave the book
`retention_ms` of event time after they ended; only a 64-bit fingerprint of each id stays
(so a resubmission is still a no-op). Over many waves of jobs the book stays flat. An
input about one job touches no other job's tasks; a tick looks only at watched runs.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from event_bodies import (
    agent_status,
    job_kill_requested,
    job_submitted,
    tasks_admitted,
)
from jobmgr_driver import Jobmgr, controlled

from peloton.jobmgr.domain.book import JobBook
from peloton.jobmgr.domain.snapshot import book_to_data
from peloton.jobmgr.domain.timeouts import Timeouts

RETENTION = 60_000
_submitted = functools.cache(job_submitted)


def sizes(book: JobBook) -> dict[str, int]:
    return {"jobs": len(book.jobs), "tasks": sum(len(j.tasks) for j in book.jobs.values()),
            "ended": len(book.ended), "watched": len(book.watched),
            "submitted": len(book.submitted), "rejected": len(book.rejected),
            "rejected_at": len(book.rejected_at), "kill_intents": len(book.kill_intents),
            "intent_at": len(book.intent_at), "controller_ended": len(book.controller_ended),
            "held": len(book.held)}


def wave(jm: Jobmgr, w: int, jobs: int = 12) -> None:
    """A wave of small jobs that all end: most succeed, one fails, one is killed, one is
    a controller job, one is rejected; plus a kill of a job nobody submitted."""
    for j in range(jobs):
        job_id = f"w{w}-{j}"
        if j == jobs - 1:
            jm.send("JobSubmitted", _submitted(job_id, 1, cpu=0))  # rejected
            continue
        body = controlled(job_id, 2) if j == 0 else _submitted(job_id, 2)
        jm.send("JobSubmitted", body)
        if j == 1:
            jm.send("JobKillRequested", job_kill_requested(job_id))
            continue
        for i in range(2):
            jm.to_running(job_id, i, f"h{(i + j) % 3}")
        for i in range(2):
            ending = "FAILED" if j == 2 and i == 1 else "SUCCEEDED"
            jm.status(f"h{(i + j) % 3}", job_id, i, ending, exit_code=0)
    jm.send("JobKillRequested", job_kill_requested(f"never-{w}"))
    jm.send("TasksAdmitted", tasks_admitted(f"never-{w}", 0))  # about a job never seen


def test_many_waves_of_jobs_leave_the_book_flat() -> None:
    jm = Jobmgr(JobBook(retention_ms=RETENTION))
    after: list[dict[str, int]] = []
    snapshot_bytes: list[int] = []
    forgotten_chars: list[int] = []
    for w in range(40):
        wave(jm, w)
        for state in ("SUCCEEDED", "KILLED", "FAILED"):  # every job of the wave ended
            assert state in {jm.book.jobs[f"w{w}-{j}"].state.value for j in range(3)}
        jm.tick(RETENTION // 2 + 1)  # a job stays until the next wave's tick
        after.append(sizes(jm.book))
        data = book_to_data(jm.book)
        forgotten_chars.append(len(data.pop("forgotten")))
        snapshot_bytes.append(len(json.dumps(data)))
    # the book holds the last wave, whatever the number of waves before it
    assert after[5:] == [after[5]] * len(after[5:])
    assert after[-1]["jobs"] == 11 and after[-1]["rejected"] == 1
    assert after[-1]["watched"] == after[-1]["held"] == after[-1]["submitted"] == 0
    steady = snapshot_bytes[5:]  # flat but for wider ids and times ("w9-" -> "w10-")
    assert max(steady) - min(steady) < 0.02 * min(steady)
    # what remains of a forgotten job is its 8-byte fingerprint (base64: < 11 chars)
    assert len(jm.book.forgotten) == 12 * 39
    assert forgotten_chars[-1] <= 11 * len(jm.book.forgotten)


def test_a_job_that_left_the_book_stays_known() -> None:
    jm = Jobmgr(JobBook(retention_ms=RETENTION))
    jm.submit("old", 1)
    jm.to_running("old", 0, "h1")
    jm.status("h1", "old", 0, "SUCCEEDED", exit_code=0)
    jm.tick(RETENTION - 10)
    assert "old" in jm.book.jobs  # within the window late facts still find it
    jm.tick(20)
    assert "old" not in jm.book.jobs and jm.book.known("old")
    assert jm.send("JobSubmitted", _submitted("old", 1)) == []  # resubmission: a no-op
    assert jm.send("TaskStatusReported", agent_status("h1", "old", 0, "RUNNING")) == []
    assert jm.send("JobKillRequested", job_kill_requested("old")) == []
    assert sizes(jm.book)["kill_intents"] == 0 and "old" not in jm.book.submitted


def test_a_running_job_never_leaves_the_book() -> None:
    jm = Jobmgr(JobBook(retention_ms=RETENTION, timeouts=Timeouts(placement_ms=0)))
    jm.submit("long", 1)
    jm.to_running("long", 0, "h1")
    jm.tick(100 * RETENTION)
    assert jm.job_state("long") == "RUNNING"


# ================================================================ no whole-book scans


class CountingList(list[Any]):
    """A task list that counts how often it is read."""

    reads = 0

    def __iter__(self) -> Any:
        CountingList.reads += 1
        return super().__iter__()

    def __getitem__(self, i: Any) -> Any:
        CountingList.reads += 1
        return super().__getitem__(i)


def crowded_book(bystanders: int = 50) -> Jobmgr:
    """One job under test ("j") among `bystanders` live jobs of 20 tasks each, whose task
    lists count every read."""
    jm = Jobmgr(JobBook(retention_ms=RETENTION))
    for b in range(bystanders):
        jm.send("JobSubmitted", _submitted(f"b{b}", 20))
        jm.send("TasksAdmitted", tasks_admitted(f"b{b}", *range(10)))
    jm.submit("j", 2)
    for b in range(bystanders):
        job = jm.book.jobs[f"b{b}"]
        job.tasks = CountingList(job.tasks)
    return jm


def test_an_input_about_one_job_reads_no_other_jobs_tasks() -> None:
    jm = crowded_book()
    CountingList.reads = 0
    jm.to_running("j", 0, "h1")
    jm.status("h1", "j", 0, "SUCCEEDED", exit_code=0)
    jm.send("JobKillRequested", job_kill_requested("j", 1))
    jm.send("HostLost", {"host": "h1", "incarnation": "inc-1", "at": 0, "reason": "gone",
                         "runs": ["j-0-1"]})
    assert CountingList.reads == 0


def test_a_tick_reads_only_the_watched_runs() -> None:
    jm = crowded_book()
    assert len(jm.book.watched) == 50 * 10  # the READY runs, not the 1,000 tasks
    CountingList.reads = 0
    jm.tick(1_000)  # nothing expires
    assert CountingList.reads == 50 * 10
