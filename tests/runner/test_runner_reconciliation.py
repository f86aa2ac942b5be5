"""End to end on the production cores (in-memory runner): a run whose end report the job
manager lost still ends, because the job manager asks its agent about runs it has had no
news of and the agent reports the end again (reconciliation)."""

from __future__ import annotations

from typing import Any

from peloton.jobmgr.service import JobManagerCore
from peloton.model.event import Event
from peloton.runner import SERVICES, batch_job, cluster


class DropsAnEnd(JobManagerCore):
    """A job manager with a bug: the first agent report that ends a run of `job` raises
    (the runner, as the shell, dead-letters that record, rebuilds the core from the log and
    goes on; the count is the class's, so the rebuilt core does not raise again)."""

    job = "unlucky"
    dropped = 0

    def handle(self, etype: str, body: dict[str, Any], now_ms: int) -> list[Event]:
        if (etype == "TaskStatusReported" and not DropsAnEnd.dropped and any(
                s["job_id"] == self.job and s["state"] == "SUCCEEDED"
                for s in body["statuses"])):
            DropsAnEnd.dropped += 1
            raise RuntimeError("a bug that loses an end report")
        return super().handle(etype, body, now_ms)


def test_an_end_report_the_job_manager_lost_is_recovered_from_the_agent() -> None:
    DropsAnEnd.dropped = 0
    runner = cluster(seed=3, hosts=4, cpu=4.0, strict=False,
                     services={**SERVICES, "jobmgr": DropsAnEnd})
    runner.run_for(3_000)
    runner.submit([batch_job("unlucky", 3, duration_s=2.0),
                   batch_job("lucky", 2, duration_s=2.0)])
    assert runner.run_until(lambda: runner.dead_letters() > 0, max_ms=30_000)
    assert DropsAnEnd.dropped == 1
    # within a minute or so of no news the agent is asked, and answers with the end again
    assert runner.run_until(runner.watch.all_terminal, max_ms=120_000)
    assert set(runner.watch.states()) == {"SUCCEEDED"}
    # the runs asked about are those whose ends the dropped record held (the report of a
    # host: other jobs' ends in it were lost with it), and each answer is its end again
    asked = {(r["job_id"], r["instance"]) for _, e, b in runner.records("task-kill-requested")
             if e == "TaskReconcileRequested" for r in b["runs"]}
    again = [s for _, e, b in runner.records("task-status-reported")
             if e == "TaskStatusReported" for s in b["statuses"]
             if "reconciliation" in s["message"]]
    assert ("unlucky", 0) in asked
    assert {(s["job_id"], s["instance"]) for s in again} == asked
    assert {s["state"] for s in again} == {"SUCCEEDED"}
