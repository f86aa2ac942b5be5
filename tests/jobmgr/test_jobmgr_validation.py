"""validate_submission: precise "field: reason" problems, and the JobCreated it builds."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import pytest
from event_bodies import job_submitted
from hypothesis import given, settings

from peloton.bus.codec import default_codec
from peloton.jobmgr.domain.validation import (
    DEFAULT_GRACE_S,
    MAX_FAILURES_CAP,
    MAX_INSTANCES,
    validate_submission,
)

Body = dict[str, Any]
POOLS = {"/", "/default", "/team", "/team/batch"}
LEAVES = {"/default", "/team/batch"}


def good(instances: int = 3, **kw: Any) -> Body:
    return job_submitted("j1", instances, **kw)


def problems_of(sub: Body, pools: set[str] | None = None,
                leaves: set[str] | None = None) -> list[str]:
    created, problems = validate_submission(sub, pools, leaves, 5)
    assert (created is None) == bool(problems)
    return problems


def changed(edit: Callable[[Body], None], **kw: Any) -> Body:
    sub = copy.deepcopy(good(**kw))
    edit(sub)
    return sub


def _set(path: str, value: Any) -> Callable[[Body], None]:
    def edit(sub: Body) -> None:
        *parents, last = path.split(".")
        target = sub
        for p in parents:
            target = target[p]
        target[last] = value
    return edit


def test_a_good_submission_becomes_job_created() -> None:
    sub = good(3, cpu=0.5, mem=64, max_failures=2, priority=4, ports=("http",), grace_s=3,
               instance_cpu={2: 1.5})
    created, problems = validate_submission(sub, POOLS, LEAVES, 77)
    assert problems == []
    spec: dict[str, Any] = {
        "resources": {"cpu": 0.5, "memory": 64.0, "disk": 0.0, "gpu": 0.0},
        "command": "echo hi", "env": {}, "constraint_json": None, "max_failures": 2,
        "labels": {}, "ports": ["http:PORT_HTTP"], "kill_grace_period_s": 3.0,
        "controller": False, "revocable": False, "health_check_json": None, "volume": None}
    assert created == {
        "job_id": "j1", "at": 77, "name": "job", "owner": "team-test", "type": "BATCH",
        "respool": "/default", "labels": {}, "instance_count": 3, "priority": 4,
        "preemptible": True, "revocable": False, "gang_size": 1, "placement_strategy": "PACK",
        "default_task": spec,
        "instance_tasks": {"2": {**spec, "resources": {**spec["resources"], "cpu": 1.5}}},
        "max_unavailable": None,
    }
    default_codec().encode("JobCreated", created)  # matches its schema


def test_an_override_equal_to_the_default_is_not_kept() -> None:
    created, _ = validate_submission(good(2, cpu=1, instance_cpu={1: 1}), None, None, 0)
    assert created is not None and created["instance_tasks"] == {}


def test_defaults_for_grace_and_strategy() -> None:
    created, _ = validate_submission(good(1), None, None, 0)
    assert created is not None
    assert created["default_task"]["kill_grace_period_s"] == DEFAULT_GRACE_S
    assert created["placement_strategy"] == "PACK"


@pytest.mark.parametrize(("given_", "stored"), [(None, "PACK"), ("PACK_HOST", "PACK"),
                                                ("PACK", "PACK"), ("SPREAD_JOB", "SPREAD"),
                                                ("SPREAD", "SPREAD")])
def test_placement_strategy_names(given_: str | None, stored: str) -> None:
    created, _ = validate_submission(changed(_set("placement_strategy", given_)), None, None, 0)
    assert created is not None and created["placement_strategy"] == stored


@pytest.mark.parametrize(("min_running", "revocable", "gang"),
                         [(1, False, 1), (3, False, 3), (2, False, 2), (3, True, 1)])
def test_minimum_running_instances_makes_a_gang(min_running: int, revocable: bool,
                                                gang: int) -> None:
    created, problems = validate_submission(good(3, min_running=min_running,
                                                 revocable=revocable), None, None, 0)
    assert problems == [] and created is not None and created["gang_size"] == gang


D = "defaultConfig"
BAD_FIELDS = [
    ("cpuLimit zero", _set("default_config.cpu_limit", 0.0),
     [f"{D}.resource.cpuLimit: must be > 0 (got 0.0)"]),
    ("cpuLimit negative", _set("default_config.cpu_limit", -1.5),
     [f"{D}.resource.cpuLimit: must be > 0 (got -1.5)"]),
    ("cpuLimit missing", _set("default_config.cpu_limit", None),
     [f"{D}.resource.cpuLimit: must be > 0 (got None)"]),
    ("memLimitMb negative", _set("default_config.mem_limit_mb", -1.0),
     [f"{D}.resource.memLimitMb: must be >= 0 (got -1.0)"]),
    ("diskLimitMb negative", _set("default_config.disk_limit_mb", -2.0),
     [f"{D}.resource.diskLimitMb: must be >= 0 (got -2.0)"]),
    ("gpuLimit fraction", _set("default_config.gpu_limit", 0.5),
     [f"{D}.resource.gpuLimit: must be a whole number of GPUs (got 0.5)"]),
    ("gpuLimit negative", _set("default_config.gpu_limit", -1.0),
     [f"{D}.resource.gpuLimit: must be >= 0 (got -1.0)"]),
    ("command empty", _set("default_config.command", "  "),
     [f"{D}.command.value: must not be empty"]),
    ("command missing", _set("default_config.command", None),
     [f"{D}.command.value: must not be empty"]),
    ("maxFailures too many", _set("default_config.max_failures", MAX_FAILURES_CAP + 1),
     [f"{D}.restartPolicy.maxFailures: must be 0..100 (got 101)"]),
    ("maxFailures negative", _set("default_config.max_failures", -1),
     [f"{D}.restartPolicy.maxFailures: must be 0..100 (got -1)"]),
    ("grace negative", _set("default_config.kill_grace_period_s", -1.0),
     [f"{D}.killGracePeriodSeconds: must be >= 0 (got -1.0)"]),
    ("constraint not JSON", _set("default_config.constraint_json", "{nope"),
     [f"{D}.constraint: Expecting property name enclosed in double quotes: line 1 column 2 "
      "(char 1)"]),
    ("constraint unknown kind", _set("default_config.constraint_json", json.dumps(
        {"labelConstraint": {"kind": "RACK", "condition": "CONDITION_EQUAL",
                             "label": {"key": "a", "value": "b"}}})),
     [f"{D}.constraint: constraint.labelConstraint.kind: unknown kind 'RACK' "
      "(expected HOST or TASK)"]),
    ("constraint soft inside or", _set("default_config.constraint_json", json.dumps(
        {"orConstraint": {"constraints": [{"spread": "zone"}]}})),
     [f"{D}.constraint: constraint.orConstraint.constraints[0]: SpreadConstraint is soft; "
      "soft constraints may only appear at the top level or inside ANDs from the top"]),
    ("revocable without preemptible", _set("sla", {
        "priority": 0, "preemptible": False, "revocable": True,
        "minimum_running_instances": 1, "maximum_running_instances": 0}),
     ["sla.revocable: revocable jobs must also be preemptible"]),
    ("minimumRunningInstances above instanceCount", _set("sla.minimum_running_instances", 4),
     ["sla.minimumRunningInstances: must be 1..instanceCount (3), got 4"]),
    ("minimumRunningInstances zero", _set("sla.minimum_running_instances", 0),
     ["sla.minimumRunningInstances: must be 1..instanceCount (3), got 0"]),
    ("maximumRunningInstances above instanceCount", _set("sla.maximum_running_instances", 5),
     ["sla.maximumRunningInstances: must be 0 (no cap) or between minimumRunningInstances "
      "and instanceCount, got 5"]),
    ("priority negative", _set("sla.priority", -1), ["sla.priority: must be >= 0, got -1"]),
    ("job id with a space", _set("job_id", "my job"),
     ["job_id: 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"]),
    ("job id starting with a dash", _set("job_id", "-j"),
     ["job_id: 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"]),
    ("job id too long", _set("job_id", "j" * 129),
     ["job_id: 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"]),
    ("name empty", _set("name", " "), ["name: must not be empty"]),
    ("unknown job type", _set("type", "CRON"),
     ["type: must be one of BATCH, SERVICE, STATEFUL, DAEMON, got CRON"]),
    ("service gang", lambda sub: (_set("type", "SERVICE")(sub),
                                  _set("sla.minimum_running_instances", 2)(sub)),
     ["sla.minimumRunningInstances: SERVICE, STATEFUL and DAEMON jobs are not gang "
      "scheduled and take no running-instance bounds"]),
    ("daemon with instanceCount", _set("type", "DAEMON"),
     ["instanceCount: a DAEMON job runs one instance on every matching host; do not set "
      "it (got 3)"]),
    ("stateful without volume", _set("type", "STATEFUL"),
     ["defaultConfig.volume: a STATEFUL job needs a volume {containerPath: ...} on every "
      "task"]),
    ("batch with a volume", _set("default_config.volume", "/data"),
     ["defaultConfig.volume: only SERVICE and STATEFUL jobs keep a volume (use type: "
      "STATEFUL)"]),
    ("batch with a health check", _set("default_config.health_check_json", json.dumps(
        {"type": "COMMAND", "commandCheck": {"command": "true"}})),
     ["defaultConfig.healthCheck: only SERVICE, STATEFUL and DAEMON tasks take a health "
      "check (a batch task's exit is its result)"]),
    ("maximumUnavailable above instanceCount",
     _set("sla.maximum_unavailable_instances", 4),
     ["sla.maximumUnavailableInstances: must be 0..instanceCount (3), got 4"]),
    ("no instances", _set("instance_count", 0), ["instanceCount: must be 1..100000, got 0"]),
    ("too many instances", _set("instance_count", MAX_INSTANCES + 1),
     ["instanceCount: must be 1..100000, got 100001"]),
    ("unknown strategy", _set("placement_strategy", "RANDOM"),
     ["placementStrategy: must be PACK_HOST or SPREAD_JOB, got RANDOM"]),
    ("instanceConfig key past the end", _set("instance_config", {"3": {}}),
     ["instanceConfig.3: not an instance number in 0..2"]),
    ("instanceConfig key not a number", _set("instance_config", {"first": {}}),
     ["instanceConfig.first: not an instance number in 0..2"]),
    ("instanceConfig key negative", _set("instance_config", {"-1": {}}),
     ["instanceConfig.-1: not an instance number in 0..2"]),
]


@pytest.mark.parametrize(("name", "edit", "expected"), BAD_FIELDS,
                         ids=[row[0] for row in BAD_FIELDS])
def test_bad_fields_are_named_precisely(name: str, edit: Callable[[Body], None],
                                        expected: list[str]) -> None:
    sub = copy.deepcopy(good(3))
    edit(sub)
    assert problems_of(sub) == expected


def test_a_bad_instance_override_names_the_instance() -> None:
    sub = good(3)
    sub["instance_config"] = {"1": {**sub["default_config"], "cpu_limit": 0.0,
                                    "command": None}}
    assert problems_of(sub) == ["instanceConfig.1.resource.cpuLimit: must be > 0 (got 0.0)"]


def test_every_problem_is_reported_at_once() -> None:
    sub = good(3, cpu=0, min_running=9)
    sub["name"] = ""
    sub["instance_config"] = {"5": {}}
    assert problems_of(sub) == [
        "name: must not be empty",
        "sla.minimumRunningInstances: must be 1..instanceCount (3), got 9",
        "defaultConfig.resource.cpuLimit: must be > 0 (got 0.0)",
        "instanceConfig.5: not an instance number in 0..2",
    ]


@pytest.mark.parametrize(("pool", "expected"), [
    ("/default", []),
    ("/team/batch", []),
    ("/nope", ["respool: resource pool /nope does not exist"]),
    ("/team", ["respool: /team has child pools; jobs go to leaf pools"]),
])
def test_the_pool_must_be_a_known_leaf_once_pools_are_known(pool: str,
                                                            expected: list[str]) -> None:
    assert problems_of(good(1, respool=pool), POOLS, LEAVES) == expected


def test_pools_are_not_checked_before_any_are_known() -> None:
    assert problems_of(good(1, respool="/nope"), None, None) == []


# ------------------------------------------------------------------ property

finite = st.floats(-2, 1e4, allow_nan=False, allow_infinity=False)


@st.composite
def submissions(draw: st.DrawFn) -> Body:
    """Schema-valid JobSubmitted bodies with arbitrary (finite) field values."""
    def task_config(default: bool) -> Body:
        maybe = (lambda s: s) if default else (lambda s: st.none() | s)
        return {
            "cpu_limit": draw(st.none() | finite), "mem_limit_mb": draw(maybe(finite)),
            "disk_limit_mb": draw(st.none() | finite),
            "gpu_limit": draw(st.none() | st.sampled_from([0.0, 1.0, 0.5, -1.0])),
            "command": draw(st.none() | st.sampled_from(["", " ", "run"])),
            "env": draw(st.none() | st.just({"A": "1"})),
            "constraint_json": draw(st.none() | st.sampled_from(
                ['{"maxPerHost": 1}', "[]", "{", '{"spread": "zone"}', "7"])),
            "max_failures": draw(st.none() | st.integers(-2, 102)),
            "labels": None, "ports": draw(st.none() | st.just(["http:PORT_HTTP"])),
            "kill_grace_period_s": draw(st.none() | finite),
        }

    n = draw(st.integers(-1, 5))
    return {
        "job_id": draw(st.sampled_from(["j1", "", "-x", "a.b_c-9"])),
        "submitted_at": 0, "name": draw(st.sampled_from(["x", ""])), "owner": "",
        "description": "", "type": draw(st.sampled_from(["BATCH", "SERVICE"])), "labels": {},
        "instance_count": n, "respool": draw(st.sampled_from(sorted(POOLS) + ["/x"])),
        "sla": {"priority": draw(st.integers(-1, 3)), "preemptible": draw(st.booleans()),
                "revocable": draw(st.booleans()),
                "minimum_running_instances": draw(st.integers(0, 6)),
                "maximum_running_instances": draw(st.integers(0, 6))},
        "default_config": task_config(True),
        "instance_config": {draw(st.sampled_from(["0", "1", "9", "x"])): task_config(False)
                            for _ in range(draw(st.integers(0, 2)))},
        "placement_strategy": draw(st.sampled_from([None, "PACK_HOST", "SPREAD_JOB", "X"])),
    }


@settings(max_examples=80, deadline=None, derandomize=True)
@given(submissions(), st.booleans())
def test_every_submission_gets_a_schema_valid_answer(sub: Body, pools_known: bool) -> None:
    codec = default_codec()
    codec.encode("JobSubmitted", sub)  # the generator makes what a producer could publish
    before = copy.deepcopy(sub)
    created, problems = validate_submission(sub, POOLS if pools_known else None,
                                            LEAVES if pools_known else None, 9)
    assert sub == before  # the input is not modified
    if created is None:
        assert problems and all(": " in p for p in problems)
    else:
        assert problems == []
        codec.decode(codec.encode("JobCreated", created))
        assert created["default_task"]["resources"]["cpu"] > 0
        assert 1 <= created["instance_count"] <= MAX_INSTANCES


# ------------------------------------------------------------------------ bugs


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_non_finite_resources_are_rejected(value: float) -> None:
    sub = good(1)
    sub["default_config"]["cpu_limit"] = value
    assert problems_of(sub) != []
    sub = good(1)
    sub["default_config"]["mem_limit_mb"] = value
    assert problems_of(sub) != []


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_non_finite_gpu_limit_is_a_problem_not_a_crash(value: float) -> None:
    sub = good(1)
    sub["default_config"]["gpu_limit"] = value
    assert problems_of(sub) == [f"defaultConfig.resource.gpuLimit: must be >= 0 (got {value})"]


def _service(kind: str = "SERVICE", **task: Any) -> Body:
    sub = good(2)
    sub["type"] = kind
    sub["sla"]["maximum_unavailable_instances"] = 1
    sub["default_config"].update(task)
    return sub


def test_a_service_keeps_its_health_check_and_budget() -> None:
    check = json.dumps({"type": "HTTP", "httpCheck": {"path": "/health", "port": "http"},
                        "intervalSecs": 2})
    created, problems = validate_submission(_service(health_check_json=check), None, None, 9)
    assert problems == [] and created is not None
    assert created["type"] == "SERVICE" and created["max_unavailable"] == 1
    stored = json.loads(created["default_task"]["health_check_json"])
    assert stored["httpCheck"] == {"path": "/health", "port": "http"}
    assert stored["intervalSecs"] == 2 and stored["maxConsecutiveFailures"] == 3  # default
    default_codec().encode("JobCreated", created)


@pytest.mark.parametrize("kind", ["SERVICE", "STATEFUL"])
def test_a_service_with_a_volume_is_stateful(kind: str) -> None:
    created, problems = validate_submission(_service(kind, volume="/data"), None, None, 9)
    assert problems == [] and created is not None
    assert created["type"] == "STATEFUL"
    assert created["default_task"]["volume"] == "/data"


def test_a_daemon_starts_with_no_instances() -> None:
    sub = _service("DAEMON")
    sub["instance_count"] = 0
    created, problems = validate_submission(sub, None, None, 9)
    assert problems == [] and created is not None
    assert created["type"] == "DAEMON" and created["instance_count"] == 0


def test_a_bad_health_check_is_named_by_its_field() -> None:
    bad = json.dumps({"type": "HTTP", "httpCheck": {"path": "health", "port": 80}})
    assert problems_of(_service(health_check_json=bad)) == [
        "defaultConfig.healthCheck.httpCheck.path: must start with /"]
