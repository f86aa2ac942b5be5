"""The unprivileged user tasks run as.

- `resolve_task_user(name)`: when the agent runs as root (euid 0), tasks run as `name`
  (from `--task-user` / PELOTON_TASK_USER), by default `peloton-task` if that user exists,
  else `nobody`; root itself is refused (that is what confinement is for). When the agent
  is not root it cannot switch users: tasks run as the agent's own user, and the result
  says so (`switched` False, `note`), also when a name was asked for.
- `TaskUser.switch()`: called in the forked child before exec (see `confinement`):
  setgroups(the user's groups), setgid, setuid, in that order (after setuid nothing else
  could be dropped). A no-op when not switching.
- `TaskUser.give(path)`: chown a directory the task must write (its volume) to the user.
- `TaskUser.unreachable(path)`: the first directory on `path` the task user cannot search, so
  the agent refuses a sandbox root its tasks could not reach by absolute path
  ($PELOTON_SANDBOX, $PELOTON_VOLUME) instead of failing every launch obscurely.

Errors: `TaskUserError` (an `AgentError`) for an unknown user, root, or a user whose
groups cannot be read.
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass, field
from pathlib import Path

from peloton.agent.errors import AgentError

__all__ = ["TaskUser", "TaskUserError", "resolve_task_user", "DEFAULT_TASK_USERS"]

DEFAULT_TASK_USERS = ("peloton-task", "nobody")


class TaskUserError(AgentError):
    """The configured task user cannot be used."""


@dataclass(frozen=True, slots=True)
class TaskUser:
    name: str
    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    switched: bool = False  # the agent is root and drops to this user in each task
    note: str = field(default="", compare=False)

    def describe(self) -> str:
        who = f"{self.name} (uid {self.uid}, gid {self.gid})"
        return f"tasks run as {who}" + (f"; {self.note}" if self.note else "")

    def switch(self) -> None:
        """In the forked child: become the task user (no-op when not switching)."""
        if not self.switched:
            return
        os.setgroups(list(self.groups))
        os.setgid(self.gid)
        os.setuid(self.uid)

    def give(self, path: Path) -> None:
        """Make `path` (a directory the agent created) the task user's."""
        if self.switched:
            os.chown(path, self.uid, self.gid, follow_symlinks=False)

    def can_search(self, st: os.stat_result) -> bool:
        if st.st_uid == self.uid:
            return bool(st.st_mode & stat.S_IXUSR)
        if st.st_gid == self.gid or st.st_gid in self.groups:
            return bool(st.st_mode & stat.S_IXGRP)
        return bool(st.st_mode & stat.S_IXOTH)

    def unreachable(self, path: Path) -> Path | None:
        """The first existing directory on `path` (from /) this user cannot search."""
        if not self.switched:
            return None
        current = Path(path).resolve()
        for directory in (*reversed(current.parents), current):
            try:
                st = directory.stat()
            except FileNotFoundError:
                return None  # the agent creates the rest, searchable (0o755)
            if not self.can_search(st):
                return directory
        return None


def resolve_task_user(name: str | None) -> TaskUser:
    """The user tasks run as (see the module doc). Raises TaskUserError."""
    euid = os.geteuid()
    if euid != 0:
        me = _name_of(euid)
        asked = f" (asked for {name!r}: switching users needs root)" if name and name != me \
            else ""
        return TaskUser(me, euid, os.getegid(), tuple(os.getgroups()), switched=False,
                        note=f"the agent is not root, so tasks run as its own user{asked}")
    candidates = (name,) if name else DEFAULT_TASK_USERS
    for candidate in candidates:
        try:
            entry = pwd.getpwnam(candidate) if not candidate.isdigit() \
                else pwd.getpwuid(int(candidate))
        except KeyError:
            continue
        if entry.pw_uid == 0:
            raise TaskUserError(f"task user {candidate!r} is root: tasks would not be confined")
        try:
            groups = tuple(sorted(set(os.getgrouplist(entry.pw_name, entry.pw_gid))))
        except OSError as exc:
            raise TaskUserError(f"cannot read the groups of {candidate!r}: {exc}") from exc
        return TaskUser(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, switched=True)
    raise TaskUserError(f"no such user: {' or '.join(repr(c) for c in candidates)}")


def _name_of(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)

