"""Where the CLI finds the API and its token (peloton.cli.config), what PelotonClient sends,
and how `peloton cluster up` rewrites the config file."""

from __future__ import annotations

import stat
from pathlib import Path

import httpx
import pytest
import yaml

from peloton.cli import config
from peloton.cli.client import ApiError, PelotonClient

LOCAL = "http://127.0.0.1:5290"


@pytest.fixture
def cfg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty environment: no PELOTON_TOKEN/PELOTON_API, the config file in tmp_path."""
    monkeypatch.delenv("PELOTON_TOKEN", raising=False)
    monkeypatch.delenv("PELOTON_API", raising=False)
    path = tmp_path / "peloton" / "config.yaml"
    monkeypatch.setenv("PELOTON_CONFIG", str(path))
    return path


def write(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))


def test_the_config_path_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PELOTON_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert config.config_path() == tmp_path / "peloton" / "config.yaml"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert config.config_path() == tmp_path / "home" / ".config" / "peloton" / "config.yaml"


def test_api_and_token_from_env_then_config(cfg: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    assert (config.api_url(), config.token_for(LOCAL)) == (config.DEFAULT_API, None)
    write(cfg, {"api": "http://10.0.0.5:5290/", "token": "from-config"})
    assert config.api_url() == "http://10.0.0.5:5290/"
    assert config.token_for("http://10.0.0.5:5290") == "from-config"
    assert config.token_for(LOCAL) is None  # never sent to an API it was not written for
    write(cfg, {"token": "any-api"})
    assert config.token_for("https://peloton.example") == "any-api"
    monkeypatch.setenv("PELOTON_TOKEN", "from-env")
    monkeypatch.setenv("PELOTON_API", "http://env:1")
    assert (config.api_url(), config.token_for(LOCAL)) == ("http://env:1", "from-env")


@pytest.mark.parametrize("text", ["[not, a, mapping]", "api: [\n", "42"])
def test_an_invalid_config_reads_as_empty_and_is_not_rewritten(cfg: Path, text: str) -> None:
    cfg.parent.mkdir(parents=True)
    cfg.write_text(text)
    assert config.token_for(LOCAL) is None and config.api_url() == config.DEFAULT_API
    assert config.write_local(LOCAL, "t") is False
    assert cfg.read_text() == text


def test_cluster_up_points_the_config_at_the_local_cluster(cfg: Path) -> None:
    assert config.write_local(LOCAL, "tok-1") is True
    assert yaml.safe_load(cfg.read_text()) == {"api": LOCAL, "token": "tok-1"}
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600
    write(cfg, {"api": "http://localhost:5291", "token": "old", "editor": "vim"})
    assert config.write_local(LOCAL, "tok-2") is True
    assert yaml.safe_load(cfg.read_text()) == {"api": LOCAL, "token": "tok-2",
                                               "editor": "vim"}
    remote = {"api": "https://peloton.example.com", "token": "prod"}
    write(cfg, remote)
    assert config.write_local(LOCAL, "tok-3") is False  # a real cluster's settings stay
    assert yaml.safe_load(cfg.read_text()) == remote


def capture(seen: list[httpx.Request], status: int = 200) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if status == 401:
            return httpx.Response(401, json={"error": "missing bearer token", "details": []})
        return httpx.Response(status, json={"jobs": []})

    return httpx.MockTransport(handler)


def test_the_client_sends_the_token_it_finds(cfg: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []
    write(cfg, {"api": LOCAL, "token": "cfg-token"})
    with PelotonClient(transport=capture(seen)) as client:
        client.list_jobs()
    with PelotonClient("http://other:1", transport=capture(seen)) as client:
        client.list_jobs()
    with PelotonClient("http://other:1", transport=capture(seen), token="given") as client:
        client.list_jobs()
    monkeypatch.setenv("PELOTON_TOKEN", "env-token")
    with PelotonClient("http://other:1", transport=capture(seen)) as client:
        client.list_jobs()
    assert [r.headers.get("authorization") for r in seen] == [
        "Bearer cfg-token", None, "Bearer given", "Bearer env-token"]
    assert str(seen[0].url).startswith(LOCAL)


def test_a_401_tells_where_the_token_comes_from(cfg: Path) -> None:
    with PelotonClient(LOCAL, transport=capture([], 401)) as client:
        with pytest.raises(ApiError) as caught:
            client.list_jobs()
    assert caught.value.status == 401 and caught.value.error == "missing bearer token"
    assert "PELOTON_TOKEN" in caught.value.details[-1]["message"]
    assert str(cfg) in caught.value.details[-1]["message"]


def test_token_new_prints_a_token_and_the_entry_that_accepts_it() -> None:
    from typer.testing import CliRunner

    from peloton.api.tokens import TokenTable, parse_tokens
    from peloton.cli.main import app

    runner = CliRunner()
    made = runner.invoke(app, ["token", "new", "--name", "alice", "--role", "submitter",
                               "--pool", "/team-a"])
    assert made.exit_code == 0, made.stderr
    token = made.stderr.split("token (shown once): ")[1].strip()
    entries = yaml.safe_load(made.stdout)
    assert token not in made.stdout
    found = TokenTable(parse_tokens({"tokens": entries})).match(token)
    assert found is not None and found.name == "alice" and found.pools == {"/team-a"}
    hashed = runner.invoke(app, ["token", "hash"], input=f"{token}\n")
    assert hashed.stdout.strip() == entries[0]["sha256"]
    refused = runner.invoke(app, ["token", "new", "--name", "bob", "--role", "submitter"])
    assert refused.exit_code == 2
    assert "tokens[0].pools: a submitter owns at least one pool" in refused.stderr
