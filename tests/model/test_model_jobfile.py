"""Peloton v0 job files -> JobSubmitted bodies -> JobCreated, with every problem named."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from peloton.bus.codec import default_codec
from peloton.jobmgr.domain.validation import validate_submission
from peloton.model.jobfile import JobFileError, job_document_to_submitted, parse_job_file

EXAMPLES = sorted(p for d in ("jobs", "updates")
                  for p in (Path(__file__).resolve().parents[2] / "examples" / d).glob("*.yaml"))
POOLS = {"/", "/default", "/team", "/team/batch"}
LEAVES = {"/default", "/team/batch"}

PELOTON_FILE = textwrap.dedent("""\
    name: nightly-etl
    owningTeam: data-eng
    description: "extract, transform, load"
    labels:
      - key: team
        value: data
      - key: tier
        value: 2
    instanceCount: 4
    respoolID: /team/batch
    placementStrategy: SPREAD_JOB
    sla:
      priority: 3
      preemptible: true
      revocable: false
      minimumRunningInstances: 2
      maximumRunningInstances: 4
    defaultConfig:
      resource:
        cpuLimit: 1.5
        memLimitMb: 512
        diskLimitMb: 1024
        gpuLimit: 0
      command:
        value: ./etl --shard $PELOTON_INSTANCE_ID
        environment:
          variables:
            - name: MODE
              value: full
            - name: RETRIES
              value: 3
      constraint:
        type: LABEL_CONSTRAINT
        labelConstraint:
          kind: HOST
          condition: CONDITION_EQUAL
          label: {key: zone, value: us-east1}
          requirement: 1
      restartPolicy:
        maxFailures: 3
      labels: {component: etl}
      ports:
        - name: metrics
        - name: http
          envName: HTTP_PORT
      killGracePeriodSeconds: 30
    instanceConfig:
      3:
        resource:
          cpuLimit: 4
        command: ./etl --shard 3 --big
