"""The HTTP API over a real chdb read model and the in-memory publisher."""

from __future__ import annotations

import json

import httpx
import pytest
from readmodel_scenario import full_scenario

from peloton.api.publisher import MemoryPublisher
from peloton.api.service import Materializer, RawRecord
from peloton.readmodel.projector import Row, SourcePos, project
from peloton.readmodel.store import Store

JOB = """\
name: hello
owner: me
instanceCount: 2
respool: /prod/batch
defaultConfig:
  resource: {cpuLimit: 0.5, memLimitMb: 64}
  command: {value: "echo hi"}
"""
BAD_JOB = """\
name: [not, a, string]
instanceCount: two
defaultConfig:
  resource: {cpuLimit: lots}
  colour: blue
"""


def materialize(store: Store, publisher: MemoryPublisher) -> Materializer:
    """What the API process's agents do with the published records."""
    m = Materializer(store)
    m.store_rows(m.project_records([RawRecord(t, 0, i, v)
                                    for i, (t, _, v) in enumerate(publisher.records)]))
    return m


async def test_submit_then_read_your_write(client: httpx.AsyncClient, store: Store,
                                           publisher: MemoryPublisher) -> None:
    r = await client.post("/v1/jobs", content=JOB, headers={"content-type": "application/yaml"})
    assert r.status_code == 202
    job_id = r.json()["job_id"]
    (event,) = publisher.events
    assert (event.type, event.key) == ("JobSubmitted", job_id)
    assert event.body["submitted_at"] == 123_456 and event.body["instance_count"] == 2
    assert publisher.records[0][0] == "job-submitted"

    r = await client.get(f"/v1/jobs/{job_id}")
    assert r.status_code == 404
    assert r.json() == {"error": f"job {job_id} not found (it may still be in flight)",
                        "details": []}

    materialize(store, publisher)
    r = await client.get(f"/v1/jobs/{job_id}")
    assert r.status_code == 200
    assert (r.json()["state"], r.json()["name"]) == ("SUBMITTED", "hello")


@pytest.mark.parametrize("ctype", ["application/json", "text/plain", "application/x-yaml"])
async def test_submit_with_a_chosen_id_in_other_content_types(
        client: httpx.AsyncClient, publisher: MemoryPublisher, ctype: str) -> None:
    import yaml

    text = json.dumps(yaml.safe_load(JOB)) if ctype == "application/json" else JOB
    r = await client.post("/v1/jobs?job_id=my-job.1", content=text,
                          headers={"content-type": f"{ctype}; charset=utf-8"})
    assert r.status_code == 202 and r.json() == {"job_id": "my-job.1", "warnings": []}
    assert publisher.events[0].body["default_config"]["command"] == "echo hi"


async def test_invalid_job_file_lists_every_problem(client: httpx.AsyncClient,
                                                    publisher: MemoryPublisher) -> None:
    r = await client.post("/v1/jobs", content=BAD_JOB, headers={"content-type": "text/yaml"})
    assert r.status_code == 400
    body = r.json()
    assert body["error"] == "invalid job file"
    fields = {d["field"] for d in body["details"]}
    assert {"name", "instanceCount", "defaultConfig.resource.cpuLimit",
            "defaultConfig.colour"} <= fields
    assert all(d["message"] for d in body["details"])
    assert publisher.events == []


@pytest.mark.parametrize("content,ctype,query,status,needle", [
    ("{not json", "application/json", "", 400, "not valid JSON"),
    ("name: [", "application/yaml", "", 400, "not valid YAML"),
    ("   ", "application/yaml", "", 400, "empty"),
    (JOB, "application/xml", "", 415, "unsupported content type"),
    (JOB, "application/yaml", "?job_id=-bad id", 400, "job_id"),
])
async def test_submit_errors_are_json(client: httpx.AsyncClient, content: str, ctype: str,
                                      query: str, status: int, needle: str) -> None:
    r = await client.post(f"/v1/jobs{query}", content=content, headers={"content-type": ctype})
    assert r.status_code == status
    assert needle in json.dumps(r.json())
    assert set(r.json()) == {"error", "details"}


async def test_duplicate_job_id_conflicts(client: httpx.AsyncClient, loaded: Store) -> None:
    r = await client.post("/v1/jobs?job_id=job-ok", content=JOB)
    assert r.status_code == 409 and "already exists" in r.json()["error"]


