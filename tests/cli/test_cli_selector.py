"""`job list -l SELECTOR`: the pure selector parser (property tests) and the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from peloton.api.listing import SelectorError as ApiSelectorError
from peloton.api.listing import parse_selector as api_parse
from peloton.model.selector import Requirement, SelectorError, format_selector, matches, parse

runner = CliRunner()
keys = st.from_regex(r"[a-z][a-z0-9._/-]{0,10}", fullmatch=True)
values = st.from_regex(r"[A-Za-z0-9._-]{1,12}", fullmatch=True)
requirement = st.one_of(
    st.builds(lambda k, op, v: Requirement(k, op, (v,)), keys, st.sampled_from(["=", "!="]),
              st.one_of(values, st.just(""))),
    st.builds(lambda k, op, vs: Requirement(k, op, tuple(dict.fromkeys(vs))), keys,
              st.sampled_from(["in", "notin"]), st.lists(values, min_size=1, max_size=3)),
    st.builds(lambda k, op: Requirement(k, op), keys, st.sampled_from(["exists", "!exists"])),
)
selectors = st.lists(requirement, min_size=1, max_size=5)
labelsets = st.dictionaries(st.sampled_from(["a", "b", "team", "x.y/z"]),
                            st.sampled_from(["", "1", "2", "prod"]), max_size=4)


@given(selectors)
def test_format_then_parse_gives_the_selector_back(reqs: list[Requirement]) -> None:
    assert parse(format_selector(reqs)) == reqs


@given(selectors)
def test_the_api_reads_what_the_cli_accepts(reqs: list[Requirement]) -> None:
    text = format_selector(reqs)
    assert [(r.key, r.op, tuple(r.values)) for r in api_parse(text)] == \
        [(r.key, r.op, r.values) for r in reqs]


@given(st.text(max_size=40))
def test_garbage_raises_only_selector_errors_naming_each_problem(text: str) -> None:
    try:
        reqs = parse(text)
    except SelectorError as exc:
        assert exc.problems and all(isinstance(p, str) and p for p in exc.problems)
        return
    assert parse(format_selector(reqs)) == reqs


@given(st.lists(st.sampled_from(["a=", "b!=2", "team in (prod,1)", "!a", "b", "x.y/z notin (1)"]),
                min_size=1, max_size=4), labelsets)
def test_matching_follows_kubernetes_semantics(terms: list[str], labels: dict[str, str]) -> None:
    reqs = parse(",".join(terms))

    def holds(r: Requirement) -> bool:
        has = r.key in labels
        if r.op in ("exists", "!exists"):
            return has == (r.op == "exists")
        inside = has and labels[r.key] in r.values
        return inside if r.op in ("=", "in") else not inside

    assert matches(reqs, labels) == all(holds(r) for r in reqs)


def test_parse_examples() -> None:
    assert parse("team=a, tier in (1, 2),!canary,gpu,env==prod,zone!=b") == [
        Requirement("team", "=", ("a",)), Requirement("tier", "in", ("1", "2")),
        Requirement("canary", "!exists"), Requirement("gpu", "exists"),
        Requirement("env", "=", ("prod",)), Requirement("zone", "!=", ("b",))]
    assert parse("   ") == []  # selects everything
    with pytest.raises(SelectorError) as err:
        parse("a=b,,c in (),d e,f=(g")
    assert len(err.value.problems) == 1  # unbalanced parentheses stop the split
    with pytest.raises(SelectorError) as err:
        parse("a=b,,c in (),d e,f=g h")
    assert [p.split(":")[0] for p in err.value.problems] == [
        "requirement 2", "requirement 3 'c in ()'", "requirement 4 'd e'",
        "requirement 5 'f=g h'"]
    with pytest.raises(ApiSelectorError):  # the API refuses what the CLI refuses here
        api_parse("d e")


JOB = """\
name: {name}
owner: me
instanceCount: 1
respool: /prod/batch
labels: {labels}
defaultConfig:
  resource: {{cpuLimit: 0.5, memLimitMb: 64}}
  command: {{value: "echo hi"}}
"""


def _ids(cli: typer.Typer, api: str, *args: str) -> set[str]:
    result = runner.invoke(cli, ["job", "list", *args, "-o", "json", "--api", api])
    assert result.exit_code == 0, result.stderr
    jobs = json.loads(result.stdout)["jobs"]
    return {j["job_id"] for j in jobs if j["job_id"].startswith("sel-")}


def test_job_list_selects_by_label(cli: typer.Typer, api: str, tmp_path: Path) -> None:
    for job_id, labels in [("sel-a", "{team: a, tier: '1'}"), ("sel-b", "{team: b}"),
                           ("sel-c", "[{key: team, value: a}, {key: canary, value: 'yes'}]")]:
        path = tmp_path / f"{job_id}.yaml"
        path.write_text(JOB.format(name=job_id, labels=labels))
        result = runner.invoke(cli, ["job", "create", str(path), "--job-id", job_id,
                                     "--api", api])
        assert result.exit_code == 0, result.stderr
    assert _ids(cli, api, "-l", "team=a") == {"sel-a", "sel-c"}
    assert _ids(cli, api, "-l", "team=a,!canary") == {"sel-a"}
    assert _ids(cli, api, "--selector", "team in (a,b),tier notin (1)") == {"sel-b", "sel-c"}
    assert _ids(cli, api, "-l", "canary") == {"sel-c"}
    assert _ids(cli, api, "-l", "team!=a") >= {"sel-b"}
    assert _ids(cli, api, "-l", "team=a", "--limit", "1") == {"sel-c"}  # newest first
    result = runner.invoke(cli, ["job", "list", "-l", "team=a", "-o", "wide", "--api", api])
    assert "team=a" in result.stdout and "sel-b" not in result.stdout


def test_a_bad_selector_exits_2_before_calling_the_api(cli: typer.Typer) -> None:
    result = runner.invoke(cli, ["job", "list", "-l", "team=a,,x y", "--api",
                                 "http://127.0.0.1:9"])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == "error: invalid label selector"
    assert len(result.stderr.splitlines()) == 3  # both problems, no connection attempt
