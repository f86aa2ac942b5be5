"""Preemption and STATEFUL jobs: a stateful instance keeps its data on its host, so
preemption chooses its runs only when the job's SLA says how many instances may be down
(`sla.maximumUnavailableInstances`); the job manager then keeps to that budget."""

from __future__ import annotations

import pytest
from event_bodies import job_created, task_state_changed
from test_resmgr_revocable import POOL, cluster, run, submit, tasks


@pytest.mark.parametrize(("kind", "budget", "taken"), [
    ("BATCH", None, 2), ("SERVICE", None, 2), ("STATEFUL", None, 0), ("STATEFUL", 1, 2)])
def test_a_stateful_job_is_a_victim_only_when_its_sla_allows(kind: str, budget: int | None,
                                                              taken: int) -> None:
    rm = cluster(4)
    body = {**job_created("low", 4, respool=POOL, cpu=1.0, priority=0), "type": kind,
            "max_unavailable": budget}
    rm.fold("JobCreated", body)
    rm.fold("TaskStateChanged", task_state_changed(
        "low", *((i, "PENDING") for i in range(4)), previous="INITIALIZED"))
    out = rm.tick(0)
    assert len(tasks(out, "TasksAdmitted")) == 4
    run(rm, out, 10)
    submit(rm, "high", 2, at=1_100, cpu=1.0, priority=5)
    preempted = tasks(rm.tick(1_100), "TasksPreempted") + tasks(rm.tick(2_100),
                                                                "TasksPreempted")
    assert len([t for t in preempted if t[0] == "low"]) == taken