async def test_broker_failure_is_503(client: httpx.AsyncClient,
                                     publisher: MemoryPublisher) -> None:
    publisher.fail = "broker down"
    r = await client.post("/v1/jobs", content=JOB)
    assert r.status_code == 503
    assert r.json() == {"error": "could not publish JobSubmitted", "details": ["broker down"]}


async def test_list_and_get_jobs(client: httpx.AsyncClient, loaded: Store) -> None:
    jobs = (await client.get("/v1/jobs")).json()["jobs"]
    assert [j["job_id"] for j in jobs] == ["job-svc", "job-rej", "job-wait", "job-bad",
                                           "job-ok"]
    failed = (await client.get("/v1/jobs", params={"state": "failed"})).json()["jobs"]
    assert [j["job_id"] for j in failed] == ["job-bad"]
    assert len((await client.get("/v1/jobs?limit=2")).json()["jobs"]) == 2
    job = (await client.get("/v1/jobs/job-bad")).json()
    assert job["task_counts"] == {"FAILED": 1, "SUCCEEDED": 1}
    assert job["config"]["default_task"]["max_failures"] == 1
    rej = (await client.get("/v1/jobs/job-rej")).json()
    assert rej["state"] == "REJECTED" and rej["rejection_reasons"]


async def test_bad_query_parameters_are_400_with_fields(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/jobs", params={"state": "SLEEPY"})
    assert r.status_code == 400 and r.json()["details"][0]["field"] == "state"
    r = await client.get("/v1/jobs", params={"limit": "0"})
    assert r.status_code == 400 and r.json()["details"][0]["field"] == "limit"
    r = await client.get("/v1/nowhere")
    assert r.status_code == 404 and r.json()["error"] == "Not Found"


async def test_kill(client: httpx.AsyncClient, loaded: Store,
                    publisher: MemoryPublisher) -> None:
    r = await client.post("/v1/jobs/job-wait/kill")
    assert r.status_code == 202 and r.json() == {"job_id": "job-wait", "instances": []}
    r = await client.post("/v1/jobs/job-ok/kill", json={"instances": [1, 0, 1]})
    assert r.json()["instances"] == [0, 1]
    kills = [e.body for e in publisher.events]
    assert [k["instances"] for k in kills] == [[], [0, 1]]
    assert all(e.type == "JobKillRequested" for e in publisher.events)

    r = await client.post("/v1/jobs/job-ok/kill", json={"instances": [5]})
    assert r.status_code == 400 and "no instance 5" in r.json()["details"][0]["message"]
    r = await client.post("/v1/jobs/ghost/kill")
    assert r.status_code == 404 and "in flight" in r.json()["error"]
    r = await client.post("/v1/jobs/job-ok/kill", json={"instances": "all"})
    assert r.status_code == 400 and r.json()["details"][0]["field"] == "instances"

    materialize(loaded, publisher)
    job = (await client.get("/v1/jobs/job-wait")).json()
    assert job["kill_request"] == {"at": 123_456, "instances": [],
                                   "reason": "killed through the API"}
    assert (await client.get("/v1/jobs/job-ok")).json()["kill_request"]["instances"] == [0, 1]


async def test_tasks_with_history(client: httpx.AsyncClient, loaded: Store) -> None:
    data = (await client.get("/v1/jobs/job-bad/tasks")).json()
    assert data["job_id"] == "job-bad"
    t1 = data["tasks"][1]
    assert (t1["state"], t1["run"], t1["exit_code"], t1["host"]) == ("FAILED", 2, 1, "h1")
    assert len(t1["history"]) == 12 and t1["history"][0]["state"] == "PENDING"
    one = (await client.get("/v1/jobs/job-bad/tasks/1")).json()
    assert one == t1
    r = await client.get("/v1/jobs/job-bad/tasks/9")
    assert r.status_code == 404 and r.json()["error"] == "task job-bad/9 not found"
    r = await client.get("/v1/jobs/ghost/tasks")
    assert r.status_code == 404
    r = await client.get("/v1/jobs/ghost/tasks/0")
    assert r.status_code == 404 and "ghost not found" in r.json()["error"]
    wait = (await client.get("/v1/jobs/job-wait/tasks/0")).json()
    assert wait["reason"].startswith("waiting for admission")
    assert t1["health"] is None  # a batch task has no health check
    svc = (await client.get("/v1/jobs/job-svc/tasks/0")).json()
    assert (svc["state"], svc["health"], svc["config_version"]) == ("RUNNING", "HEALTHY", 1)


async def test_logs_are_proxied_from_the_agent(client: httpx.AsyncClient,
                                               loaded: Store) -> None:
    r = await client.get("/v1/jobs/job-ok/tasks/0/logs")
    assert r.status_code == 200 and r.text == "hello from 0\n"
    r = await client.get("/v1/jobs/job-bad/tasks/1/logs", params={"stream": "stderr"})
    assert r.text == "boom\n"
    r = await client.get("/v1/jobs/job-bad/tasks/1/logs?stream=stderr&run=1")
    assert r.text == "first boom\n"


async def test_log_errors(client: httpx.AsyncClient, loaded: Store) -> None:
    r = await client.get("/v1/jobs/job-ok/tasks/1/logs")
    assert r.status_code == 404 and "has no stdout log for run job-ok-1-1" in r.json()["error"]
    r = await client.get("/v1/jobs/job-wait/tasks/0/logs")
    assert r.status_code == 404 and "has not been placed" in r.json()["error"]
    r = await client.get("/v1/jobs/job-ok/tasks/0/logs?stream=stdin")
    assert r.status_code == 400
    r = await client.get("/v1/jobs/job-ok/tasks/0/logs?run=7")
    assert r.status_code == 404


async def test_unreachable_agent_is_502(client: httpx.AsyncClient, loaded: Store) -> None:
    # a later transition puts job-ok's task 0 on h2, whose agent is down
    moved = {"job_id": "job-ok", "at": 99_999, "changes": [
        {"instance": 0, "run": 1, "state": "SUCCEEDED", "previous_state": "RUNNING",
         "reason": "", "host": "h2", "exit_code": 0, "failures": 0}]}
    loaded.insert(project("TaskStateChanged", moved, SourcePos("job-events", 0, 10**6)))
    r = await client.get("/v1/jobs/job-ok/tasks/0/logs")
    assert r.status_code == 502
    assert r.json()["error"] == "the agent on h2 is unreachable"


async def test_cluster_views(client: httpx.AsyncClient, loaded: Store) -> None:
    hosts = (await client.get("/v1/hosts")).json()["hosts"]
    assert [(h["host"], h["state"]) for h in hosts] == [("h1", "UP"), ("h2", "LOST")]
    pools = (await client.get("/v1/pools")).json()["pools"]
    assert {p["pool"]: p["parent"] for p in pools}["/prod/batch"] == "/prod"
    dls = (await client.get("/v1/dead-letters?limit=5")).json()["dead_letters"]
    assert dls[0]["reason"].startswith("not Avro")
    health = (await client.get("/healthz")).json()
    assert health == {"ok": True, "materializer": {"records": 0}}


async def test_openapi_and_docs(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    for path in ("/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/kill",
                 "/v1/jobs/{job_id}/tasks", "/v1/jobs/{job_id}/tasks/{instance}",
                 "/v1/jobs/{job_id}/tasks/{instance}/logs", "/v1/hosts", "/v1/pools",
                 "/v1/dead-letters", "/healthz"):
        assert path in spec["paths"], path
    submit = spec["paths"]["/v1/jobs"]["post"]
    assert "application/yaml" in submit["requestBody"]["content"]
    assert "400" in submit["responses"] and "202" in submit["responses"]
    docs = await client.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_materializer_replays_are_idempotent_and_bad_records_are_counted(
        store: Store) -> None:
    bus = full_scenario()
    raw = [RawRecord(r.source.topic, r.source.partition, r.source.offset, r.value)
           for r in bus.records]
    m = Materializer(store)
    m.store_rows(m.project_records(raw))
    first = (store.list_jobs(), store.tasks_of_job("job-bad"), store.hosts(),
             store.table_counts())
    junk = [RawRecord("job-submitted", 0, 999, b"junk"), RawRecord("job-submitted", 0, 1000,
                                                                   None)]
    m.store_rows(m.project_records(raw + junk))  # an at-least-once redelivery
    assert (store.list_jobs(), store.tasks_of_job("job-bad"), store.hosts(),
            store.table_counts()) == first
    assert m.undecodable == 2 and m.records == 2 * len(raw) + 2


def test_materializer_skips_only_the_records_the_store_refuses(store: Store) -> None:
    bus = full_scenario()
    m = Materializer(store)
    per_record = m.project_records([RawRecord(r.source.topic, r.source.partition,
                                              r.source.offset, r.value) for r in bus.records])
    first = per_record[0][0]
    bad = [Row(first.table, {**first.values, "at": "not a time", "src_offset": 10**6})]
    m.store_rows([*per_record, bad])
    assert m.failed == 1
    assert len(store.list_jobs()) == 5