""")


def parse(text: str) -> dict:  # type: ignore[type-arg]
    return parse_job_file(text, "etl-1", 1_000)


def file_problems(text: str) -> list[str]:
    with pytest.raises(JobFileError) as info:
        parse(text)
    assert str(info.value) == "; ".join(info.value.problems)
    return info.value.problems


def all_problems(text: str, pools: set[str] | None = None,
                 leaves: set[str] | None = None) -> list[str]:
    """The job file's problems, or else the job manager's validation problems."""
    try:
        sub = parse(text)
    except JobFileError as exc:
        return exc.problems
    return validate_submission(sub, pools, leaves, 0)[1]


def test_a_peloton_job_file_becomes_a_job_submitted_body() -> None:
    sub = parse(PELOTON_FILE)
    default = sub["default_config"]
    assert {k: v for k, v in sub.items() if k not in ("default_config", "instance_config")} == {
        "job_id": "etl-1", "submitted_at": 1_000, "name": "nightly-etl", "owner": "data-eng",
        "description": "extract, transform, load", "type": "BATCH",
        "labels": {"team": "data", "tier": "2"}, "instance_count": 4, "respool": "/team/batch",
        "sla": {"priority": 3, "preemptible": True, "revocable": False,
                "minimum_running_instances": 2, "maximum_running_instances": 4,
                    "maximum_unavailable_instances": None},
        "placement_strategy": "SPREAD_JOB",
    }
    assert json.loads(default.pop("constraint_json")) == {
        "type": "LABEL_CONSTRAINT", "labelConstraint": {
            "kind": "HOST", "condition": "CONDITION_EQUAL",
            "label": {"key": "zone", "value": "us-east1"}, "requirement": 1}}
    assert default == {
        "cpu_limit": 1.5, "mem_limit_mb": 512.0, "disk_limit_mb": 1024.0, "gpu_limit": 0.0,
        "command": "./etl --shard $PELOTON_INSTANCE_ID",
        "env": {"MODE": "full", "RETRIES": "3"}, "max_failures": 3,
        "labels": {"component": "etl"}, "ports": ["metrics:PORT_METRICS", "http:HTTP_PORT"],
        "kill_grace_period_s": 30.0, "controller": None, "revocable": None,
        "health_check_json": None, "volume": None,
    }
    override = sub["instance_config"]["3"]
    assert override["cpu_limit"] == 4.0 and override["command"] == "./etl --shard 3 --big"
    assert [k for k, v in override.items() if v is not None] == ["cpu_limit", "command"]


def test_a_peloton_job_file_round_trips_to_job_created() -> None:
    codec = default_codec()
    sub = parse(PELOTON_FILE)
    assert codec.decode(codec.encode("JobSubmitted", sub)) == ("JobSubmitted", sub)
    created, problems = validate_submission(sub, POOLS, LEAVES, 2_000)
    assert problems == [] and created is not None
    assert codec.decode(codec.encode("JobCreated", created)) == ("JobCreated", created)
    assert created["gang_size"] == 2 and created["placement_strategy"] == "SPREAD"
    assert created["respool"] == "/team/batch" and created["priority"] == 3
    big = created["instance_tasks"]["3"]
    assert big["resources"] == {"cpu": 4.0, "memory": 512.0, "disk": 1024.0, "gpu": 0.0}
    assert big["command"] == "./etl --shard 3 --big"
    assert big["env"] == created["default_task"]["env"]  # inherited from defaultConfig
    assert set(created["instance_tasks"]) == {"3"}


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_job_file_validates(path: Path) -> None:
    sub = parse_job_file(path.read_text(), path.stem, 0)
    # the demo creates /services and /batch (examples/respool) before it submits them
    leaves = {"/default", "/services", "/batch"}
    created, problems = validate_submission(sub, {"/", *leaves}, leaves, 0)
    assert problems == [] and created is not None
    default_codec().encode("JobCreated", created)


def test_there_are_example_job_files() -> None:
    assert len(EXAMPLES) >= 2


def test_json_text_and_a_parsed_document_give_the_same_body() -> None:
    doc = yaml.safe_load(PELOTON_FILE)
    assert parse(json.dumps(doc)) == parse(PELOTON_FILE)
    assert job_document_to_submitted(doc, "etl-1", 1_000) == parse(PELOTON_FILE)


def test_short_forms_and_aliases() -> None:
    sub = parse(textwrap.dedent("""\
        name: short
        owner: me
        type: batch
        respool: /default
        labels: {team: a}
        instanceCount: 1
        defaultConfig:
          resource: {cpuLimit: 1}
          command: echo hi
    """))
    assert sub["owner"] == "me" and sub["type"] == "BATCH" and sub["labels"] == {"team": "a"}
    assert sub["default_config"]["command"] == "echo hi"
    env = parse("name: e\ndefaultConfig:\n  command:\n    value: x\n"
                "    environment: {variables: {A: 1}}\n")["default_config"]["env"]
    assert env == {"A": "1"}


def test_omitted_fields_get_peloton_defaults() -> None:
    sub = parse("name: tiny\n")
    assert sub["respool"] == "/default" and sub["type"] == "BATCH"
    assert sub["instance_count"] == 0 and sub["sla"] == {
        "priority": 0, "preemptible": True, "revocable": False,
        "minimum_running_instances": 1, "maximum_running_instances": 0,
        "maximum_unavailable_instances": None}
    assert set(sub["default_config"].values()) == {None}


# ---------------------------------------------------------------- file problems

UNKNOWN_FIELDS = [
    ("colour: red\n", "colour: unknown field"),
    ("sla: {priority: 1, urgency: 2}\n", "sla.urgency: unknown field"),
    ("defaultConfig: {cpu: 1}\n", "defaultConfig.cpu: unknown field"),
    ("defaultConfig: {resource: {cores: 2}}\n", "defaultConfig.resource.cores: unknown field"),
    ("defaultConfig: {restartPolicy: {maxRetries: 2}}\n",
     "defaultConfig.restartPolicy.maxRetries: unknown field"),
    ("defaultConfig: {command: {value: x, user: root}}\n",
     "defaultConfig.command.user: unknown field"),
    ("instanceConfig: {1: {resource: {cpu: 2}}}\n",
     "instanceConfig.1.resource.cpu: unknown field"),
]


@pytest.mark.parametrize(("extra", "problem"), UNKNOWN_FIELDS,
                         ids=[p for _, p in UNKNOWN_FIELDS])
def test_unknown_fields_are_named_with_their_path(extra: str, problem: str) -> None:
    assert file_problems("name: x\ninstanceCount: 2\n" + extra) == [problem]


WRONG_TYPES = [
    ("instanceCount: 2.5\n", "instanceCount: must be an integer, got 2.5"),
    ("instanceCount: two\n", "instanceCount: must be an integer, got 'two'"),
    ("name: [a]\n", "name: must be a string, got list"),
    ("sla: 3\n", "sla: must be a mapping, got int"),
    ("sla: {preemptible: 'yes'}\n", "sla.preemptible: must be true or false, got 'yes'"),
    ("sla: {priority: high}\n", "sla.priority: must be an integer, got 'high'"),
    ("defaultConfig: {resource: {cpuLimit: two}}\n",
     "defaultConfig.resource.cpuLimit: must be a number, got 'two'"),
    ("defaultConfig: {resource: {cpuLimit: true}}\n",
     "defaultConfig.resource.cpuLimit: must be a number, got True"),
    ("defaultConfig: {restartPolicy: {maxFailures: 1.5}}\n",
     "defaultConfig.restartPolicy.maxFailures: must be an integer, got 1.5"),
    ("defaultConfig: {command: {value: x, environment: 5}}\n",
     "defaultConfig.command.environment: must list {name, value} variables"),
    ("defaultConfig: {ports: [{envName: X}]}\n",
     "defaultConfig.ports[0]: must be {name: ..., envName: ...}"),
    ("labels: [a]\n", "labels[0]: must be {key: ..., value: ...}"),
    ("labels: 5\n", "labels: must be a list of {key, value} or a mapping"),
    ("instanceConfig: [1]\n", "instanceConfig: must map instance numbers to overrides"),
    ("defaultConfig: {controller: 'yes'}\n",
     "defaultConfig.controller: must be true or false, got 'yes'"),
    ("instanceConfig: {0: {revocable: 1}}\n",
     "instanceConfig.0.revocable: must be true or false, got 1"),
]


@pytest.mark.parametrize(("extra", "problem"), WRONG_TYPES, ids=[p for _, p in WRONG_TYPES])
def test_wrong_types_are_named_with_their_path(extra: str, problem: str) -> None:
    assert file_problems("name: x\n" + extra) == [problem]


def test_every_file_problem_is_reported_at_once() -> None:
    assert sorted(file_problems(textwrap.dedent("""\
        name: x
        colour: red
        instanceCount: many
        sla: {preemptible: 1}
        defaultConfig:
          resource: {cpuLimit: lots, cores: 1}
    """))) == [
        "colour: unknown field",
        "defaultConfig.resource.cores: unknown field",
        "defaultConfig.resource.cpuLimit: must be a number, got 'lots'",
        "instanceCount: must be an integer, got 'many'",
        "sla.preemptible: must be true or false, got 1",
    ]


def test_text_that_is_not_yaml() -> None:
    problems = file_problems("name: [unclosed\n")
    assert len(problems) == 1 and problems[0].startswith("not valid YAML: ")


def test_an_empty_file() -> None:
    assert file_problems("") == ["job file: must be a mapping"]


# --------------------------------------------- problems found by the job manager
# The file reader checks shapes; the job manager's validator checks values. Both speak
# in the job file's own field names, so a user sees one vocabulary.

BASE = textwrap.dedent("""\
    name: x
    instanceCount: 3
    defaultConfig:
      resource: {cpuLimit: 1, memLimitMb: 64}
      command: {value: run}
