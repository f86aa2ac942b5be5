"""The tokens file (peloton.api.tokens): parsing with every problem at once, matching,
pool ownership, and re-reading a changed file. Properties over generated files."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.api.auth import bearer_token
from peloton.api.tokens import (
    Principal,
    TokenFile,
    TokenFileError,
    TokenTable,
    hash_token,
    load_tokens,
    new_token,
    parse_tokens,
)

SEGMENT = st.text(string.ascii_lowercase + string.digits + "-", min_size=1, max_size=6)
POOL = st.lists(SEGMENT, min_size=1, max_size=3).map(lambda parts: "/" + "/".join(parts))
TOKEN = st.text(string.ascii_letters + string.digits + "-_.~+/", min_size=16, max_size=60)
USER = st.fixed_dictionaries({
    "name": st.text(string.ascii_letters, min_size=1, max_size=10),
    "token": TOKEN, "hashed": st.booleans(),
    "roles": st.sampled_from([["admin"], ["submitter"], ["admin", "submitter"]]),
    "pools": st.lists(POOL, min_size=1, max_size=3)})


def entry(user: dict[str, Any]) -> dict[str, Any]:
    secret = {"sha256": hash_token(user["token"])} if user["hashed"] else {
        "token": user["token"]}
    return {"name": user["name"], **secret, "roles": user["roles"], "pools": user["pools"]}


@settings(max_examples=60, deadline=None)
@given(users=st.lists(USER, min_size=1, max_size=6, unique_by=lambda u: u["token"]),
       other=TOKEN)
def test_each_token_is_its_user_and_no_other_token_is_anyone(
        users: list[dict[str, Any]], other: str) -> None:
    table = TokenTable(parse_tokens({"tokens": [entry(u) for u in users]}))
    for u in users:
        found = table.match(u["token"])
        assert found == Principal(u["name"], "admin" in u["roles"], frozenset(u["pools"]))
    if other not in {u["token"] for u in users}:
        assert table.match(other) is None
    # a top-level list reads the same, and the table holds no token
    again = parse_tokens([entry(u) for u in users])
    assert [e.principal for e in again] == [table.match(u["token"]) for u in users]
    assert all(u["token"] not in repr(e) for u in users for e in again)


@settings(max_examples=60, deadline=None)
@given(token=st.text(min_size=0, max_size=15), name=st.text(max_size=3),
       roles=st.lists(st.text(max_size=8), max_size=2))
def test_problems_name_fields_and_never_quote_a_token(token: str, name: str,
                                                      roles: list[str]) -> None:
    bad = [{"name": name, "token": token, "roles": roles, "pool": ["/x"]},
           {"name": "ok", "sha256": token + "zz", "roles": ["submitter"]}]
    with pytest.raises(TokenFileError) as caught:
        parse_tokens({"tokens": bad})
    problems = caught.value.problems
    assert "tokens[0].token: at least 16 characters, no surrounding spaces" in problems
    assert "tokens[0].pool: unknown field (one of name, pools, roles, sha256, token)" in (
        problems)
    assert "tokens[1].sha256: 64 hexadecimal digits expected" in problems
    assert "tokens[1].pools: a submitter owns at least one pool" in problems
    # the messages' own words hold many strings (a token "oles" is in "roles"): only a
    # token that is not already in the messages made for a neutral token must not appear
    neutral = [dict(bad[0], token="\x00" * len(token)), bad[1]]
    with pytest.raises(TokenFileError) as plain:
        parse_tokens({"tokens": neutral})
    if len(token) >= 4 and all(token not in p for p in plain.value.problems):
        assert all(token not in p for p in problems)
        assert token not in str(caught.value)


@pytest.mark.parametrize(("doc", "problem"), [
    (None, "tokens: a non-empty list of tokens is required"),
    ({"tokens": []}, "tokens: a non-empty list of tokens is required"),
    ({"tokens": ["x"]}, "tokens[0]: a mapping with name, sha256 (or token), roles expected"),
    ({"tokens": [{"name": "a", "roles": ["admin"]}]},
     "tokens[0]: exactly one of sha256 and token is required"),
    ({"tokens": [{"name": "a", "roles": ["admin"], "token": "t" * 16,
                  "sha256": hash_token("t" * 16)}]},
     "tokens[0]: exactly one of sha256 and token is required"),
    ({"tokens": [{"name": "a", "roles": ["root"], "token": "t" * 16}]},
     "tokens[0].roles: a non-empty list of admin or submitter expected"),
    ({"tokens": [{"name": " ", "roles": ["admin"], "token": "t" * 16}]},
     "tokens[0].name: a user name (1-128 characters) is required"),
    ({"tokens": [{"name": "a", "roles": ["submitter"], "token": "t" * 16,
                  "pools": ["team-a"]}]},
     "tokens[0].pools[0]: team-a: pool: a pool path starts with '/' (e.g. /team-a/batch)"),
    ({"tokens": [{"name": "a", "roles": ["admin"], "token": "t" * 16},
                 {"name": "b", "roles": ["admin"], "sha256": hash_token("t" * 16)}]},
     "tokens[1]: the same token as tokens[0]"),
])
def test_invalid_files_say_what_is_wrong(doc: Any, problem: str) -> None:
    with pytest.raises(TokenFileError) as caught:
        parse_tokens(doc)
    assert problem in caught.value.problems


@settings(max_examples=100, deadline=None)
@given(own=POOL, other=POOL, tail=st.lists(SEGMENT, max_size=2))
def test_owning_a_pool_is_owning_its_subtree_only(own: str, other: str,
                                                   tail: list[str]) -> None:
    alice = Principal("alice", pools=frozenset({own}))
    below = "/".join([own, *tail])
    assert alice.owns(below)
    assert not alice.owns(own + "x")  # /team-a does not own /team-ab
    assert alice.owns(other) == (other == own or other.startswith(own + "/"))
    assert Principal("root", admin=True).owns(other)
    assert Principal("all", pools=frozenset({"/"})).owns(other)
    assert not Principal("none").owns(other)


def test_the_pools_of_the_file_are_normalized() -> None:
    (e,) = parse_tokens([{"name": "a", "token": "t" * 16, "roles": ["submitter"],
                          "pools": ["/team-a/", "//b//c"]}])
    assert e.principal.pools == {"/team-a", "/b/c"}


def test_a_tokens_file_is_yaml_or_json_and_reread_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    first, second = new_token(), new_token()
    path.write_text(f'{{"tokens": [{{"name": "a", "sha256": "{hash_token(first)}", '
                    '"roles": ["admin"]}]}')
    assert load_tokens(path).match(first) == Principal("a", admin=True)
    now = [0.0]
    tokens = TokenFile(path, clock=lambda: now[0])
    assert tokens.match(first) is not None
    path.write_text(yaml.safe_dump([{"name": "b", "token": second, "roles": ["admin"]}]))
    assert tokens.match(second) is None  # checked at most once a second
    now[0] = 2.0
    assert tokens.match(second) == Principal("b", admin=True)
    assert tokens.match(first) is None  # revoked
    path.write_text("tokens: [")  # broken: the previous tokens stay
    now[0] = 4.0
    assert tokens.match(second) == Principal("b", admin=True)


def test_an_invalid_or_missing_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(TokenFileError, match="invalid .*missing.yaml: cannot read it"):
        TokenFile(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("tokens: [\n")
    with pytest.raises(TokenFileError, match="bad.yaml: not valid YAML or JSON at line"):
        load_tokens(bad)


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER  abc ", "abc"), (None, None),
    ("", None), ("Bearer", None), ("Bearer ", None), ("Basic abc", None),
    ("Bearer a b", None), ("abc", None)])
def test_the_bearer_header(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_the_api_does_not_start_without_valid_tokens(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from peloton.cli.serve_cmd import build

    monkeypatch.delenv("PELOTON_API_TOKENS_FILE", raising=False)
    runner = CliRunner()
    result = runner.invoke(build(), ["api", "--bootstrap", "127.0.0.1:1"])
    assert result.exit_code == 2
    assert "the API needs bearer tokens: give --tokens-file (env PELOTON_API_TOKENS_FILE" in (
        result.stderr)
    bad = tmp_path / "tokens.yaml"
    bad.write_text(yaml.safe_dump([{"name": "a", "token": "zq9xk", "roles": ["admin"]}]))
    result = runner.invoke(build(), ["api", "--bootstrap", "127.0.0.1:1"],
                           env={"PELOTON_API_TOKENS_FILE": str(bad)})
    assert result.exit_code == 2
    assert f"invalid {bad}: tokens[0].token: at least 16 characters" in result.stderr
    assert "zq9xk" not in result.stderr
