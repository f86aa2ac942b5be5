"""The local cluster's admin token (peloton.minicluster.admintoken) and how the API process
gets it."""

from __future__ import annotations

import stat
from pathlib import Path

import yaml

from peloton.api.tokens import Principal, load_tokens
from peloton.minicluster.admintoken import ensure_admin_token, read_admin_token, tokens_file
from peloton.minicluster.cluster import Cluster, Layout


def test_one_admin_token_per_run_dir_kept_across_restarts(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    token = ensure_admin_token(run_dir)
    assert read_admin_token(run_dir) == token and len(token) >= 40
    assert load_tokens(tokens_file(run_dir)).match(token) == Principal("admin", admin=True)
    assert token not in tokens_file(run_dir).read_text()  # the API's file holds its hash
    for path in (tokens_file(run_dir), run_dir / "admin-token"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ensure_admin_token(run_dir) == token  # up again: the same token
    tokens_file(run_dir).write_text(yaml.safe_dump({"tokens": []}))  # broken: made anew
    fresh = ensure_admin_token(run_dir)
    assert fresh != token and load_tokens(tokens_file(run_dir)).match(fresh) is not None


def test_the_api_process_reads_the_run_dirs_tokens_file(tmp_path: Path) -> None:
    cluster = Cluster(Layout.local(tmp_path, agents=1, free=True))
    argv = cluster.service_argv("api")
    assert argv[argv.index("--tokens-file") + 1] == str(tmp_path / "tokens.yaml")
    assert cluster.admin_token is None and cluster.api_headers == {}
    token = ensure_admin_token(tmp_path)
    assert cluster.api_headers == {"Authorization": f"Bearer {token}"}
