"""Static API tokens: the tokens file, and who a presented bearer token is.

The file (YAML or JSON; `peloton serve api --tokens-file`, env PELOTON_API_TOKENS_FILE):

    tokens:
      - name: ops                       # the user: messages and logs name it, never a token
        sha256: 9f86d081884c7d65...     # hex SHA-256 of the token: printf %s TOKEN | sha256sum
        roles: [admin]
      - name: alice
        sha256: 2c26b46b68ffc68f...
        roles: [submitter]
        pools: [/team-a, /shared/batch] # the pools (each with its subtree) alice works in
      - name: dev
        token: a-plain-token-of-16+-chars   # plain tokens are accepted (hashed when read)
        roles: [admin]                      # for local use; prefer sha256 anywhere else

A top-level list (without `tokens:`) reads the same. Roles: `admin` may do everything;
`submitter` may submit, kill, update, stop, start and restart jobs in the pools it owns.
Any valid token may read.

Contract:
- `parse_tokens(doc)` is pure and checks everything at once: `TokenFileError.problems` lists
  each as "tokens[i].field: reason" and never quotes a token or a hash.
- `TokenTable.match(token)` hashes the token and compares the digest with every entry's
  (`hmac.compare_digest`, no early exit); the table holds digests only, never tokens.
- Ownership (`Principal.owns`): owning /a means /a and every /a/...; owning / means every
  pool; an admin owns every pool. Paths are compared as given (the job manager looks pools
  up literally, so a path that is not normalized names no pool at all).
- `TokenFile` re-reads its file when the file changes (checked at most once a second), so
  a rotated Kubernetes secret takes effect without a restart; a broken new file keeps the
  old tokens (and is logged).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from peloton.resmgr.domain.poolbook import normalize_path

__all__ = ["Principal", "TokenEntry", "TokenTable", "TokenFile", "TokenFileError",
           "ROLES", "parse_tokens", "load_tokens", "hash_token", "new_token",
           "MIN_PLAIN_TOKEN"]

log = logging.getLogger(__name__)

ROLES = ("admin", "submitter")
MIN_PLAIN_TOKEN = 16
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")
_KEYS = {"name", "sha256", "token", "roles", "pools"}


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request comes from."""

    name: str
    admin: bool = False
    pools: frozenset[str] = field(default_factory=frozenset)

    def owns(self, pool: str) -> bool:
        if self.admin:
            return True
        return any(own == "/" or pool == own or pool.startswith(own + "/")
                   for own in self.pools)


@dataclass(frozen=True, slots=True)
class TokenEntry:
    digest: bytes  # SHA-256 of the token
    principal: Principal


class TokenFileError(ValueError):
    def __init__(self, problems: list[str], where: str = "tokens file") -> None:
        super().__init__(f"invalid {where}: " + "; ".join(problems))
        self.problems = problems


