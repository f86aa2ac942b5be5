"""Every event a core can emit is one the bus can carry, keyed by the catalog.

Three views of the same promise:
- the catalog: every event type has a schema, and its key field is in that schema;
- realistic bodies (tests/model/event_bodies.py, the resmgr pool book's own decisions):
  each passes `check_event` and gets the key the catalog declares (checked against the
  expected entity, not recomputed by the rule under test);
- the emitters: every `Event("<Type>", ...)` the cores' source builds names a catalog
  event with a schema, and every event the real cores emit while a small cluster runs
  (memory runner: jobs, a kill, a pool request, a lost host) passes `check_event` and is
  keyed as the catalog says.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import event_bodies as eb
import pytest
from bus_samples import field_type

from peloton.bus.catalog import TOPICS, Batch, Field, key_rule, topic_for_event
from peloton.bus.check import EventCheckError, check_event
from peloton.bus.codec import default_codec
from peloton.bus.keys import key_of
from peloton.bus.routing import partition_for
from peloton.model.event import Event
from peloton.model.resources import Resources
from peloton.resmgr.domain.poolbook import PoolBook, config_record
from peloton.resmgr.domain.poolconfig import PoolConfig
from peloton.runner import batch_job, cluster

CATALOG_EVENTS = sorted(e for t in TOPICS for e in t.events)
PACKAGE = Path(str(__import__("peloton").__file__)).resolve().parent
CORES = ("jobmgr", "resmgr", "placement", "hostmgr", "agent")


def _config(name: str) -> dict[str, Any]:
    return config_record(PoolConfig.uniform(name, Resources(1, 0, 0, 0),
                                             Resources(4, 1000, 1000, 0)))


def _pool_request(etype: str, path: str, **extra: Any) -> dict[str, Any]:
    return {"request_id": f"r-{etype}", "at": 5, "path": path} | extra


def _pool_fact(etype: str, body: dict[str, Any], book: PoolBook | None = None) -> Event:
    """What resmgr's pool book decides for a request (the real emitter)."""
    book = book or PoolBook()
    (fact,) = book.decide(etype, body, Resources(12, 12288, 30720, 0), frozenset(), 100)
    return fact


def _book_with(path: str) -> PoolBook:
    book = PoolBook()
    created = _pool_fact("ResourcePoolCreateRequested",
                         _pool_request("ResourcePoolCreateRequested", path,
                                       config=_config(path.rsplit("/", 1)[1])))
    book.fold(created.type, created.body)
    return book


def _created() -> dict[str, Any]:
    return _pool_fact("ResourcePoolCreateRequested",
                      _pool_request("ResourcePoolCreateRequested", "/lab",
                                    config=_config("lab"))).body


def _updated() -> dict[str, Any]:
    return _pool_fact("ResourcePoolUpdateRequested",
                      _pool_request("ResourcePoolUpdateRequested", "/lab",
                                    config=_config("lab"), parent=None),
                      _book_with("/lab")).body


def _deleted() -> dict[str, Any]:
    return _pool_fact("ResourcePoolDeleteRequested",
                      _pool_request("ResourcePoolDeleteRequested", "/lab"),
                      _book_with("/lab")).body


def _refused() -> dict[str, Any]:
    fact = _pool_fact("ResourcePoolCreateRequested",
                      _pool_request("ResourcePoolCreateRequested", "/no/parent",
                                    config=_config("parent")))
    assert fact.type == "ResourcePoolRequestRejected"
    return fact.body


