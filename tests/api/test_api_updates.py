"""Rolling updates over HTTP: POST /v1/jobs/{id}/update|restart|stop, GET updates, and
POST /v1/updates/{id}/{command} (the read model decides 404/409; the job manager decides
again)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from readmodel_scenario import JOB_YAML, SERVICE_YAML, update_request

from peloton.api.publisher import MemoryPublisher
from peloton.bus.codec import default_codec
from peloton.jobmgr.domain.validation import validate_submission
from peloton.model.jobfile import parse_job_file
from peloton.readmodel.projector import SourcePos, project
from peloton.readmodel.store import Store

NOW = 123_456  # the app's clock in conftest
V2 = SERVICE_YAML.replace("./serve", "./serve2")
YAML = {"content-type": "application/yaml"}


def published(publisher: MemoryPublisher) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for topic, _, value in publisher.records:
        etype, body = default_codec().decode(value)
        out.append((topic, etype, dict(body)))
    return out


def set_update(store: Store, update_id: str, state: str, offset: int, resume_to: str | None = None,
               at: int = 100_000) -> None:
    record = {"command_at": 0, "update": {"old_count": 1, "new_count": 1, "settings": {},
                                          "status": {"state": state, "resume_to": resume_to}}}
    store.insert(project("UpdateStateChanged", {
        "job_id": "job-svc", "update_id": update_id, "at": at + offset, "request_at": 0,
        "state": state, "previous_state": "INITIALIZED", "reason": "because", "from_version": 2,
        "to_version": 3, "done": [], "failed": [], "in_flight": [0],
        "record_json": json.dumps(record)}, SourcePos("job-events", 3, 10**6 + offset)))


async def test_an_update_publishes_the_request(client: httpx.AsyncClient, loaded: Store,
                                               publisher: MemoryPublisher) -> None:
    r = await client.post("/v1/jobs/job-svc/update", content=V2, headers=YAML, params={
        "batch_size": 2, "max_unavailable": 1, "max_failures": 1, "max_instance_retries": 3,
        "rollback_on_failure": True, "canary": 1, "update_id": "u-9", "requested_by": "me"})
    assert r.status_code == 202, r.text
    assert r.json() == {"job_id": "job-svc", "update_id": "u-9"}
    ((topic, etype, body),) = published(publisher)
    assert (topic, etype) == ("job-update-requested", "JobUpdateRequested")
    assert (body["job_id"], body["update_id"], body["at"], body["requested_by"]) == (
        "job-svc", "u-9", NOW, "me")
    assert body["settings"] == {
        "batch_size": 2, "max_unavailable": 1, "max_instance_retries": 3,
        "max_tolerable_instance_failures": 1, "rollback_on_failure": True,
        "start_paused": False, "canary": 1}
    assert body["config"]["default_config"]["command"] == "./serve2"
    r = await client.post("/v1/jobs/job-svc/update", content=V2,
                          headers={"content-type": "application/json"})
    assert r.status_code == 400  # YAML sent as JSON


async def test_a_default_update_id_is_a_uuid(client: httpx.AsyncClient, loaded: Store,
                                            publisher: MemoryPublisher) -> None:
    r = await client.post("/v1/jobs/job-svc/update", content=V2, headers=YAML)
    assert r.status_code == 202, r.text
    assert len(r.json()["update_id"]) == 36
    assert published(publisher)[0][2]["settings"]["max_unavailable"] is None


async def test_every_problem_at_once(client: httpx.AsyncClient, loaded: Store,
                                     publisher: MemoryPublisher) -> None:
    bad = SERVICE_YAML.replace("/prod/batch", "/dev").replace("cpuLimit: 1", "cpuLimit: 0")
    r = await client.post("/v1/jobs/job-svc/update", content=bad.replace(
        "type: SERVICE", "type: BATCH").replace("  healthCheck", "  #"), headers=YAML,
        params={"batch_size": -1, "max_unavailable": 0, "canary": -2, "update_id": "-x"})
    assert r.status_code == 400, r.text
    fields = [d["field"] for d in r.json()["details"]]
    assert fields == ["update_id", "batch_size", "max_unavailable", "canary",
                      "defaultConfig.resource.cpuLimit", "type", "respool"]
    assert r.json()["details"][-1]["message"] == (
        "an update cannot change it (/prod/batch -> /dev)")
    assert publisher.records == []


async def test_only_service_and_stateful_jobs_are_updated(
        client: httpx.AsyncClient, loaded: Store, publisher: MemoryPublisher) -> None:
    r = await client.post("/v1/jobs/job-ok/update", content=JOB_YAML.format(name="ok", n=2),
                          headers=YAML)
    assert r.status_code == 400
    assert r.json()["details"] == [{"field": "type", "message": "only SERVICE and STATEFUL "
                                    "jobs are updated in place (job job-ok is BATCH)"}]
    r = await client.post("/v1/jobs/job-ok/restart")
    assert r.status_code == 400 and r.json()["details"][0]["field"] == "type"
    assert publisher.records == []


async def test_unknown_job_404_and_empty_body_400(client: httpx.AsyncClient,
                                                  loaded: Store) -> None:
    for path in ("update", "restart", "stop", "updates"):
        method = client.get if path == "updates" else client.post
        r = await method(f"/v1/jobs/nope/{path}", **({} if path == "updates" else {
            "content": V2, "headers": YAML}))
        assert r.status_code == 404, (path, r.text)
        assert r.json()["details"] == [{"field": "job_id", "message": "unknown job nope"}]
    r = await client.post("/v1/jobs/job-svc/update", content="  ", headers=YAML)
    assert r.status_code == 400 and r.json()["details"][0]["field"] == "body"
    r = await client.post("/v1/jobs/job-svc/update", content=V2,
                          headers={"content-type": "image/png"})
    assert r.status_code == 415


@pytest.mark.parametrize("state, blocks", [
    ("ROLLING_FORWARD", True), ("PAUSED", True), ("ROLLING_BACKWARD", True),
    ("INITIALIZED", True), ("SUCCEEDED", False), ("FAILED", False), ("ROLLED_BACK", False)])
async def test_a_live_update_is_a_conflict(client: httpx.AsyncClient, loaded: Store,
                                           publisher: MemoryPublisher, state: str,
                                           blocks: bool) -> None:
    set_update(loaded, "u-live", state, 1, "ROLLING_FORWARD" if state == "PAUSED" else None)
    r = await client.post("/v1/jobs/job-svc/update", content=V2, headers=YAML)
    assert r.status_code == (409 if blocks else 202), r.text
    if blocks:
        assert r.json()["error"] == f"job job-svc already has update u-live ({state})"
        assert (await client.post("/v1/jobs/job-svc/restart")).status_code == 409
        assert publisher.records == []


async def test_an_unanswered_request_blocks_only_for_a_while(
        client: httpx.AsyncClient, loaded: Store) -> None:
    for uid, at in (("u-fresh", NOW - 1_000), ("u-stale", NOW - 120_000)):
        loaded.insert(project("JobUpdateRequested", update_request("job-svc", uid, at),
                              SourcePos("job-update-requested", 3, 10**6 + at)))
        r = await client.post("/v1/jobs/job-svc/update", content=V2, headers=YAML)
        assert r.status_code == (409 if uid == "u-fresh" else 202), r.text
        if uid == "u-fresh":
            loaded.insert(project("JobUpdateRejected", {
                "job_id": "job-svc", "update_id": uid, "at": at + 1, "request_at": at,
                "command": "update", "reasons": ["x: y"]}, SourcePos("job-events", 3, 10**7)))


async def test_a_used_update_id_is_a_conflict(client: httpx.AsyncClient,
                                              loaded: Store) -> None:
    r = await client.post("/v1/jobs/job-svc/update", content=V2, headers=YAML,
                          params={"update_id": "u-1"})
    assert r.status_code == 409 and r.json()["details"][0]["field"] == "update_id"


async def test_read_updates(client: httpx.AsyncClient, loaded: Store) -> None:
    r = await client.get("/v1/jobs/job-svc/updates")
    assert r.status_code == 200
    ups = r.json()["updates"]
    assert [(u["update_id"], u["state"]) for u in ups] == [("u-1", "ABORTED"),
                                                           ("u-bad", "REJECTED")]
    one = (await client.get("/v1/updates/u-1")).json()
    assert one == ups[0]
    assert one["last_command_rejection"]["command"] == "resume"
    assert (await client.get("/v1/jobs/job-ok/updates")).json() == {"job_id": "job-ok",
                                                                     "updates": []}
    r = await client.get("/v1/updates/nope")
    assert r.status_code == 404
    assert r.json()["details"] == [{"field": "update_id", "message": "unknown update nope"}]


@pytest.mark.parametrize("state, resume_to, command, ok", [
    ("ROLLING_FORWARD", None, "pause", True), ("ROLLING_FORWARD", None, "resume", False),
    ("ROLLING_FORWARD", None, "rollback", True), ("PAUSED", "ROLLING_FORWARD", "resume", True),
    ("PAUSED", "ROLLING_BACKWARD", "rollback", False), ("PAUSED", "ROLLING_FORWARD", "pause",
                                                       False),
    ("ROLLING_BACKWARD", None, "abort", True), ("SUCCEEDED", None, "abort", False),
    ("INITIALIZED", None, "rollback", False)])
async def test_commands_follow_the_state_machine(
        client: httpx.AsyncClient, loaded: Store, publisher: MemoryPublisher, state: str,
        resume_to: str | None, command: str, ok: bool) -> None:
    set_update(loaded, "u-c", state, 1, resume_to)
    r = await client.post(f"/v1/updates/u-c/{command}", params={"requested_by": "me"})
    assert r.status_code == (202 if ok else 409), r.text
    if ok:
        assert r.json() == {"job_id": "job-svc", "update_id": "u-c", "command": command,
                            "at": NOW}
        assert published(publisher) == [("job-update-requested", "UpdateCommandRequested", {
            "job_id": "job-svc", "update_id": "u-c", "at": NOW, "command": command,
            "requested_by": "me"})]
    else:
        (detail,) = r.json()["details"]
        assert detail["field"] == "command" and detail["message"]
        assert publisher.records == []


async def test_command_errors(client: httpx.AsyncClient, loaded: Store) -> None:
    r = await client.post("/v1/updates/u-1/reboot")
    assert r.status_code == 400 and r.json()["details"][0]["field"] == "command"
    assert (await client.post("/v1/updates/nope/pause")).status_code == 404
    r = await client.post("/v1/updates/u-1/resume")  # ABORTED
    assert r.status_code == 409
    assert "ABORTED, which is final" in r.json()["details"][0]["message"]
    r = await client.post("/v1/updates/u-bad/abort")
    assert r.status_code == 409 and "rejected" in r.json()["details"][0]["message"]


async def test_restart_rolls_to_the_current_config(client: httpx.AsyncClient, loaded: Store,
                                                   publisher: MemoryPublisher) -> None:
    r = await client.post("/v1/jobs/job-svc/restart",
                          params={"batch_size": 1, "max_unavailable": 1, "update_id": "r-1"})
    assert r.status_code == 202, r.text
    ((_, etype, body),) = published(publisher)
    assert etype == "JobUpdateRequested" and body["update_id"] == "r-1"
    assert (body["settings"]["batch_size"], body["settings"]["max_unavailable"]) == (1, 1)
    # the rebuilt job file gives the job's current spec (version 2 after u-1) again
    created, problems = validate_submission(body["config"], None, None, NOW)
    assert problems == [] and created is not None
    spec = loaded.get_job("job-svc")
    assert spec is not None
    assert created["default_task"] == spec["config"]["default_task"]
    assert created["default_task"]["command"] == "./serve2"
    want = parse_job_file(V2, "job-svc", NOW)
    mine, _ = validate_submission(want, None, None, NOW)
    assert mine is not None
    assert {k: v for k, v in created.items() if k != "at"} == {
        k: v for k, v in mine.items() if k != "at"}


async def test_restart_of_some_instances(client: httpx.AsyncClient, loaded: Store,
                                         publisher: MemoryPublisher) -> None:
    count = loaded.get_job("job-svc")["instance_count"]  # type: ignore[index]
    r = await client.post("/v1/jobs/job-svc/restart",
                          params={"instances": f"0-{count - 1}", "update_id": "r-2"})
    assert r.status_code == 202, r.text
    ((_, _, body),) = published(publisher)
    assert body["instances"] == list(range(count))
    r = await client.post("/v1/jobs/job-svc/restart", params={"instances": "x,9-3"})
    assert r.status_code == 400
    assert [d["message"] for d in r.json()["details"]] == [
        "'x' is not N or N-M", "9-3: want 0 <= N <= M < 2^32"]


async def test_restart_needs_the_whole_config(client: httpx.AsyncClient, loaded: Store,
                                              publisher: MemoryPublisher) -> None:
    spec = loaded.get_job("job-svc")
    assert spec is not None
    r = await client.post("/v1/jobs/job-svc/restart", params={"batch_size": -1})
    assert r.status_code == 400 and r.json()["details"][0]["field"] == "batch_size"
    # a spec row an older projector wrote (no instance_tasks) cannot be rebuilt
    old = project("JobCreated", {
        "job_id": "job-old", "at": 1, "name": "old", "owner": "", "type": "SERVICE",
        "respool": "/prod/batch", "labels": {}, "instance_count": 1, "priority": 0,
        "preemptible": True, "revocable": False, "gang_size": 1, "placement_strategy": "PACK",
        "default_task": spec["config"]["default_task"], "instance_tasks": {},
        "max_unavailable": None}, SourcePos("job-events", 1, 10**6))
    for row in old:
        if row.values.get("facet") == "spec":
            row.values["config_json"] = '{"default_task": {}}'
    loaded.insert(old)
    r = await client.post("/v1/jobs/job-old/restart")
    assert r.status_code == 409 and "update" in r.json()["details"][0]["message"]
    assert publisher.records == []


async def test_stop_of_a_service_stops_each_instance(client: httpx.AsyncClient,
                                                    loaded: Store,
                                                    publisher: MemoryPublisher) -> None:
    r = await client.post("/v1/jobs/job-svc/stop")  # each instance's kill: STOPPED, startable
    count = (await client.get("/v1/jobs/job-svc")).json()["instance_count"]
    assert count > 0
    assert r.status_code == 202 and r.json() == {"job_id": "job-svc",
                                                 "instances": list(range(count))}
    ((topic, etype, body),) = published(publisher)
    assert (topic, etype, body["instances"]) == ("job-kill-requested", "JobKillRequested",
                                                 list(range(count)))
    assert body["reason"] == "stopped by api through the API"
    r = await client.post("/v1/jobs/job-svc/stop", params={"instances": "0"})
    assert r.status_code == 202 and r.json()["instances"] == [0]
    r = await client.post("/v1/jobs/job-svc/stop", params={"instances": "5-9"})
    assert r.status_code == 400 and r.json()["details"][0]["field"] == "instances"


async def test_tasks_show_their_config_version(client: httpx.AsyncClient,
                                               loaded: Store) -> None:
    tasks = (await client.get("/v1/jobs/job-svc/tasks")).json()["tasks"]
    assert tasks[0]["config_version"] == 1
    assert {h["config_version"] for h in tasks[0]["history"]} == {1}


async def test_openapi_names_the_update_models(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    paths = spec["paths"]
    for path in ("/v1/jobs/{job_id}/update", "/v1/jobs/{job_id}/restart",
                 "/v1/jobs/{job_id}/stop", "/v1/jobs/{job_id}/updates",
                 "/v1/updates/{update_id}", "/v1/updates/{update_id}/{command}"):
        assert path in paths, path
    ok = paths["/v1/updates/{update_id}"]["get"]["responses"]["200"]
    assert ok["content"]["application/json"]["schema"]["$ref"].endswith("/UpdateInfo")
    assert "config_version" in spec["components"]["schemas"]["Task"]["properties"]


async def test_start_publishes_a_start_of_a_long_running_job(
        client: httpx.AsyncClient, loaded: Store, publisher: MemoryPublisher) -> None:
    r = await client.post("/v1/jobs/job-svc/start", params={"instances": "0"})
    assert r.status_code == 202 and r.json() == {"job_id": "job-svc", "instances": [0]}
    ((topic, etype, body),) = published(publisher)
    assert (topic, etype, body["instances"]) == ("job-kill-requested", "JobStartRequested",
                                                 [0])
    r = await client.post("/v1/jobs/job-ok/start")  # a batch job
    assert r.status_code == 400 and r.json()["details"][0]["field"] == "type"
    assert (await client.post("/v1/jobs/ghost/start")).status_code == 404
