"""A pinned run, end to end on the real cores (in memory): the pin of a run's PENDING
change (TaskStateChanged v3 `pinned_host`) goes through the resource manager's
TasksAdmitted to the placement engine, which places the run on that host only.

The job manager pins only stateful and daemon runs, so the test pins a batch job's runs on
the way out of the job manager: every PENDING change of job `pinned` it publishes is
written to the log with `pinned_host` set (the runner publishes every core's output
through `publish`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from peloton.model.event import Event
from peloton.runner import cluster
from peloton.runner.cluster import batch_job

PIN = "host-4"


def test_a_pending_change_with_a_pin_is_placed_on_that_host() -> None:
    runner = cluster(seed=1, hosts=4, cpu=8.0)
    publish = runner.publish

    def pinning(events: Sequence[Event], producer: str = "client") -> None:
        out = []
        for ev in events:
            if (producer.startswith("jobmgr") and ev.type == "TaskStateChanged"
                    and ev.body["job_id"] == "pinned"):
                changes = [{**ch, "pinned_host": PIN} if ch["state"] == "PENDING" else ch
                           for ch in ev.body["changes"]]
                ev = Event(ev.type, ev.key, {**ev.body, "changes": changes})
            out.append(ev)
        publish(out, producer)

    runner.publish = pinning  # type: ignore[method-assign]
    runner.submit([batch_job("pinned", 3), batch_job("free", 3)])

    assert runner.run_until(runner.watch.all_terminal, max_ms=30_000)
    assert runner.watch.states() == {"SUCCEEDED": 2}
    hosts: dict[str, set[str]] = {"pinned": set(), "free": set()}
    pins: dict[str, set[Any]] = {"pinned": set(), "free": set()}
    for _, etype, body in runner.records("placement-made"):
        assert etype == "PlacementMade"
        for p in body["placements"]:
            hosts[p["job_id"]].add(p["host"])
    for _, etype, body in runner.records("tasks-admitted"):
        if etype == "TasksAdmitted":
            for t in body["tasks"]:
                pins[t["job_id"]].add(t["pinned_host"])
    assert pins == {"pinned": {PIN}, "free": {None}}
    assert hosts["pinned"] == {PIN}
    assert hosts["free"]  # placed anywhere (after the pinned runs, which go first)
    assert runner.errors == [] and runner.dead_letters() == 0
