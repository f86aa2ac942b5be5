"""Pool config parsing (PoolConfigError) and per-config rules (error strings)."""

from __future__ import annotations

import pytest

from peloton.model.resources import Resources
from peloton.resmgr.domain.poolconfig import (
    PoolConfig,
    PoolConfigError,
    ReservationType,
    ResourceSpec,
    config_errors,
    parse_pool_config,
)

PELOTON_STYLE = {
    "name": "batch",
    "description": "batch jobs",
    "owningTeam": "infra",
    "ldapGroups": ["infra"],
    "policy": "PriorityFIFO",
    "resources": [
        {"kind": "cpu", "reservation": 12, "limit": 24, "share": 2},
        {"kind": "memory", "reservation": 4096, "limit": 8192, "share": 1, "type": "STATIC"},
    ],
    "controllerLimit": {"maxPercent": 10},
    "slackLimit": {"maxPercent": 30},
}


def test_parses_peloton_style_config_and_defaults_missing_kinds() -> None:
    cfg = parse_pool_config(PELOTON_STYLE)
    assert cfg.name == "batch"
    assert cfg.spec("cpu") == ResourceSpec(12, 24, 2, ReservationType.ELASTIC)
    assert cfg.spec("memory").type is ReservationType.STATIC
    assert cfg.spec("disk") == ResourceSpec(0, 0, 1, ReservationType.ELASTIC)
    assert cfg.spec("gpu") == ResourceSpec(0, 0, 1, ReservationType.ELASTIC)
    assert cfg.slack_limit_percent == 30
    assert cfg.controller_limit_percent == 10
    assert cfg.reservation == Resources(12, 4096, 0, 0)
    controller = cfg.controller_limit()
    assert controller is not None
    assert controller.as_dict() == pytest.approx({"cpu": 1.2, "memory": 409.6, "disk": 0, "gpu": 0})
    slack = cfg.slack_limit().as_dict()
    assert slack == pytest.approx({"cpu": 0, "memory": 1228.8, "disk": 0, "gpu": 0})  # no cpu


def test_mapping_form_and_flat_percent_fields() -> None:
    cfg = parse_pool_config(
        {
            "resources": {"cpu": {"reservation": 1, "limit": 2, "type": "static"}},
            "slack_limit_percent": 5,
        },
        name="x",
    )
    assert cfg.name == "x"
    assert cfg.spec("cpu") == ResourceSpec(1, 2, 1, ReservationType.STATIC)
    assert cfg.slack_limit_percent == 5
    assert cfg.controller_limit_percent is None and cfg.controller_limit() is None


def test_default_slack_limit_is_20_percent() -> None:
    assert parse_pool_config({"name": "a"}).slack_limit_percent == 20


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "pool: must be a mapping, got list"),
        ({"name": "a", "bogus": 1}, "pool: unknown field(s) bogus"),
        ({"name": 3}, "pool.name: must be a string"),
        (
            {"name": "a", "resources": [{"kind": "tpu"}]},
            "pool.resources[0].kind: unknown kind 'tpu'",
        ),
        ({"name": "a", "resources": [{"reservation": 1}]}, "pool.resources[0].kind: missing"),
        (
            {"name": "a", "resources": [{"kind": "cpu"}, {"kind": "cpu"}]},
            "pool.resources[1].kind: cpu given twice",
        ),
        (
            {"name": "a", "resources": {"cpu": {"limit": "lots"}}},
            "pool.resources.cpu.limit: must be a number",
        ),
        (
            {"name": "a", "resources": {"cpu": {"limit": True}}},
            "pool.resources.cpu.limit: must be a number",
        ),
        ({"name": "a", "resources": {"cpu": {"limit": float("inf")}}}, "must be finite"),
        (
            {"name": "a", "resources": {"cpu": {"type": "BURSTY"}}},
            "type: must be ELASTIC or STATIC",
        ),
        (
            {"name": "a", "resources": {"cpu": {"weight": 1}}},
            "pool.resources.cpu: unknown field(s) weight",
        ),
        ({"name": "a", "resources": 5}, "pool.resources: must be a list or a mapping"),
        ({"name": "a", "slackLimit": {}}, "pool.slackLimit.maxPercent: missing"),
        ({"name": "a", "slackLimit": {"maxPercent": 1}, "slack_limit_percent": 2}, "not both"),
        ({"name": "a", "policy": "FIFO"}, "pool.policy: only PriorityFIFO is supported"),
    ],
)
def test_unparseable_documents_raise_with_field_and_reason(doc: object, message: str) -> None:
    with pytest.raises(PoolConfigError) as info:
        parse_pool_config(doc)
    assert message in str(info.value)


def test_pool_config_error_is_a_value_error() -> None:
    assert issubclass(PoolConfigError, ValueError)


def test_rule_violations_are_listed_not_raised() -> None:
    cfg = PoolConfig.create(
        "a",
        {
            "cpu": ResourceSpec(reservation=10, limit=5),
            "memory": ResourceSpec(reservation=-1, limit=0),
            "disk": ResourceSpec(share=0),
        },
        slack_limit_percent=120,
        controller_limit_percent=-1,
    )
    assert config_errors(cfg, "/a") == [
        "/a: resources.cpu.limit: 5 is below reservation 10",
        "/a: resources.memory.reservation: -1 is negative",
        "/a: resources.disk.share: 0 must be positive",
        "/a: slackLimit.maxPercent: 120 is outside [0, 100]",
        "/a: controllerLimit.maxPercent: -1 is outside [0, 100]",
    ]


@pytest.mark.parametrize("name", ["", "a/b", "root"])
def test_bad_names(name: str) -> None:
    assert config_errors(PoolConfig(name), "/x")[0].startswith("/x: name:")


def test_valid_config_has_no_errors() -> None:
    assert config_errors(parse_pool_config(PELOTON_STYLE), "/batch") == []
