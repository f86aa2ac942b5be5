"""What-if commands (`respool entitlement`, `placement plan`) report every problem at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from peloton.cli import placement_cmd, whatif_respool
from peloton.cli.whatif_check import scenario_problems
from peloton.resmgr.whatif import PoolConfigError, entitlement_report

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

BAD = """\
capacity: {cpu: 100, memory: -1, bogus: 3}
extra: 1
pools:
  a: {parent: root, resources: {cpu: {reservation: x}, gpu: {share: 1, foo: 2}}}
  b: {parent: nope, policy: LIFO}
  c: {parent: d}
  d: {parent: c}
  e: {resources: [{kind: cpu, limit: y}, {kind: cpu}]}
usage:
  zz: {}
  a: {demand: {cpu: -3}, other: 1}
"""


def app() -> typer.Typer:
    root = typer.Typer()
    respool = typer.Typer()
    whatif_respool.register(respool)
    root.add_typer(respool, name="respool")
    placement_cmd.register(root)
    return root


def test_entitlement_reports_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(BAD)
    result = runner.invoke(app(), ["respool", "entitlement", str(path)])
    assert result.exit_code == 2 and result.stdout == ""
    lines = [line.strip() for line in result.stderr.splitlines()[1:]]
    assert lines == [
        "document: unknown field(s) extra",
        "capacity.memory: must be finite and >= 0, got -1",
        "capacity.bogus: unknown kind (known: cpu, memory, disk, gpu)",
        "pools.a.resources.cpu.reservation: must be a number, got 'x'",
        "pools.a.resources.gpu: unknown field(s) foo",
        "pools.b.parent: unknown pool 'nope'",
        "pools.b.policy: only PriorityFIFO is supported, got 'LIFO'",
        "pools.e.resources[0].limit: must be a number, got 'y'",
        "pools.e.resources[1].kind: cpu given twice",
        "pools.c.parent: cycle c -> d -> c",
        "usage.zz: unknown pool 'zz'",
        "usage.a: unknown field(s) other",
        "usage.a.demand.cpu: must be finite and >= 0, got -3",
    ]


def test_entitlement_yaml_output(tmp_path: Path) -> None:
    example = str(EXAMPLES / "respool" / "entitlement-userguide.yaml")
    as_json = runner.invoke(app(), ["respool", "entitlement", example, "-o", "json"])
    as_yaml = runner.invoke(app(), ["respool", "entitlement", example, "-o", "yaml"])
    assert as_json.exit_code == as_yaml.exit_code == 0
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)


amounts = st.one_of(st.integers(-5, 50), st.just("x"), st.just(float("nan")))
docs = st.fixed_dictionaries({
    "capacity": st.dictionaries(st.sampled_from(["cpu", "memory", "tpu"]), amounts,
                                max_size=3),
    "pools": st.dictionaries(
        st.sampled_from(["a", "b", "c"]),
        st.fixed_dictionaries({"parent": st.sampled_from(["root", "a", "b", "c", "zz"])},
                              optional={"resources": st.dictionaries(
                                  st.sampled_from(["cpu", "gpu", "tpu"]),
                                  st.fixed_dictionaries({}, optional={
                                      "reservation": amounts, "limit": amounts}),
                                  max_size=2)}),
        max_size=3),
}, optional={"usage": st.dictionaries(st.sampled_from(["a", "q"]), st.fixed_dictionaries(
    {}, optional={"demand": st.dictionaries(st.just("cpu"), amounts)}), max_size=2)})


@given(docs)
def test_no_problems_exactly_when_the_entitlement_core_accepts(doc: dict[str, Any]) -> None:
    problems = scenario_problems(doc)
    try:
        entitlement_report(doc)
    except PoolConfigError as exc:
        assert str(exc) in problems  # the core's first problem is among them
    else:
        assert problems == []


def test_placement_plan_reports_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({
        "hosts": [{"name": "a"}, {"name": "b", "capacity": {"cpu": -1}}],
        "jobs": [{"name": "j", "placementStrategy": "RANDOM"}], "bogus": 1}))
    result = runner.invoke(app(), ["placement", "plan", str(path)])
    assert result.exit_code == 2
    for message in ("hosts[0].capacity: is required", "hosts[1].capacity.cpu:",
                    "jobs[0].placementStrategy: unknown strategy", "bogus: unknown field"):
        assert message in result.stderr