""")
VALUE_PROBLEMS = [
    ("cpuLimit zero", BASE.replace("cpuLimit: 1", "cpuLimit: 0"), None,
     ["defaultConfig.resource.cpuLimit: must be > 0 (got 0.0)"]),
    ("cpuLimit negative", BASE.replace("cpuLimit: 1", "cpuLimit: -0.5"), None,
     ["defaultConfig.resource.cpuLimit: must be > 0 (got -0.5)"]),
    ("cpuLimit missing", BASE.replace("cpuLimit: 1, ", ""), None,
     ["defaultConfig.resource.cpuLimit: must be > 0 (got None)"]),
    ("instanceConfig key past the end", BASE + "instanceConfig: {7: {resource: {cpuLimit: 2}}}\n",
     None, ["instanceConfig.7: not an instance number in 0..2"]),
    ("instanceConfig key not a number", BASE + "instanceConfig: {last: {}}\n", None,
     ["instanceConfig.last: not an instance number in 0..2"]),
    ("instanceConfig bad override", BASE + "instanceConfig: {1: {resource: {cpuLimit: 0}}}\n",
     None, ["instanceConfig.1.resource.cpuLimit: must be > 0 (got 0.0)"]),
    ("revocable without preemptible", BASE + "sla: {revocable: true, preemptible: false}\n",
     None, ["sla.revocable: revocable jobs must also be preemptible"]),
    ("minimumRunningInstances above instanceCount", BASE + "sla: {minimumRunningInstances: 4}\n",
     None, ["sla.minimumRunningInstances: must be 1..instanceCount (3), got 4"]),
    ("bad constraint", BASE.replace("command: {value: run}",
                                    "command: {value: run}\n  constraint: {maxPerHost: 0}"),
     None, ["defaultConfig.constraint: constraint.maxPerHost: must be a positive integer, "
            "got 0"]),
    ("constraint with an unknown field", BASE.replace(
        "command: {value: run}", "command: {value: run}\n  constraint: {hostLabel: {key: a, "
        "equals: b}, weight: 2}"),
     None, ["defaultConfig.constraint: constraint.weight: unknown field next to hostLabel"]),
    ("unknown pool", BASE + "respool: /nope\n", POOLS,
     ["respool: resource pool /nope does not exist"]),
    ("pool with children", BASE + "respool: /team\n", POOLS,
     ["respool: /team has child pools; jobs go to leaf pools"]),
    ("unknown pool, pools not known yet", BASE + "respool: /nope\n", None, []),
    ("no instanceCount", BASE.replace("instanceCount: 3\n", ""), None,
     ["instanceCount: must be 1..100000, got 0"]),
    ("controller on instance 1", BASE + "instanceConfig: {1: {controller: true}}\n", None,
     ["instanceConfig.1.controller: only instance 0 may be a controller task"]),
    ("controller for every instance", BASE.replace("command: {value: run}",
                                                   "command: {value: run}\n  controller: true"),
     None, ["defaultConfig.controller: only instance 0 may be a controller task (set "
            "controller in instanceConfig.0 instead)"]),
    ("revocable task, job not preemptible",
     BASE + "sla: {preemptible: false}\ninstanceConfig: {2: {revocable: true}}\n", None,
     ["instanceConfig.2.revocable: revocable tasks need a preemptible job (sla.preemptible)"]),
]


@pytest.mark.parametrize(("name", "text", "pools", "expected"), VALUE_PROBLEMS,
                         ids=[row[0] for row in VALUE_PROBLEMS])
def test_value_problems_are_named_in_job_file_terms(name: str, text: str,
                                                    pools: set[str] | None,
                                                    expected: list[str]) -> None:
    assert all_problems(text, pools, LEAVES if pools else None) == expected


# ------------------------------------------------------------------------ bugs


@pytest.mark.parametrize(("text", "kind"), [("- a\n", "list"), ("hello\n", "str")])
def test_a_job_file_that_is_not_a_mapping_says_so(text: str, kind: str) -> None:
    assert file_problems(text) == [f"job file: must be a mapping, got {kind}"]


def test_ports_that_are_not_a_list_say_so() -> None:
    problems = file_problems("name: x\ndefaultConfig: {ports: 5}\n")
    assert len(problems) == 1 and problems[0].startswith("defaultConfig.ports: must be a list")


def test_controller_and_task_level_revocable_reach_job_created() -> None:
    text = BASE + textwrap.dedent("""\
        sla: {preemptible: true}
        instanceConfig:
          0: {controller: true}
          2: {revocable: true}
    """)
    sub = parse(text)
    assert sub["default_config"]["controller"] is None  # not set: as the default
    assert sub["instance_config"]["0"]["controller"] is True
    assert sub["instance_config"]["2"]["revocable"] is True
    created, problems = validate_submission(sub, None, None, 0)
    assert problems == [] and created is not None
    codec = default_codec()
    assert codec.decode(codec.encode("JobCreated", created)) == ("JobCreated", created)
    tasks = created["instance_tasks"]
    assert sorted(tasks) == ["0", "2"]
    assert (tasks["0"]["controller"], tasks["0"]["revocable"]) == (True, False)
    assert (tasks["2"]["controller"], tasks["2"]["revocable"]) == (False, True)
    assert (created["default_task"]["controller"], created["default_task"]["revocable"]) == (
        False, False)


SERVICE_FILE = """\
name: web
type: SERVICE
instanceCount: 3
sla: {maximumUnavailableInstances: 1}
defaultConfig:
  resource: {cpuLimit: 0.5}
  command: {value: ./serve}
  ports: [{name: http}]
  healthCheck:
    type: HTTP
    httpGet: {path: /healthz, port: http}
    initialIntervalSecs: 2
  volume: {containerPath: /data, sizeMB: 100}
"""


def test_a_service_file_keeps_its_health_check_volume_and_budget() -> None:
    sub = parse(SERVICE_FILE)
    assert sub["type"] == "SERVICE"
    assert sub["sla"]["maximum_unavailable_instances"] == 1
    cfg = sub["default_config"]
    assert cfg["volume"] == "/data"
    assert json.loads(cfg["health_check_json"]) == {
        "type": "HTTP", "httpCheck": {"path": "/healthz", "port": "http"},
        "initialIntervalSecs": 2, "intervalSecs": 10, "maxConsecutiveFailures": 3,
        "timeoutSecs": 20}


def test_service_file_problems_are_all_reported() -> None:
    bad = SERVICE_FILE.replace("path: /healthz", "path: healthz").replace(
        "containerPath: /data", "sizeMB: x, containerPath: ''").replace(", sizeMB: 100", "")
    with pytest.raises(JobFileError) as err:
        parse(bad)
    assert err.value.problems == [
        "defaultConfig.healthCheck.httpGet.path: must start with /",
        "defaultConfig.volume.sizeMB: must be a number, got 'x'",
        "defaultConfig.volume.containerPath: must name the path the task sees"]