def hash_token(token: str) -> str:
    """The hex SHA-256 of a token (what the tokens file's `sha256` holds)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def parse_tokens(doc: Any) -> list[TokenEntry]:
    """The entries of a parsed tokens file, or TokenFileError with every problem."""
    items = doc.get("tokens") if isinstance(doc, dict) else doc
    if not isinstance(items, list) or not items:
        raise TokenFileError(["tokens: a non-empty list of tokens is required"])
    entries: list[TokenEntry] = []
    problems: list[str] = []
    seen: dict[bytes, int] = {}
    for i, item in enumerate(items):
        entry, found = _entry(item, f"tokens[{i}]")
        problems += found
        if entry is None:
            continue
        if entry.digest in seen:
            problems.append(f"tokens[{i}]: the same token as tokens[{seen[entry.digest]}]")
        seen.setdefault(entry.digest, i)
        entries.append(entry)
    if problems:
        raise TokenFileError(problems)
    return entries


def _entry(item: Any, where: str) -> tuple[TokenEntry | None, list[str]]:
    if not isinstance(item, dict):
        return None, [f"{where}: a mapping with name, sha256 (or token), roles expected"]
    problems = [f"{where}.{k}: unknown field (one of {', '.join(sorted(_KEYS))})"
                for k in sorted(map(str, item)) if k not in _KEYS]
    name = item.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 128:
        problems.append(f"{where}.name: a user name (1-128 characters) is required")
    digest = _digest(item, where, problems)
    roles = item.get("roles")
    if (not isinstance(roles, list) or not roles
            or not all(isinstance(r, str) and r in ROLES for r in roles)):
        problems.append(f"{where}.roles: a non-empty list of {' or '.join(ROLES)} expected")
        roles = []
    pools = _pools(item.get("pools", []), where, problems)
    if roles and "admin" not in roles and not pools:
        problems.append(f"{where}.pools: a submitter owns at least one pool")
    if problems or digest is None:
        return None, problems
    return TokenEntry(digest, Principal(str(name).strip(), "admin" in roles,
                                        frozenset(pools))), []


def _digest(item: dict[str, Any], where: str, problems: list[str]) -> bytes | None:
    hashed, plain = item.get("sha256"), item.get("token")
    if (hashed is None) == (plain is None):
        problems.append(f"{where}: exactly one of sha256 and token is required")
        return None
    if hashed is not None:
        if not isinstance(hashed, str) or not _HEX64.match(hashed):
            problems.append(f"{where}.sha256: 64 hexadecimal digits expected")
            return None
        return bytes.fromhex(hashed)
    if not isinstance(plain, str) or len(plain) < MIN_PLAIN_TOKEN or plain != plain.strip():
        problems.append(f"{where}.token: at least {MIN_PLAIN_TOKEN} characters, no "
                        "surrounding spaces")
        return None
    return hashlib.sha256(plain.encode("utf-8")).digest()


def _pools(raw: Any, where: str, problems: list[str]) -> list[str]:
    if not isinstance(raw, list):
        problems.append(f"{where}.pools: a list of pool paths expected")
        return []
    out = []
    for j, pool in enumerate(raw):
        try:
            if not isinstance(pool, str):
                raise ValueError("a pool path (e.g. /team-a) expected")
            out.append(normalize_path(pool))
        except ValueError as exc:
            problems.append(f"{where}.pools[{j}]: {exc}")
    return out


class TokenTable:
    """Digest -> principal, matched in constant time."""

    def __init__(self, entries: Sequence[TokenEntry]) -> None:
        self._entries = tuple(entries)

    def __len__(self) -> int:
        return len(self._entries)

    def match(self, token: str) -> Principal | None:
        digest = hashlib.sha256(token.encode("utf-8")).digest()
        found: Principal | None = None
        for entry in self._entries:
            if hmac.compare_digest(digest, entry.digest):
                found = entry.principal
        return found


def load_tokens(path: Path) -> TokenTable:
    """The table of a tokens file; TokenFileError (naming the file) when it is invalid."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenFileError([f"cannot read it: {type(exc).__name__}"], str(path)) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise TokenFileError([f"not valid YAML or JSON{at}"], str(path)) from exc
    try:
        return TokenTable(parse_tokens(doc))
    except TokenFileError as exc:
        raise TokenFileError(exc.problems, str(path)) from None


class TokenFile:
    """A tokens file, re-read when it changes. Raises TokenFileError at construction if the
    file is invalid (the API then does not start)."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.monotonic,
                 recheck_s: float = 1.0) -> None:
        self.path = path
        self._clock, self._recheck_s = clock, recheck_s
        self._table = load_tokens(path)
        self._stamp = self._stat()
        self._checked = clock()

    def _stat(self) -> tuple[int, int, int]:
        st = self.path.stat()
        return st.st_mtime_ns, st.st_size, st.st_ino

    def _refresh(self) -> None:
        now = self._clock()
        if now - self._checked < self._recheck_s:
            return
        self._checked = now
        try:
            stamp = self._stat()
            if stamp == self._stamp:
                return
            self._stamp = stamp
            self._table = load_tokens(self.path)
            log.info("tokens file %s re-read: %d tokens", self.path, len(self._table))
        except (OSError, TokenFileError) as exc:
            log.error("tokens file %s: keeping the previous tokens: %s", self.path, exc)

    def match(self, token: str) -> Principal | None:
        self._refresh()
        return self._table.match(token)
