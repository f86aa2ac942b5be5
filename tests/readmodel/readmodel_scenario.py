"""Realistic event streams for read-model, API and CLI tests.

Job and task facts come from the real job manager core (JobBook) reacting to resmgr,
placement and agent facts, so the shapes are the ones production emits. Every event is
encoded and decoded through the real codec and given a source position the way the bus
would: the catalog topic, a partition from the key, the next offset of that partition.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from peloton.bus.catalog import topic_for_event
from peloton.bus.codec import default_codec
from peloton.jobmgr.domain.book import JobBook
from peloton.model.event import Event
from peloton.model.jobfile import parse_job_file
from peloton.readmodel.projector import Row, SourcePos, project

JOB_YAML = """\
name: {name}
owner: team-a
description: a test job
instanceCount: {n}
respool: /prod/batch
sla: {{priority: 3}}
defaultConfig:
  resource: {{cpuLimit: 1, memLimitMb: 128}}
  command: {{value: "echo hello"}}
  restartPolicy: {{maxFailures: 1}}
"""

RES = {"cpu": 8.0, "memory": 8192.0, "disk": 10000.0, "gpu": 0.0}


def res(cpu: float = 0.0, memory: float = 0.0) -> dict[str, float]:
    return {"cpu": cpu, "memory": memory, "disk": 0.0, "gpu": 0.0}


@dataclass
class Record:
    source: SourcePos
    etype: str
    body: dict[str, Any]
    value: bytes


@dataclass
class Bus:
    """Assigns source positions and keeps the log in publish order."""

    records: list[Record] = field(default_factory=list)
    _next: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))

    def add(self, etype: str, key: str, body: dict[str, Any]) -> Record:
        topic = topic_for_event(etype)
        partition = zlib.crc32(key.encode()) % topic.partitions
        offset = self._next[(topic.name, partition)]
        self._next[(topic.name, partition)] = offset + 1
        value = default_codec().encode(etype, body)
        decoded_type, decoded = default_codec().decode(value)
        rec = Record(SourcePos(topic.name, partition, offset), decoded_type, decoded, value)
        self.records.append(rec)
        return rec

    def add_events(self, events: list[Event]) -> None:
        for ev in events:
            self.add(ev.type, ev.key, ev.body)

    def rows(self) -> list[Row]:
        return [row for r in self.records for row in project(r.etype, r.body, r.source)]


def cluster(bus: Bus, book: JobBook, t: int = 1_000) -> None:
    """Pools /prod/batch and /dev, hosts h1 (up) and h2 (lost)."""
    pools = []
    for pool, parent in (("/", None), ("/prod", "/"), ("/prod/batch", "/prod"), ("/dev", "/")):
        pools.append({"pool": pool, "parent": parent, "reservation": res(2), "limit": res(8),
                      "entitlement": res(4, 1024), "slack_entitlement": res(),
                      "nonslack_entitlement": res(4), "allocation": res(1), "demand": res(2)})
    ent = {"at": t, "cycle": 7, "capacity": RES, "pools": pools}
    bus.add("EntitlementUpdated", "cluster", ent)
    book.apply("EntitlementUpdated", ent)
    for host in ("h1", "h2"):
        bus.add("HostRegistered", host, {
            "host": host, "incarnation": f"{host}-inc1", "at": t, "capacity": RES,
            "labels": {"zone": "a"}, "log_url": f"http://{host}.agents:7000",
            "port_range_begin": 31000, "port_range_end": 32000, "simulated": False})
        bus.add("HostStatusReported", host, {"host": host, "incarnation": f"{host}-inc1",
                                             "at": t + 100, "running": []})
    bus.add("OfferReceived", "h1", {"at": t + 150, "offers": [{
        "host": "h1", "incarnation": "h1-inc1", "capacity": RES, "free": res(6, 4096),
        "labels": {"zone": "a"}, "generation": 3, "available": True,
        "port_range_begin": 31000, "port_range_end": 32000, "used_ports": [],
        "task_label_counts": {}}]})
    bus.add("HostLost", "h2", {"host": "h2", "incarnation": "h2-inc1", "at": t + 200,
                               "reason": "no heartbeat for 10s", "runs": []})
    bus.add("HostStateChanged", "h1", {
        "host": "h1", "at": t + 210, "state": "UP", "previous_state": "UP", "present": True,
        "labels": {"zone": "a"}, "reason": "registered", "deadline_ms": None, "request": ""})
    bus.add("HostMaintenanceRejected", "h2", {
        "host": "h2", "at": t + 220, "command": "complete_maintenance",
        "reason": "the host is UP: it is not in maintenance", "request": ""})


def submit(bus: Bus, book: JobBook, job_id: str, n: int = 2, t: int = 2_000,
           name: str = "hello") -> None:
    sub = parse_job_file(JOB_YAML.format(name=name, n=n), job_id, t)
    bus.add("JobSubmitted", job_id, sub)
    bus.add_events(book.handle("JobSubmitted", sub, t + 1))


def run_job(bus: Bus, book: JobBook, job_id: str, n: int = 2, t: int = 3_000,
            fail: int | None = None) -> None:
    """Admit, fail placement once, place on h1, launch, run, finish (instance `fail`
    exits 1 on every run; maxFailures 1 retries it once)."""
    runs = dict.fromkeys(range(n), 1)
    tasks = [{"job_id": job_id, "instance": i, "run": 1} for i in range(n)]
    deferred = {"at": t, "pool": "/prod/batch",
                "tasks": [{**x, "reason": "pool over entitlement"} for x in tasks]}
    bus.add("AdmissionDeferred", "/prod/batch", deferred)
    step = t + 10
    for attempt in (1, 2):
        batch = [{"job_id": job_id, "instance": i, "run": runs[i]} for i in range(n)
                 if attempt == 1 or i == fail]
        if not batch:
            break
        _feed(bus, book, "TasksAdmitted", "/prod/batch",
              {"at": step, "pool": "/prod/batch", "tasks": batch}, step)
        _feed(bus, book, "PlacementFailed", "round-1", {"at": step + 5, "round": 1, "tasks": [
            {**x, "reason": "no host has 1 free cpu"} for x in batch]}, step + 5)
        _feed(bus, book, "PlacementMade", "round-2", {"at": step + 10, "round": 2,
              "placements": [{**x, "host": "h1", "incarnation": "h1-inc1",
                              "resources": res(1, 128), "ports": {}} for x in batch]},
              step + 10)
        _feed(bus, book, "TaskLaunchRequested", "h1", {
            "host": "h1", "incarnation": "h1-inc1", "at": step + 20, "launches": [
                {**x, "command": "echo hello", "env": {}, "resources": res(1, 128),
                 "ports": {}, "kill_grace_period_s": 10.0} for x in batch]}, step + 20)
        _status(bus, book, job_id, batch, "RUNNING", None, step + 30)
        ok = [x for x in batch if x["instance"] != fail]
        bad = [x for x in batch if x["instance"] == fail]
        if ok:
            _status(bus, book, job_id, ok, "SUCCEEDED", 0, step + 40)
        if bad:
            _status(bus, book, job_id, bad, "FAILED", 1, step + 40)
            runs[fail] += 1  # type: ignore[index]
        step += 100


def _status(bus: Bus, book: JobBook, job_id: str, batch: list[dict[str, Any]], state: str,
            exit_code: int | None, at: int) -> None:
    _feed(bus, book, "TaskStatusReported", "h1", {
        "host": "h1", "incarnation": "h1-inc1", "at": at, "statuses": [
            {**x, "state": state, "exit_code": exit_code, "message": state.lower(),
             "sandbox": f"/sandbox/{x['job_id']}-{x['instance']}-{x['run']}"}
            for x in batch]}, at)


def _feed(bus: Bus, book: JobBook, etype: str, key: str, body: dict[str, Any],
          now: int) -> None:
    bus.add(etype, key, body)
    bus.add_events(book.handle(etype, body, now))


SERVICE_YAML = """\
name: web
owner: team-a
type: SERVICE
instanceCount: 1
respool: /prod/batch
defaultConfig:
  resource: {cpuLimit: 1, memLimitMb: 128}
  command: {value: "./serve"}
  healthCheck: {type: COMMAND, commandCheck: {command: "true"}}