# event type -> (a realistic body, the key it must get)
REALISTIC: dict[str, tuple[Callable[[], dict[str, Any]], str]] = {
    "JobSubmitted": (lambda: eb.job_submitted("j1", 3, ports=("http",), grace_s=2), "j1"),
    "JobCreated": (lambda: eb.job_created("j2", 3, instance_cpu={1: 2.0}), "j2"),
    "JobKillRequested": (lambda: eb.job_kill_requested("j3", 0, 2, reason="done"), "j3"),
    "JobRejected": (lambda: eb.job_rejected("j4", "name: must not be empty"), "j4"),
    "JobStateChanged": (lambda: eb.job_state_changed("j5", "RUNNING", "PENDING",
                                                     {"RUNNING": 1, "PENDING": 2}), "j5"),
    "TaskStateChanged": (lambda: eb.task_state_changed("j6", (0, "READY"), (1, "READY")),
                         "j6"),
    "TaskHealthChanged": (lambda: eb.task_health_changed("j7", (0, "HEALTHY")), "j7"),
    "JobSpecChanged": (lambda: eb.job_spec_changed("j8"), "j8"),
    "JobStartRequested": (lambda: eb.job_start_requested("j8", 1), "j8"),
    "UpdateStateChanged": (lambda: eb.update_state_changed("j8"), "j8"),
    "JobUpdateRejected": (lambda: eb.job_update_rejected("j8"), "j8"),
    "JobUpdateRequested": (lambda: eb.job_update_requested("j8"), "j8"),
    "UpdateCommandRequested": (lambda: eb.update_command_requested("j8"), "j8"),
    "TasksAdmitted": (lambda: eb.tasks_admitted("j1", 0, 1, pool="/a"), "j1"),
    "AdmissionDeferred": (lambda: eb.admission_deferred("j1", 2, "over entitlement",
                                                        pool="/b"), "j1"),
    "TasksPreempted": (lambda: eb.tasks_preempted("j1", 0, pool="/c"), "/c"),
    "EntitlementUpdated": (lambda: eb.entitlement_updated({"/": None, "/default": "/"}),
                           "cluster"),
    "PlacementMade": (lambda: eb.placement_made(eb.placement("j1", 0, "h1",
                                                             ports={"http": 31000}),
                                                round_=17), "j1"),
    "PlacementFailed": (lambda: eb.placement_failed("j1", 0), "j1"),
    "PlacementRejected": (lambda: eb.placement_rejected("j1", 0, "h1"), "rejected"),
    "TaskLaunchRequested": (lambda: eb.launch_requested("h2", eb.launch("j1", 0)), "h2"),
    "TaskKillRequested": (lambda: eb.task_kill_requested("h3", "j1", 0), "h3"),
    "TaskReconcileRequested": (lambda: eb.task_reconcile_requested("h3", ("j1", 0, 1)),
                               "h3"),
    "TaskStatusReported": (lambda: eb.agent_status("h4", "j1", 0, "RUNNING"), "h4"),
    "HostRegistered": (lambda: eb.host_registered("h5", labels={"zone": "a"}), "h5"),
    "HostStatusReported": (lambda: eb.heartbeat("h6", 5, running=["j1-0-1"]), "h6"),
    "HostLost": (lambda: eb.host_lost("h7", runs=["j1-0-1"]), "h7"),
    "HostMaintenanceRequested": (lambda: eb.host_maintenance_requested(
        "h8", deadline_ms=600_000, requested_by="ops"), "h8"),
    "HostStateChanged": (lambda: eb.host_state_changed("h9", labels={"zone": "a"},
                                                       deadline_ms=600_000), "h9"),
    "HostMaintenanceRejected": (lambda: eb.host_maintenance_rejected("h9"), "h9"),
    "HostDrainProgressed": (lambda: eb.host_drain_progressed("h9", "dns/0: last"), "h9"),
    "OfferReceived": (lambda: eb.offer_received(eb.offer("h1"), eb.offer("h2")), "offers"),
    "DeadLetterRecorded": (lambda: eb.dead_letter_recorded(), "job-submitted"),
    "ResourcePoolCreateRequested": (
        lambda: _pool_request("ResourcePoolCreateRequested", "/lab", config=_config("lab")),
        "/lab"),
    "ResourcePoolUpdateRequested": (
        lambda: _pool_request("ResourcePoolUpdateRequested", "/lab2", config=_config("lab2"),
                              parent="/"), "/lab2"),
    "ResourcePoolDeleteRequested": (
        lambda: _pool_request("ResourcePoolDeleteRequested", "/lab3"), "/lab3"),
    "ResourcePoolCreated": (_created, "/lab"),
    "ResourcePoolUpdated": (_updated, "/lab"),
    "ResourcePoolDeleted": (_deleted, "/lab"),
    "ResourcePoolRequestRejected": (_refused, "/no/parent"),
}


def test_every_catalog_event_has_a_realistic_body_here() -> None:
    assert sorted(REALISTIC) == CATALOG_EVENTS


@pytest.mark.parametrize("event", CATALOG_EVENTS)
def test_every_catalog_event_has_a_schema_with_its_key_field(event: str) -> None:
    codec = default_codec()
    assert event in codec.event_types, f"{event}: no schema in schemas/"
    rule = key_rule(event)
    if isinstance(rule, Field):
        assert field_type(codec.schema(event), rule.path) in ("string", "int", "long"), (
            event, rule.path)
    else:
        assert isinstance(rule, Batch) and rule.key and rule.why


