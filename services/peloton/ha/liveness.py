"""Is the process that left a record behind certainly gone? (restart fast paths)

A killed process leaves things that outlive it: its consumer-group member, its leader key
and lease. Waiting for the broker or etcd to expire them costs a restart seconds; a restart
of the same instance may instead take them over, but only when the process that held them
is certainly dead. `process_token` describes this process; `certainly_gone(token)` is True
only when the token names a process on this machine, this boot and this pid namespace whose
pid is no longer alive. Anything else (this process itself, another machine,
another container, a process that is alive but frozen, an unreadable token) answers False,
and the caller waits the slow, safe way.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["process_token", "certainly_gone"]


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def _place() -> dict[str, Any]:
    return {"host": os.uname().nodename, "boot": _boot_id(), "pidns": _pid_namespace()}


def process_token() -> dict[str, Any]:
    """This process: its pid and where that pid means something (JSON-able)."""
    return {"pid": os.getpid(), **_place()}


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():  # this process (or a dead one whose pid it got): not "gone"
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (killed, not yet reaped by its parent) exists but runs no more
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def certainly_gone(token: Any) -> bool:
    """True only if `token` (a `process_token` of some process) names a dead process."""
    if not isinstance(token, dict):
        return False
    place = _place()
    if not place["boot"] or not place["pidns"]:
        return False  # cannot tell processes apart here
    try:
        pid = int(token["pid"])
        same = all(token[k] == v for k, v in place.items())
    except (KeyError, TypeError, ValueError):
        return False
    return same and pid > 0 and not _pid_alive(pid)
