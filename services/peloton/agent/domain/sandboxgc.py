"""Which sandbox directories to delete: finished runs' sandboxes past their retention (pure).

Input: the directories under one sandbox root, each with the time its run ended (the
shell reads the exit record's mtime; a directory without one, left by a previous agent
incarnation that died, is dated by its own mtime), the names the runner still knows
(running, or finished and not yet forgotten), the current time and the retention.

Guarantees of `expired`:
- never the volumes directory (`VOLUMES_DIR`): stateful instances' data is never collected;
- never a name in `keep` (a running task's sandbox, or one whose run the agent still
  tracks: its logs are still served and a redelivered launch still finds it);
- a sandbox whose run ended at `ended_at_ms` goes once `now_ms >= ended_at_ms +
  retention_ms`, not before (so its logs stay readable for the whole retention);
- the answer is sorted, and the same inputs give the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass

__all__ = ["SandboxEntry", "expired", "DEFAULT_SANDBOX_RETENTION_S"]

DEFAULT_SANDBOX_RETENTION_S = 6 * 3600.0


@dataclass(frozen=True, slots=True)
class SandboxEntry:
    name: str
    ended_at_ms: int


def expired(entries: Iterable[SandboxEntry], keep: Set[str], now_ms: int,
            retention_ms: int, volumes_dir: str) -> list[str]:
    """Names of the sandboxes to delete now (see the module doc)."""
    return sorted({
        e.name for e in entries
        if e.name != volumes_dir and e.name not in keep
        and now_ms >= e.ended_at_ms + retention_ms
    })
