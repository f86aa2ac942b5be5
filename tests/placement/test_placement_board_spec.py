"""The board reads job specs as typed values (peloton.model.spec): JobCreated is decoded
once by `JobSpec.from_body`, the task lookup is `spec.task(i)` and the gang rule is
`spec.gang_id` / `spec.gang_members`. Nothing in the placement core indexes a spec dict."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from event_bodies import job_created, offer, offer_received, tasks_admitted

from peloton.model.spec import JobSpec
from peloton.placement.domain import board as board_module
from peloton.placement.domain.board import PlacementBoard

DOMAIN = Path(__file__).resolve().parents[2] / "services" / "peloton" / "placement" / "domain"
SPEC_FIELDS = {"default_task", "instance_tasks", "gang_size", "placement_strategy",
               "constraint_json", "min_running", "preemptible", "revocable", "priority",
               "instance_count", "respool", "kill_grace_period_s", "controller"}


def test_no_spec_field_is_read_from_a_dict_in_the_placement_core() -> None:
    found = []
    for path in sorted(DOMAIN.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            key = None
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                key = node.slice.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "get" and node.args
                  and isinstance(node.args[0], ast.Constant)):
                key = node.args[0].value
            if key in SPEC_FIELDS:
                found.append(f"{path.name}:{node.lineno} [{key!r}]")
    assert found == []


class _Bodiless:
    """JobSpec for the board, with the source records dropped: only typed fields remain."""

    @staticmethod
    def from_body(body: Any) -> JobSpec:
        return _bodiless(JobSpec.from_body(body))


def _bodiless(spec: JobSpec) -> JobSpec:
    return dataclasses.replace(
        spec, body={}, default_task=dataclasses.replace(spec.default_task, body={}),
        instance_tasks={i: dataclasses.replace(t, body={})
                        for i, t in spec.instance_tasks.items()})


def _rounds(board: PlacementBoard) -> list[tuple[str, Any]]:
    board.fold("OfferReceived", offer_received(
        offer("h1", cpu=8, slack_cpu=2, slack_mem=1024, labels={"zone": "a"}),
        offer("h2", cpu=8, slack_cpu=2, slack_mem=1024, labels={"zone": "b"})))
    mixed = job_created("mixed", 3, ports=("http",), constraint={"maxPerHost": 2})
    mixed["instance_tasks"] = {"2": {**mixed["default_task"], "revocable": True}}
    for body in (job_created("gang", 3, min_running=3, priority=5), mixed,
                 job_created("spare", 2, revocable=True, cpu=0.5)):
        board.fold("JobCreated", body)
        board.fold("TasksAdmitted", tasks_admitted(body["job_id"],
                                                   *range(body["instance_count"])))
    return [(e.type, e.body) for e in board.next_round(1)]


def test_the_board_decides_from_typed_fields_only(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _rounds(PlacementBoard())
    assert len([p for t, b in expected if t == "PlacementMade" for p in b["placements"]]) == 8
    monkeypatch.setattr(board_module, "JobSpec", _Bodiless)
    assert _rounds(PlacementBoard()) == expected
