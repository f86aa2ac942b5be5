"""The what-if entitlement report and the `respool entitlement` command."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from peloton.cli.whatif_respool import register
from peloton.resmgr.whatif import PoolConfigError, entitlement_report

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "respool"


def load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((EXAMPLES / name).read_text())
    assert isinstance(doc, dict)
    return doc


def cpu(report: dict[str, Any], field: str = "entitlement") -> dict[str, float]:
    return {name: round(v[field]["cpu"], 1) for name, v in report["pools"].items()}


def test_user_guide_example_step_1() -> None:
    report = entitlement_report(load("entitlement-userguide.yaml"))
    assert cpu(report) == {"root": 100, "RP1": 10, "RP2": 45, "RP3": 45}
    assert report["warnings"] == []


def test_user_guide_example_step_2() -> None:
    doc = load("entitlement-userguide.yaml")
    doc["usage"]["RP1"]["demand"]["cpu"] = 50
    assert cpu(entitlement_report(doc)) == {"root": 100, "RP1": 33.3, "RP2": 33.3, "RP3": 33.3}


def test_peloton_nested_example() -> None:
    """Peloton's nested example; our exact max-min gives Peloton's own numbers here.

    Peloton's fair-share phase converges geometrically (stopping at 0.0009) and does not
    redistribute what limits cut off, so on other inputs its figures can be slightly
    lower than ours; on this example both reach 33.3 / 13.3 exactly.
    """
    report = entitlement_report(load("peloton-nested.yaml"))
    assert cpu(report) == {
        "root": 100,
        "respool1": 46.7,
        "respool11": 33.3,
        "respool12": 13.3,
        "respool2": 26.7,
        "respool21": 13.3,
        "respool22": 13.3,
        "respool3": 26.7,
    }
    r11 = report["pools"]["respool11"]["entitlement"]
    assert r11 == pytest.approx({"cpu": 33.333333, "memory": 333.333333, "disk": 1000, "gpu": 0})
    # every pool reserves 10 cpu, so respool1's children reserve 20 > its 10: a warning
    assert (
        "/respool1: resources.cpu.reservation: children reserve 20 in total, "
        "more than its reservation 10"
    ) in report["warnings"]


def test_revocable_example() -> None:
    report = entitlement_report(load("revocable.yaml"))
    assert cpu(report, "slack_entitlement") == {
        "root": 80,
        "respool1": 25,
        "respool11": 22.5,
        "respool12": 2.5,
        "respool2": 30,
        "respool21": 27.5,
        "respool22": 2.5,
        "respool3": 25,
    }
    r21 = report["pools"]["respool21"]
    assert (r21["slack_entitlement"]["memory"], r21["slack_entitlement"]["disk"]) == (15, 75)
    assert r21["nonslack_entitlement"]["memory"] == pytest.approx(r21["entitlement"]["memory"] - 15)


def test_report_shape_covers_every_pool_and_kind() -> None:
    report = entitlement_report(load("peloton-nested.yaml"))
    assert set(report) == {"pools", "warnings"}
    assert list(report["pools"])[0] == "root"
    for values in report["pools"].values():
        assert set(values) == {"entitlement", "slack_entitlement", "nonslack_entitlement"}
        for field in values.values():
            assert set(field) == {"cpu", "memory", "disk", "gpu"}
    json.dumps(report)  # plain data


def test_usage_on_an_inner_pool_is_a_warning() -> None:
    doc = load("peloton-nested.yaml")
    doc["usage"]["respool1"] = {"demand": {"cpu": 5}}
    report = entitlement_report(doc)
    assert (
        "usage.respool1: /respool1 is not a leaf pool; its usage is ignored" in report["warnings"]
    )


BASE: dict[str, Any] = {
    "capacity": {"cpu": 10},
    "pools": {"a": {"parent": "root", "resources": {"cpu": {"reservation": 1, "limit": 5}}}},
}


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ((), [], "document: must be a mapping, got list"),
        (("extra",), 1, "document: unknown field(s) extra"),
        (("capacity",), None, "capacity: must be a mapping"),
        (("capacity", "tpu"), 1, "capacity.tpu: unknown kind"),
        (("capacity", "cpu"), "ten", "capacity.cpu: must be a number, got 'ten'"),
        (("capacity", "cpu"), -1, "capacity.cpu: must be finite and >= 0, got -1"),
        (("pools",), [], "pools: must be a mapping of pool name to pool"),
        (("pools", "a", "parent"), "ghost", "pools.a.parent: unknown pool 'ghost'"),
        (("pools", "root"), {}, "pools.root: 'root' is the implicit root"),
        (("pools", "a/b"), {}, "pools.a/b: pool names must be non-empty strings without '/'"),
        (
            ("pools", "a", "resources", "cpu", "limit"),
            "x",
            "pools.a.resources.cpu.limit: must be a number",
        ),
        (("pools", "a", "colour"), "red", "pools.a: unknown field(s) colour"),
        (("usage",), {"ghost": {}}, "usage.ghost: unknown pool 'ghost'"),
        (("usage",), {"a": {"wish": {}}}, "usage.a: unknown field(s) wish"),
        (("usage",), {"a": {"demand": {"cpu": "x"}}}, "usage.a.demand.cpu: must be a number"),
    ],
)
def test_unparseable_input_raises_precise_errors(
    path: tuple[str, ...], value: object, message: str
) -> None:
    doc: Any = copy.deepcopy(BASE)
    if not path:
        doc = value
    else:
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    with pytest.raises(PoolConfigError) as info:
        entitlement_report(doc)
    assert message in str(info.value)


def test_missing_capacity_and_parent_cycles() -> None:
    with pytest.raises(PoolConfigError, match="capacity: missing"):
        entitlement_report({"pools": {}})
    cyclic = {
        "capacity": {"cpu": 1},
        "pools": {"a": {"parent": "b"}, "b": {"parent": "c"}, "c": {"parent": "a"}},
    }
    with pytest.raises(PoolConfigError, match=r"pools\.a\.parent: cycle a -> b -> c -> a"):
        entitlement_report(cyclic)


def test_invalid_rules_are_warnings_and_computation_goes_on() -> None:
    doc = copy.deepcopy(BASE)
    doc["pools"]["a"]["resources"]["cpu"] = {"reservation": 8, "limit": 4}
    report = entitlement_report(doc)
    assert report["warnings"] == ["/a: resources.cpu.limit: 4 is below reservation 8"]
    assert report["pools"]["a"]["entitlement"]["cpu"] == 4  # clamped to its limit


# ------------------------------------------------------------------------------- CLI


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    respool = typer.Typer()
    app.add_typer(respool, name="respool")
    register(respool)
    return app


def test_cli_table(cli: typer.Typer) -> None:
    result = CliRunner().invoke(
        cli, ["respool", "entitlement", str(EXAMPLES / "entitlement-userguide.yaml")]
    )
    assert result.exit_code == 0, result.output
    for text in ("RP1", "RP2", "45", "entitlement"):
        assert text in result.stdout


def test_cli_json(cli: typer.Typer) -> None:
    path = str(EXAMPLES / "entitlement-userguide.yaml")
    result = CliRunner().invoke(cli, ["respool", "entitlement", path, "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == entitlement_report(load("entitlement-userguide.yaml"))


def test_cli_errors_exit_2_with_message_on_stderr(cli: typer.Typer, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("capacity: {cpu: 1}\npools: {a: {parent: ghost}}\n")
    result = CliRunner().invoke(cli, ["respool", "entitlement", str(bad)])
    assert result.exit_code == 2
    assert "pools.a.parent: unknown pool 'ghost'" in result.stderr
    missing = CliRunner().invoke(cli, ["respool", "entitlement", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2 and "cannot read" in missing.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("capacity: [\n")
    result = CliRunner().invoke(cli, ["respool", "entitlement", str(broken)])
    assert result.exit_code == 2 and "not valid YAML/JSON" in result.stderr
