"""Host maintenance over HTTP: POST /v1/hosts/{host}/maintenance, GET /v1/hosts(/{host})."""

from __future__ import annotations

import httpx
import pytest
from event_bodies import host_state_changed, task_state_changed

from peloton.api.publisher import MemoryPublisher
from peloton.bus.codec import default_codec
from peloton.model.duration import parse_duration_ms
from peloton.readmodel.projector import SourcePos, project
from peloton.readmodel.store import Store

NOW = 123_456  # the app's clock in conftest


def set_state(store: Store, host: str, state: str, previous: str, offset: int,
              at: int = 50_000) -> None:
    store.insert(project("HostStateChanged",
                         host_state_changed(host, state, previous, at=at + offset,
                                            deadline_ms=None if state == "UP" else 777),
                         SourcePos("host-events", 0, offset)))


def published(publisher: MemoryPublisher) -> list[tuple[str, dict[str, object]]]:
    return [(topic, dict(default_codec().decode(value)[1]))
            for topic, _, value in publisher.records]


async def test_start_publishes_the_request_with_an_absolute_deadline(
        client: httpx.AsyncClient, loaded: Store, publisher: MemoryPublisher) -> None:
    r = await client.post("/v1/hosts/h1/maintenance",
                          json={"action": "start", "deadline": "10m", "requested_by": "ops"})
    assert r.status_code == 202, r.text
    body = {"host": "h1", "command": "start_maintenance", "deadline_ms": NOW + 600_000,
            "requested_by": "ops", "at": NOW}
    assert r.json() == body
    assert published(publisher) == [("host-maintenance-requested", body)]


@pytest.mark.parametrize("state, action, ok", [
    ("UP", "start", True), ("UP", "complete", False), ("UP", "cancel", False),
    ("DRAINING", "start", False), ("DRAINING", "cancel", True),
    ("DRAINING", "complete", False), ("DRAINED", "cancel", True),
    ("DOWN", "start", False), ("DOWN", "complete", True), ("DOWN", "cancel", False)])
async def test_the_state_in_the_read_model_decides_202_or_409(
        client: httpx.AsyncClient, loaded: Store, publisher: MemoryPublisher, state: str,
        action: str, ok: bool) -> None:
    set_state(loaded, "h1", state, "UP", 10**6)
    r = await client.post("/v1/hosts/h1/maintenance", json={"action": action})
    assert r.status_code == (202 if ok else 409), r.text
    if ok:
        assert r.json()["command"] == f"{action}_maintenance"
        assert r.json()["deadline_ms"] is None
    else:
        assert r.json()["details"][0]["field"] == "action"
        assert state in r.json()["details"][0]["message"]
        assert publisher.records == []


async def test_already_down_is_a_conflict_with_the_reason(
        client: httpx.AsyncClient, loaded: Store) -> None:
    set_state(loaded, "h1", "DOWN", "DRAINED", 10**6)
    r = await client.post("/v1/hosts/h1/maintenance", json={"action": "start"})
    assert r.status_code == 409
    assert r.json() == {"error": "cannot start maintenance of host h1", "details": [
        {"field": "action", "message": "the host is already DOWN for maintenance; "
                                       "complete that maintenance first"}]}


async def test_an_unknown_host_is_404(client: httpx.AsyncClient, loaded: Store,
                                      publisher: MemoryPublisher) -> None:
    r = await client.post("/v1/hosts/nope/maintenance", json={"action": "start"})
    assert r.status_code == 404
    assert r.json() == {"error": "host nope not found",
                        "details": [{"field": "host", "message": "unknown host nope"}]}
    assert (await client.get("/v1/hosts/nope")).status_code == 404
    assert publisher.records == []


@pytest.mark.parametrize("body, field", [
    ({"action": "reboot"}, "action"),
    ({"action": "start", "deadline": "soon"}, "deadline"),
    ({"action": "start", "deadline": "0s"}, "deadline"),
    ({"action": "start", "deadline": "-5m"}, "deadline"),
    ({"action": "complete", "deadline": "10m"}, "deadline"),
    ({}, "action"),
])
async def test_bad_requests_are_400(client: httpx.AsyncClient, loaded: Store,
                                    publisher: MemoryPublisher, body: dict[str, object],
                                    field: str) -> None:
    r = await client.post("/v1/hosts/h1/maintenance", json=body)
    assert r.status_code == 400, r.text
    assert [d["field"] for d in r.json()["details"]] == [field]
    assert publisher.records == []


async def test_hosts_list_maintenance_and_runs(client: httpx.AsyncClient,
                                               loaded: Store) -> None:
    set_state(loaded, "h1", "DRAINING", "UP", 10**6)
    before = {h["host"]: h["runs"] for h in (await client.get("/v1/hosts")).json()["hosts"]}
    loaded.insert(project("TaskStateChanged", task_state_changed(
        "j9", (0, "RUNNING"), host="h1", previous="LAUNCHED", at=60_000),
        SourcePos("job-events", 3, 10**6)))
    hosts = {h["host"]: h for h in (await client.get("/v1/hosts")).json()["hosts"]}
    h1 = hosts["h1"]
    assert (h1["maintenance_state"], h1["maintenance_deadline"]) == ("DRAINING", 777)
    new = {"job_id": "j9", "instance": 0, "run": 1, "state": "RUNNING"}
    assert h1["runs"] == sorted([*before["h1"], new],
                                key=lambda r: (r["job_id"], r["instance"]))
    assert h1["task_count"] == len(before["h1"]) + 1
    assert h1["state"] == "UP"
    assert hosts["h2"]["maintenance_state"] == "UP"
    assert hosts["h2"]["task_count"] == len(before["h2"])
    one = (await client.get("/v1/hosts/h1")).json()
    assert one["maintenance_state"] == "DRAINING"
    assert [e["state"] for e in one["events"]][:1] == ["DRAINING"]


def test_durations() -> None:
    assert parse_duration_ms("90s") == 90_000
    assert parse_duration_ms("1h30m") == 5_400_000
    assert parse_duration_ms(" 2d ") == 172_800_000
    assert parse_duration_ms("500ms") == 500
    for bad in ("", "10", "m", "10x", "1h 30m", "0m", "400d"):
        with pytest.raises(ValueError):
            parse_duration_ms(bad)