@pytest.mark.parametrize("event", CATALOG_EVENTS)
def test_a_realistic_body_passes_the_check_and_gets_the_right_key(event: str) -> None:
    make, key = REALISTIC[event]
    body = make()
    check_event(Event(event, "whatever the core says", body))
    assert key_of(event, body) == key
    codec = default_codec()
    assert codec.decode_each(codec.encode(event, body)) == [(event, body)]


def _emitted_literals() -> dict[str, set[str]]:
    """Event types the cores' source builds as `Event("<Type>", ...)`, per core."""
    found: dict[str, set[str]] = defaultdict(set)
    for core in CORES:
        for path in sorted((PACKAGE / core).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id == "Event" and node.args
                        and isinstance(node.args[0], ast.Constant)
                        and isinstance(node.args[0].value, str)):
                    found[core].add(node.args[0].value)
    return found


def test_every_event_the_cores_build_is_in_the_catalog_with_a_schema() -> None:
    emitted = _emitted_literals()
    assert set(emitted) == set(CORES)  # the scan finds every core's emitters
    assert {"JobCreated", "TaskStateChanged", "TaskKillRequested",
            "TaskReconcileRequested"} <= emitted["jobmgr"]
    assert {"TasksAdmitted", "ResourcePoolCreated"} <= emitted["resmgr"]
    codec = default_codec()
    for core, types in sorted(emitted.items()):
        for etype in sorted(types):
            assert etype in CATALOG_EVENTS, f"{core} emits {etype}, not in the catalog"
            assert etype in codec.event_types, f"{core} emits {etype}, which has no schema"


def test_check_event_refuses_what_a_drifted_emitter_would_build() -> None:
    body = eb.tasks_admitted("j1", 0, pool="/a")
    for bad in ({k: v for k, v in body.items() if k != "pool"},  # no key field
                body | {"tasks": [{"job_id": "j1", "instance": "0", "run": 1}]},
                body | {"note": "x"}):
        with pytest.raises(EventCheckError):
            check_event(Event("TasksAdmitted", "/a", bad))


def test_every_event_the_real_cores_emit_in_a_small_cluster_passes_the_check() -> None:
    runner = cluster(seed=3, hosts=3)
    seen: dict[str, set[str]] = defaultdict(set)
    problems: list[str] = []
    publish = runner.publish

    def checked(events: Any, producer: str = "client") -> None:
        for ev in events:
            if producer != "client":
                seen[producer.removeprefix("agent-").split("-")[0]].add(ev.type)
                try:
                    check_event(ev)
                except EventCheckError as exc:
                    problems.append(f"{producer}: {exc}")
                rule = key_rule(ev.type)
                if isinstance(rule, Field):
                    value: Any = ev.body
                    for part in rule.path.split("."):
                        value = value[int(part) if isinstance(value, list) else part]
                    if key_of(ev.type, ev.body) != str(value):
                        problems.append(f"{producer}: {ev.type} keyed wrong")
                    if ".0." in rule.path:  # keyed by its first item: all in its partition
                        items, _, field = rule.path.partition(".0.")
                        n = topic_for_event(ev.type).partitions
                        if len({partition_for(str(i[field]).encode(), n)
                                for i in ev.body[items]}) != 1:
                            problems.append(f"{producer}: {ev.type} spans partitions")
        publish(events, producer)

    runner.publish = checked  # type: ignore[method-assign]
    try:
        runner.submit([batch_job(f"job-{i}", instances=2, duration_s=0.5) for i in range(4)])
        assert runner.run_until(runner.watch.all_terminal, max_ms=60_000)
        runner.submit([batch_job("long", instances=2, duration_s=600)])
        runner.run_for(3_000)
        runner.publish([Event("JobKillRequested", "long",
                              eb.job_kill_requested("long", reason="test"))])
        runner.publish([Event("ResourcePoolCreateRequested", "/lab",
                              _pool_request("ResourcePoolCreateRequested", "/lab",
                                            config=_config("lab")))])
        assert runner.run_until(runner.watch.all_terminal, max_ms=60_000)
        runner.kill("agent-host-1")
        runner.restart("agent-host-2")  # registers again, as a new incarnation
        runner.run_for(15_000)
    finally:
        runner.close()
    assert problems == []
    types = set().union(*seen.values())
    assert {"JobCreated", "TaskStateChanged", "JobStateChanged", "TaskKillRequested",
            "TasksAdmitted", "EntitlementUpdated", "ResourcePoolCreated", "PlacementMade",
            "TaskLaunchRequested", "OfferReceived", "HostLost", "HostRegistered",
            "HostStatusReported", "TaskStatusReported"} <= types, sorted(types)
    assert set(seen) >= {"jobmgr", "resmgr", "placement", "hostmgr", "host"}
