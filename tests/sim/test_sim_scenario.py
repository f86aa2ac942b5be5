"""Scenario files: the shipped examples parse; broken ones are refused with the field."""

from __future__ import annotations

from typing import Any

import pytest
from _sim_builders import EXAMPLES, example, job, pool

from peloton.sim import ScenarioError, parse_scenario


@pytest.mark.parametrize("name", ["small", "peloton-preemption", "large"])
def test_examples_parse(name: str) -> None:
    scenario = example(name)
    assert scenario.name == name
    assert scenario.host_count > 0


def test_the_large_example_has_ten_thousand_hosts() -> None:
    scenario = example("large")
    assert scenario.host_count == 10_000
    assert scenario.batch is not None and scenario.batch.arrival_shape == 0.54


def _doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "x", "duration_s": 60,
        "hosts": [{"count": 2, "cpu": 4, "memory": 1024}],
        "pools": [pool("A", 2, 8, memory=2048)],
        "jobs": [job("j", "/A", 2)],
    }
    doc.update(changes)
    return doc


@pytest.mark.parametrize(("changes", "message"), [
    ({"hosts": []}, "hosts: at least one"),
    ({"bogus": 1}, "unknown field(s) bogus"),
    ({"duration_s": "long"}, "duration_s: must be a number"),
    ({"pools": [pool("A", 20, 8)]}, "limit"),
    ({"pools": [pool("A", 2, 80)]}, "exceeds cluster capacity"),
    ({"jobs": [job("j", "/nowhere", 2)]}, "jobs[0].pool: '/nowhere' is not a leaf pool"),
    ({"jobs": []}, "no work"),
    ({"scheduler": {"cycle_s": 10, "entitlement_cycle_s": 5}}, "entitlement_cycle_s"),
    ({"workload": {"batch": {"pools": {"/A": 1}}}}, "workload.tiers"),
])
def test_broken_scenarios_name_the_field(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(_doc(**changes))
    assert message in str(err.value)


def test_a_pool_inner_node_is_not_a_job_target() -> None:
    doc = _doc(pools=[pool("A", 2, 8, memory=2048),
                      {**pool("leaf", 1, 8, memory=2048), "parent": "/A"}])
    with pytest.raises(ScenarioError, match="not a leaf pool"):
        parse_scenario(doc)


def test_examples_directory_holds_the_three_scenarios() -> None:
    assert {p.stem for p in EXAMPLES.glob("*.yaml")} >= {"small", "peloton-preemption", "large"}
