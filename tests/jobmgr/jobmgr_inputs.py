"""Plausible input streams for the job manager's property tests (not a test module).

`input_streams()` draws public inputs (submissions, kills, some of them controller jobs
or invalid) and facts from the other services against a shadow book, so runs and hosts
are near reality: the current run or one before/after, the task's host or another.
Includes duplicates, stale and out-of-order facts, host losses, preemptions and the
shell's periodic reconcile.
"""

from __future__ import annotations

import functools

import hypothesis.strategies as st
from event_bodies import (
    agent_status,
    host_lost,
    job_kill_requested,
    job_submitted,
    launch,
    launch_requested,
    placement,
    placement_failed,
    placement_made,
    placement_rejected,
    tasks_admitted,
    tasks_preempted,
)
from jobmgr_driver import RECONCILE, Body, Jobmgr, controlled

__all__ = ["HOSTS", "STEP_KINDS", "Input", "input_streams"]

HOSTS = ("h1", "h2", "h3")
AGENT_STATES = ("LAUNCHED", "STARTING", "RUNNING", "SUCCEEDED", "FAILED", "KILLED")
STEP_KINDS = ("admit", "admit", "place", "place", "reject", "launch", "launch", "status",
              "status", "status", "host_lost", "kill", "duplicate", "reconcile",
              "placement_failed", "preempt")
Input = tuple[str, Body | None]
_submitted = functools.cache(job_submitted)  # the YAML round trip is the slow part


@st.composite
def input_streams(draw: st.DrawFn, kinds: tuple[str, ...] = STEP_KINDS) -> list[Input]:
    """Plausible inputs, drawn against a shadow book so runs and hosts are near reality
    (current run, or one before/after; the task's host, or another)."""
    shadow = Jobmgr()
    inputs: list[Input] = []

    def send(etype: str, body: Body | None) -> None:
        inputs.append((etype, body))
        shadow.send(etype, body)

    job_ids = [f"j{j}" for j in range(draw(st.integers(1, 2)))]
    for job_id in job_ids:
        n, max_failures = draw(st.integers(1, 3)), draw(st.integers(0, 2))
        if draw(st.integers(0, 3)) == 0:  # instance 0 a controller task
            send("JobSubmitted", controlled(job_id, n, max_failures))
        else:
            send("JobSubmitted", _submitted(job_id, n, max_failures=max_failures, grace_s=2))
    if draw(st.booleans()):
        send("JobSubmitted", _submitted("bad", 1, cpu=0))
    for _ in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from(kinds))
        if kind == "reconcile":
            send(RECONCILE, None)
            continue
        if kind == "duplicate":
            send(*draw(st.sampled_from(inputs)))
            continue
        job_id = draw(st.sampled_from(job_ids))
        job = shadow.book.jobs[job_id]
        instance = draw(st.integers(0, len(job.tasks) - 1))
        task = job.tasks[instance]
        run = max(1, task.run + draw(st.sampled_from((0, 0, 0, 0, -1, 1))))
        host = task.host if task.host and draw(st.booleans()) else draw(st.sampled_from(HOSTS))
        if kind == "admit":
            send("TasksAdmitted", tasks_admitted(job_id, instance, run=run))
        elif kind == "place":
            send("PlacementMade", placement_made(placement(job_id, instance, host, run=run)))
        elif kind == "reject":
            send("PlacementRejected", placement_rejected(job_id, instance, host, run=run))
        elif kind == "launch":
            send("TaskLaunchRequested", launch_requested(host, launch(job_id, instance,
                                                                      run=run)))
        elif kind == "status":
            state = draw(st.sampled_from(AGENT_STATES))
            send("TaskStatusReported", agent_status(host, job_id, instance, state, run=run,
                                                    exit_code=1 if state == "FAILED" else None))
        elif kind == "host_lost":  # as the host manager reports it: the runs on the host
            on_host = sorted(f"{j}-{t.instance}-{t.run}" for j, jb in shadow.book.jobs.items()
                             for t in jb.tasks if t.host == host)
            send("HostLost", host_lost(host, runs=on_host))
        elif kind == "kill":
            some = draw(st.lists(st.integers(0, len(job.tasks) - 1), max_size=2, unique=True))
            send("JobKillRequested", job_kill_requested(job_id, *some))
        elif kind == "placement_failed":
            send("PlacementFailed", placement_failed(job_id, instance, run=run))
        elif kind == "preempt":
            send("TasksPreempted", tasks_preempted(job_id, instance, run=run))
    return inputs
