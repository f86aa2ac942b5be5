"""The launch record carries the task's health check and volume as the spec has them."""

from __future__ import annotations

import json

from event_bodies import job_created

from peloton.hostmgr.domain.launch import launch_record
from peloton.hostmgr.domain.records import Pending
from peloton.model.health import HealthCheck
from peloton.model.resources import Resources
from peloton.model.spec import JobSpec

CHECK = HealthCheck.from_body({"type": "HTTP", "httpCheck": {"path": "/health", "port": 8080},
                               "intervalSecs": 1})
PENDING = Pending("h1", "inc-1", Resources(1.0, 64.0, 0.0, 0.0), (("http", 31005),), 3, 0)


def _spec(**task_fields: object) -> JobSpec:
    body = job_created("j1", 2)
    body["default_task"] = {**body["default_task"], **task_fields}
    return JobSpec.from_body(body)


def test_a_task_without_check_or_volume_launches_with_neither() -> None:
    record = launch_record(_spec(), ("j1", 1, 1), PENDING)
    assert record["health_check_json"] is None and record["volume"] is None
    assert record["ports"] == {"http": 31005} and record["round"] == 3


def test_the_check_and_the_volume_travel_as_the_spec_has_them() -> None:
    raw = json.dumps(CHECK.to_body())
    record = launch_record(_spec(health_check_json=raw, volume="/data"), ("j1", 0, 2), PENDING)
    assert record["health_check_json"] == raw and record["volume"] == "/data"
    assert HealthCheck.from_body(json.loads(record["health_check_json"])) == CHECK
