"""Per-run sandbox directories: `<root>/<run_id>/` holding `stdout`, `stderr` and a record
of how the run ended.

A run_id must be a single safe path component: 1-200 characters from [A-Za-z0-9._:@+=-],
not starting with '.' (so never '.' or '..'), and not "volumes" (the stateful instances'
volumes live there, `peloton.agent.volumes`); anything else raises InvalidRunIdError
before any filesystem access. The resolved path is checked once more to sit directly
under the root, so a symlinked root cannot be escaped through the id either.

The exit record (`.peloton-exit.json`) is written atomically when a run ends. It lets an
agent restarted on the same root tell "finished earlier" from "lost when the previous agent
died" for a launch request redelivered after the restart.

Confined tasks (`create(run_id, task_gid)`): the directory is created with `stdout` and
`stderr` inside (0644, the agent's), and only then handed to the task's group as mode
1770 (sticky): the task may create files there but cannot remove or replace the agent's
files. The task can still plant names the agent has not written yet, so every access of
the agent opens without following symlinks (O_NOFOLLOW), logs only as regular files, and
an exit record counts only if the agent's own user owns it. The agent may be root and
serves logs over HTTP: a task must not make it read or write anything outside.

Garbage collection: `entries()` lists the sandboxes with the time their run ended (the
exit record's mtime, else the directory's: a run lost with a previous incarnation) for
`peloton.agent.domain.sandboxgc`; `remove(run_id)` deletes one (symlink-safe rmtree).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from peloton.agent.domain.sandboxgc import SandboxEntry
from peloton.agent.errors import InvalidRunIdError, UnknownRunError
from peloton.agent.status import LogStream, RunState

__all__ = ["SandboxStore", "ExitRecord", "validate_run_id", "LOG_STREAMS"]

LOG_STREAMS: tuple[LogStream, ...] = ("stdout", "stderr")
_RUN_ID = re.compile(r"[A-Za-z0-9_:@+=-][A-Za-z0-9._:@+=-]{0,199}")
_EXIT_RECORD = ".peloton-exit.json"
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
CONFINED_MODE = 0o1770  # sticky, group-writable: see the module doc
RESERVED_NAME = "volumes"  # stateful instances' volumes live there (peloton.agent.volumes)


def validate_run_id(run_id: str) -> str:
    """Return run_id unchanged if it is a safe single path component, else raise."""
    if not isinstance(run_id, str) or _RUN_ID.fullmatch(run_id) is None:
        raise InvalidRunIdError(
            f"invalid run_id {run_id!r}: need 1-200 of [A-Za-z0-9._:@+=-], not starting with '.'"
        )
    return run_id


def _sandbox_name(run_id: str) -> str:
    validate_run_id(run_id)
    if run_id == RESERVED_NAME:
        raise InvalidRunIdError(f"run_id {run_id!r} is reserved for the volumes directory")
    return run_id


@dataclass(frozen=True, slots=True)
class ExitRecord:
    state: RunState
    exit_code: int | None
    message: str


class SandboxStore:
    """Filesystem layout of the sandboxes under one root directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path_for(self, run_id: str) -> Path:
        _sandbox_name(run_id)
        path = self.root / run_id
        if path.resolve().parent != self.root.resolve():
            raise InvalidRunIdError(f"run_id {run_id!r} escapes the sandbox root")
        return path

    def exists(self, run_id: str) -> bool:
        return self.path_for(run_id).is_dir()

    def create(self, run_id: str, task_gid: int | None = None) -> Path:
        """Create the sandbox directory (and the root) with empty `stdout` and `stderr`;
        with `task_gid`, hand it to that group (see the module doc). Raises
        FileExistsError if present."""
        path = self.path_for(run_id)
        self.root.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o755)
        for stream in LOG_STREAMS:
            os.close(os.open(path / stream, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW,
                             0o644))
        if task_gid is not None:
            os.chown(path, -1, task_gid)
            os.chmod(path, CONFINED_MODE)
        return path

    def open_log(self, run_id: str, stream: LogStream) -> int:
        """A write fd on the run's `stream` file (made by create), for the task."""
        return os.open(self.path_for(run_id) / stream, os.O_WRONLY | os.O_APPEND | _NOFOLLOW)

    def write_exit(self, run_id: str, record: ExitRecord) -> None:
        path = self.path_for(run_id)
        tmp = path / (_EXIT_RECORD + ".tmp")
        payload = {
            "state": str(record.state),
            "exit_code": record.exit_code,
            "message": record.message,
        }
        tmp.unlink(missing_ok=True)  # whatever a task may have planted there
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(payload))
        os.replace(tmp, path / _EXIT_RECORD)

    def read_exit(self, run_id: str) -> ExitRecord | None:
        """The run's exit record, or None if it never finished (or the record is unreadable,
        or not the agent's own)."""
        try:
            fd = os.open(self.path_for(run_id) / _EXIT_RECORD, os.O_RDONLY | _NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_uid != os.geteuid() or not stat.S_ISREG(st.st_mode):
                    return None
                data = json.loads(f.read())
            return ExitRecord(RunState(data["state"]), data["exit_code"], str(data["message"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def entries(self) -> list[SandboxEntry]:
        """Every sandbox under the root with its end time in ms (see the module doc);
        names that are not sandboxes (the volumes directory, stray files) are left out."""
        found = []
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return []
        for name in names:
            if name == RESERVED_NAME or _RUN_ID.fullmatch(name) is None:
                continue
            path = self.root / name
            try:
                if not stat.S_ISDIR(os.lstat(path).st_mode):
                    continue
                try:
                    ended = os.lstat(path / _EXIT_RECORD).st_mtime_ns
                except FileNotFoundError:
                    ended = os.lstat(path).st_mtime_ns
            except FileNotFoundError:
                continue
            found.append(SandboxEntry(name, ended // 1_000_000))
        return found

    def remove(self, run_id: str) -> None:
        """Delete the run's sandbox and everything in it (never follows symlinks)."""
        path = self.path_for(run_id)
        if os.path.lexists(path):
            shutil.rmtree(path)

    def read_log(self, run_id: str, stream: LogStream, tail_bytes: int | None = None) -> bytes:
        """Return the run's captured stream, or only its last `tail_bytes` bytes.

        Raises InvalidRunIdError, ValueError (bad stream / negative tail) or UnknownRunError
        when the sandbox does not exist. A sandbox whose stream file is missing (spawn failed
        before it was created) reads as empty.
        """
        if stream not in LOG_STREAMS:
            raise ValueError(f"stream must be one of {LOG_STREAMS}, not {stream!r}")
        if tail_bytes is not None and tail_bytes < 0:
            raise ValueError("tail_bytes must be >= 0")
        path = self.path_for(run_id)
        if not path.is_dir():
            raise UnknownRunError(f"no sandbox for run {run_id!r} under {self.root}")
        try:
            fd = os.open(path / stream, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW)
        except FileNotFoundError:
            return b""
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ValueError(f"{stream} of run {run_id!r} is not a regular file")
            if tail_bytes is not None:
                f.seek(max(0, st.st_size - tail_bytes))
            return f.read()
