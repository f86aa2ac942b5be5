"""Constraint parsing (Peloton's v0 form and the simple forms), errors, JSON round trip."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.model.constraint import (
    AndConstraint,
    Condition,
    Constraint,
    ConstraintError,
    HostLabelConstraint,
    LabelConstraint,
    LabelKind,
    LabelOp,
    MaxPerHostConstraint,
    OrConstraint,
    PreferConstraint,
    SpreadConstraint,
    parse_constraint,
    split_constraint,
    to_dict,
)

HOST_ZONE = LabelConstraint(LabelKind.HOST, Condition.EQUAL, "zone", "us-east1", 1)
ONE_PER_HOST = LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, "peloton.job_id", "web", 1)

PARSE_EXAMPLES: list[tuple[str, Any, Constraint]] = [
    ("peloton host label", {
        "type": "LABEL_CONSTRAINT",
        "labelConstraint": {"kind": "HOST", "condition": "CONDITION_EQUAL",
                            "label": {"key": "zone", "value": "us-east1"}, "requirement": 1}},
     HOST_ZONE),
    ("peloton task anti-affinity, type omitted", {
        "labelConstraint": {"kind": "TASK", "condition": "CONDITION_LESS_THAN",
                            "label": {"key": "peloton.job_id", "value": "web"},
                            "requirement": 1}},
     ONE_PER_HOST),
    ("short condition name", {
        "type": "LABEL_CONSTRAINT",
        "labelConstraint": {"kind": "TASK", "condition": "LESS_THAN",
                            "label": {"key": "peloton.job_id", "value": "web"},
                            "requirement": 1}},
     ONE_PER_HOST),
    ("peloton AND", {
        "type": "AND_CONSTRAINT",
        "andConstraint": {"constraints": [
            {"type": "LABEL_CONSTRAINT", "labelConstraint": {
                "kind": "HOST", "condition": "CONDITION_EQUAL",
                "label": {"key": "zone", "value": "us-east1"}, "requirement": 1}},
            {"maxPerHost": 2}]}},
     AndConstraint((HOST_ZONE, MaxPerHostConstraint(2)))),
    ("peloton OR", {
        "type": "OR_CONSTRAINT",
        "orConstraint": {"constraints": [{"hostLabel": {"key": "rack", "equals": 12}},
                                         {"hostLabel": {"key": "ssd", "exists": True}}]}},
     OrConstraint((HostLabelConstraint("rack", LabelOp.EQUALS, ("12",)),
                   HostLabelConstraint("ssd", LabelOp.EXISTS)))),
    ("label in", {"hostLabel": {"key": "zone", "in": ["b", "a", "a"]}},
     HostLabelConstraint("zone", LabelOp.IN, ("a", "b"))),
    ("label not in", {"hostLabel": {"key": "zone", "notIn": ["c"]}},
     HostLabelConstraint("zone", LabelOp.NOT_IN, ("c",))),
    ("label absent", {"hostLabel": {"key": "gpu-model", "exists": False}},
     HostLabelConstraint("gpu-model", LabelOp.NOT_EXISTS)),
    ("spread shorthand", {"spread": "zone"}, SpreadConstraint("zone")),
    ("spread mapping", {"spread": {"key": "rack"}}, SpreadConstraint("rack")),
    ("prefer with weight", {"prefer": {"hostLabel": {"key": "ssd", "exists": True}},
                            "weight": 3},
     PreferConstraint(HostLabelConstraint("ssd", LabelOp.EXISTS), 3.0)),
    ("list is AND", [{"maxPerHost": 1}, {"spread": "zone"}],
     AndConstraint((MaxPerHostConstraint(1), SpreadConstraint("zone")))),
]


@pytest.mark.parametrize(("name", "raw", "expected"), PARSE_EXAMPLES,
                         ids=[e[0] for e in PARSE_EXAMPLES])
def test_parse_examples(name: str, raw: Any, expected: Constraint) -> None:
    got = parse_constraint(raw)
    assert got == expected
    assert parse_constraint(json.loads(json.dumps(to_dict(got)))) == got


ERROR_EXAMPLES: list[tuple[str, Any, str, str]] = [
    ("not a mapping", 7, "constraint", "must be a mapping or a list"),
    ("unknown type", {"type": "XOR_CONSTRAINT"}, "constraint.type", "unknown type"),
    ("bad condition", {"type": "LABEL_CONSTRAINT", "labelConstraint": {
        "kind": "HOST", "condition": "CONDITION_ABOUT", "label": {"key": "k", "value": "v"}}},
     "constraint.labelConstraint.condition", "unknown condition 'CONDITION_ABOUT'"),
    ("bad kind", {"labelConstraint": {"kind": "RACK", "condition": "CONDITION_EQUAL",
                                      "label": {"key": "k", "value": "v"}}},
     "constraint.labelConstraint.kind", "expected HOST or TASK"),
    ("missing label", {"labelConstraint": {"kind": "HOST", "condition": "CONDITION_EQUAL"}},
     "constraint.labelConstraint.label", "is required"),
    ("negative requirement", {"labelConstraint": {
        "kind": "HOST", "condition": "CONDITION_EQUAL", "label": {"key": "k", "value": "v"},
        "requirement": -1}}, "constraint.labelConstraint.requirement", "non-negative"),
    ("nested error path", {"type": "AND_CONSTRAINT", "andConstraint": {"constraints": [
        {"maxPerHost": 1}, {"hostLabel": {"key": "zone", "in": []}}]}},
     "constraint.andConstraint.constraints[1].hostLabel.in", "non-empty list"),
    ("two ops", {"hostLabel": {"key": "zone", "in": ["a"], "equals": "b"}},
     "constraint.hostLabel", "exactly one of"),
    ("soft inside OR", {"type": "OR_CONSTRAINT", "orConstraint": {"constraints": [
        {"spread": "zone"}, {"maxPerHost": 1}]}},
     "constraint.orConstraint.constraints[0]", "soft"),
    ("soft inside prefer", {"prefer": {"spread": "zone"}}, "constraint.prefer", "soft"),
    ("zero weight", {"prefer": {"maxPerHost": 1}, "weight": 0}, "constraint.weight",
     "positive number"),
    ("maxPerHost zero", {"maxPerHost": 0}, "constraint.maxPerHost", "positive integer"),
    ("unknown field", {"hostLabel": {"key": "z", "exists": True}, "extra": 1},
     "constraint.extra", "unknown field"),
    ("empty AND", {"andConstraint": {"constraints": []}},
     "constraint.andConstraint.constraints", "at least one"),
]


@pytest.mark.parametrize(("name", "raw", "path", "reason"), ERROR_EXAMPLES,
                         ids=[e[0] for e in ERROR_EXAMPLES])
def test_errors_name_path_and_reason(name: str, raw: Any, path: str, reason: str) -> None:
    with pytest.raises(ConstraintError) as err:
        parse_constraint(raw)
    assert err.value.path == path
    assert reason in err.value.reason
    assert isinstance(err.value, ValueError)


def test_split_separates_soft_from_hard() -> None:
    c = parse_constraint([{"maxPerHost": 1}, {"spread": "zone"},
                          {"hostLabel": {"key": "zone", "notIn": ["x"]}}])
    hard, soft = split_constraint(c)
    assert hard == AndConstraint((MaxPerHostConstraint(1),
                                  HostLabelConstraint("zone", LabelOp.NOT_IN, ("x",))))
    assert soft == (SpreadConstraint("zone"),)
    assert split_constraint(None) == (None, ())


def test_descriptions_read_like_requirements() -> None:
    assert str(HOST_ZONE) == "zone=us-east1"
    assert str(LabelConstraint(LabelKind.HOST, Condition.LESS_THAN, "zone", "a", 1)) == "zone!=a"
    assert "< 1" in str(ONE_PER_HOST)
    assert str(HostLabelConstraint("zone", LabelOp.IN, ("a", "b"))) == "zone in [a, b]"


# --------------------------------------------------------------------------- round trip

_text = st.text(alphabet="abcxyz-.0123", min_size=1, max_size=6)
_leaf = st.one_of(
    st.builds(LabelConstraint, st.sampled_from(LabelKind), st.sampled_from(Condition),
              _text, _text, st.integers(0, 5)),
    st.builds(HostLabelConstraint, _text, st.sampled_from([LabelOp.EQUALS]),
              st.tuples(_text)),
    st.builds(HostLabelConstraint, _text, st.sampled_from([LabelOp.IN, LabelOp.NOT_IN]),
              st.lists(_text, min_size=1, max_size=3).map(tuple)),
    st.builds(HostLabelConstraint, _text,
              st.sampled_from([LabelOp.EXISTS, LabelOp.NOT_EXISTS])),
    st.builds(MaxPerHostConstraint, st.integers(1, 5)),
)
_hard = st.recursive(_leaf, lambda inner: st.one_of(
    st.lists(inner, min_size=1, max_size=3).map(lambda cs: AndConstraint(tuple(cs))),
    st.lists(inner, min_size=1, max_size=3).map(lambda cs: OrConstraint(tuple(cs))),
), max_leaves=6)
_soft = st.one_of(st.builds(SpreadConstraint, _text),
                  st.builds(PreferConstraint, _hard, st.sampled_from([0.5, 1.0, 2.0])))
_any = st.one_of(_hard, _soft, st.lists(st.one_of(_hard, _soft), min_size=1, max_size=3)
                 .map(lambda cs: AndConstraint(tuple(cs))))


@given(_any)
def test_json_round_trip(c: Constraint) -> None:
    assert parse_constraint(json.loads(json.dumps(to_dict(c)))) == c
