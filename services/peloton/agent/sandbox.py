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
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from peloton.agent.errors import InvalidRunIdError, UnknownRunError
from peloton.agent.status import LogStream, RunState

__all__ = ["SandboxStore", "ExitRecord", "validate_run_id", "LOG_STREAMS"]

LOG_STREAMS: tuple[LogStream, ...] = ("stdout", "stderr")
_RUN_ID = re.compile(r"[A-Za-z0-9_:@+=-][A-Za-z0-9._:@+=-]{0,199}")
_EXIT_RECORD = ".peloton-exit.json"
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

    def create(self, run_id: str) -> Path:
        """Create the sandbox directory (and the root); raise FileExistsError if present."""
        path = self.path_for(run_id)
        self.root.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o755)
        return path

    def write_exit(self, run_id: str, record: ExitRecord) -> None:
        path = self.path_for(run_id)
        tmp = path / (_EXIT_RECORD + ".tmp")
        payload = {
            "state": str(record.state),
            "exit_code": record.exit_code,
            "message": record.message,
        }
        tmp.write_text(json.dumps(payload))
        os.replace(tmp, path / _EXIT_RECORD)

    def read_exit(self, run_id: str) -> ExitRecord | None:
        """The run's exit record, or None if it never finished (or the record is unreadable)."""
        try:
            data = json.loads((self.path_for(run_id) / _EXIT_RECORD).read_text())
            return ExitRecord(RunState(data["state"]), data["exit_code"], str(data["message"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

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
            with open(path / stream, "rb") as f:
                if tail_bytes is not None:
                    size = os.fstat(f.fileno()).st_size
                    f.seek(max(0, size - tail_bytes))
                return f.read()
        except FileNotFoundError:
            return b""
