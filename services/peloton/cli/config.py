"""The CLI's connection settings: where the API is, and the bearer token it sends.

Sources, the first found wins:
- API address: the command's `--api`, env PELOTON_API, the config file's `api`,
  http://127.0.0.1:5290.
- Token: env PELOTON_TOKEN; else the config file's `token`, but only for the config
  file's own `api` (or any API when the file names none): a token is never sent to an
  API it was not written for.
The config file: env PELOTON_CONFIG, else $XDG_CONFIG_HOME/peloton/config.yaml (default
~/.config/peloton/config.yaml), a YAML mapping `{api: URL, token: TOKEN}`; other keys are
kept when the file is rewritten.

`write_local(api, token)` is what `peloton cluster up` does (as kind writes a kubeconfig):
it sets `api` and `token` and keeps every other key, writing the file with mode 0600; it
leaves a file alone (returns False) whose `api` is not on this machine (127.0.0.1,
localhost, ::1), so an up-and-down local cluster never replaces the settings of a real one.
An unreadable or invalid file reads as empty, and is not rewritten.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

__all__ = ["DEFAULT_API", "config_path", "read_config", "api_url", "token_for",
           "write_local", "is_local"]

DEFAULT_API = "http://127.0.0.1:5290"
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


def config_path() -> Path:
    explicit = os.environ.get("PELOTON_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "peloton" / "config.yaml"


def read_config(path: Path | None = None) -> dict[str, Any] | None:
    """The config file's mapping; {} when there is none; None when it cannot be read or
    is not a YAML mapping."""
    path = path or config_path()
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if doc is None:
        return {}
    return doc if isinstance(doc, dict) else None


def _same_api(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def api_url() -> str:
    """The API address when the command gives none."""
    env = os.environ.get("PELOTON_API")
    if env:
        return env
    api = (read_config() or {}).get("api")
    return api if isinstance(api, str) and api else DEFAULT_API


def token_for(api: str) -> str | None:
    """The token to send to `api` (see the module docstring), or None."""
    env = os.environ.get("PELOTON_TOKEN")
    if env:
        return env.strip()
    config = read_config() or {}
    token, own = config.get("token"), config.get("api")
    if not isinstance(token, str) or not token.strip():
        return None
    if isinstance(own, str) and own and not _same_api(own, api):
        return None
    return token.strip()


def is_local(api: str) -> bool:
    return (urlsplit(api).hostname or "") in _LOCAL_HOSTS


def write_local(api: str, token: str, path: Path | None = None) -> bool:
    """Point the config file at a local cluster's API with its token (see the module
    docstring); False when the file was left alone."""
    path = path or config_path()
    config = read_config(path)
    if config is None:
        return False
    current = config.get("api")
    if isinstance(current, str) and current and not is_local(current):
        return False
    config.update(api=api, token=token)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        yaml.safe_dump(config, out, sort_keys=False)
    os.chmod(tmp, 0o600)
    tmp.replace(path)
    return True