"""


def service_job(bus: Bus, book: JobBook, t: int = 9_000) -> None:
    """job-svc: one SERVICE instance running on h1 and passing its health check; then
    an empty host h3 starts a drain (the job manager reports its progress)."""
    sub = parse_job_file(SERVICE_YAML, "job-svc", t)
    _feed(bus, book, "JobSubmitted", "job-svc", sub, t + 1)
    x = {"job_id": "job-svc", "instance": 0, "run": 1}
    _feed(bus, book, "TasksAdmitted", "/prod/batch",
          {"at": t + 10, "pool": "/prod/batch", "tasks": [x]}, t + 10)
    _feed(bus, book, "PlacementMade", "round-9", {"at": t + 20, "round": 9, "placements": [
        {**x, "host": "h1", "incarnation": "h1-inc1", "resources": res(1, 128),
         "ports": {}}]}, t + 20)
    for health in ("PENDING", "HEALTHY"):
        _feed(bus, book, "TaskStatusReported", "h1", {
            "host": "h1", "incarnation": "h1-inc1", "at": t + 30, "statuses": [
                {**x, "state": "RUNNING", "exit_code": None, "message": "running",
                 "sandbox": "/sandbox/job-svc-0-1", "health": health}]}, t + 30)
    _feed(bus, book, "HostStateChanged", "h3", {
        "host": "h3", "at": t + 40, "state": "DRAINING", "previous_state": "UP",
        "present": True, "labels": {}, "reason": "maintenance", "deadline_ms": None,
        "request": ""}, t + 40)


def update_request(job_id: str, update_id: str, at: int, yaml_text: str = SERVICE_YAML,
                   **settings: Any) -> dict[str, Any]:
    """A JobUpdateRequested body (the API's shape: a JobSubmitted config, snake_case
    settings)."""
    return {"job_id": job_id, "update_id": update_id, "at": at, "requested_by": "ops",
            "config": parse_job_file(yaml_text, job_id, at), "settings": {
                "batch_size": 0, "max_unavailable": None, "max_instance_retries": 0,
                "max_tolerable_instance_failures": 0, "rollback_on_failure": False,
                "start_paused": False, "canary": 0, **settings}}


def update_service(bus: Bus, book: JobBook, t: int = 9_500) -> None:
    """job-svc's updates, none of which touches its task: u-bad (a changed pool:
    rejected), u-1 (to version 2, started paused, then aborted; a resume after that is
    refused)."""
    bad = update_request("job-svc", "u-bad", t, SERVICE_YAML.replace("/prod/batch", "/dev"))
    _feed(bus, book, "JobUpdateRequested", "job-svc", bad, t + 1)
    v2 = update_request("job-svc", "u-1", t + 10, SERVICE_YAML.replace("./serve", "./serve2"),
                        start_paused=True, batch_size=1)
    _feed(bus, book, "JobUpdateRequested", "job-svc", v2, t + 11)
    for i, command in enumerate(("abort", "resume")):
        _feed(bus, book, "UpdateCommandRequested", "job-svc", {
            "job_id": "job-svc", "update_id": "u-1", "at": t + 20 + i, "command": command,
            "requested_by": "ops"}, t + 21 + i)


def full_scenario() -> Bus:
    """A cluster, job-ok (2 tasks, succeeds), job-bad (instance 1 fails twice: FAILED),
    job-wait (submitted, waiting for admission), job-rej (rejected), a dead letter,
    job-svc (a SERVICE job, see `service_job`) and its updates (`update_service`)."""
    bus, book = Bus(), JobBook()
    cluster(bus, book)
    submit(bus, book, "job-ok", 2, t=2_000, name="ok")
    run_job(bus, book, "job-ok", 2, t=3_000)
    submit(bus, book, "job-bad", 2, t=4_000, name="bad")
    run_job(bus, book, "job-bad", 2, t=5_000, fail=1)
    submit(bus, book, "job-wait", 1, t=6_000, name="wait")
    bus.add("AdmissionDeferred", "/prod/batch", {"at": 6_500, "pool": "/prod/batch", "tasks": [
        {"job_id": "job-wait", "instance": 0, "run": 1, "reason": "pool over entitlement"}]})
    rej = parse_job_file(JOB_YAML.format(name="rej", n=1).replace("/prod/batch", "/nope"),
                         "job-rej", 7_000)
    bus.add("JobSubmitted", "job-rej", rej)
    bus.add_events(book.handle("JobSubmitted", rej, 7_001))
    bus.add("DeadLetterRecorded", "job-submitted", {
        "at": 8_000, "service": "jobmgr", "source_topic": "job-submitted", "partition": 2,
        "offset": 41, "reason": "not Avro single-object encoding (missing C3 01 marker)",
        "key": b"junk", "value": b"garbage"})
    service_job(bus, book)
    update_service(bus, book)
    pools(bus)
    return bus


def pools(bus: Bus, t: int = 1_600) -> None:
    """Pool requests answered by the real resource manager core, and a preemption."""
    from peloton.resmgr.domain.cycle import ResourceManager
    from peloton.resmgr.domain.poolbook import parse_pool_document

    rm = ResourceManager()
    record = parse_pool_document(
        {"resources": [{"kind": "cpu", "reservation": 0, "limit": 4}]}, "/lab")[0]
    requests = [("ResourcePoolCreateRequested", "/lab", {"config": record}),
                ("ResourcePoolUpdateRequested", "/lab", {"config": record, "parent": None}),
                ("ResourcePoolDeleteRequested", "/lab", {}),
                ("ResourcePoolDeleteRequested", "/ghost", {})]
    for i, (etype, path, extra) in enumerate(requests):
        body = {"request_id": f"rp-{i}", "at": t + i, "path": path, **extra}
        bus.add(etype, path, body)
        for fact in rm.handle(etype, body, t + i):
            bus.add(fact.type, fact.key, fact.body)
    bus.add("TasksPreempted", "/prod/batch", {"at": t + 10, "pool": "/prod/batch", "tasks": [
        {"job_id": "job-wait", "instance": 0, "run": 1, "reason": "POOL_OVER_ENTITLEMENT",
         "detail": "pool /prod/batch over entitlement for 3 cycles: cpu 8/4"}]})
