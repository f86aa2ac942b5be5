"""The local cluster's API token: one admin token per run directory.

`ensure_admin_token(run_dir)` returns the run dir's admin token, making it the first time:
`<run_dir>/admin-token` holds the token itself (mode 0600, for `peloton cluster up` to print
and for tests), `<run_dir>/tokens.yaml` the API's tokens file with only its SHA-256 (user
`admin`, role admin; see peloton.api.tokens). An existing pair is kept, so a cluster
brought down and up again keeps its token (and the CLI config written for it stays
valid); a missing or broken one is made anew.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from peloton.api.tokens import TokenFileError, hash_token, load_tokens, new_token

__all__ = ["ensure_admin_token", "read_admin_token", "tokens_file", "ADMIN_USER"]

ADMIN_USER = "admin"


def tokens_file(run_dir: Path) -> Path:
    return run_dir / "tokens.yaml"


def _token_path(run_dir: Path) -> Path:
    return run_dir / "admin-token"


def read_admin_token(run_dir: Path) -> str | None:
    try:
        token = _token_path(run_dir).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return token or None


def ensure_admin_token(run_dir: Path) -> str:
    token = read_admin_token(run_dir)
    if token is not None:
        try:
            if load_tokens(tokens_file(run_dir)).match(token) is not None:
                return token
        except TokenFileError:
            pass
    token = new_token()
    run_dir.mkdir(parents=True, exist_ok=True)
    doc = {"tokens": [{"name": ADMIN_USER, "sha256": hash_token(token), "roles": ["admin"]}]}
    _write_private(tokens_file(run_dir), yaml.safe_dump(doc, sort_keys=False))
    _write_private(_token_path(run_dir), token + "\n")
    return token


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.chmod(tmp, 0o600)
    tmp.replace(path)
