"""The process-group guardian: kills every task's whole process group when the agent dies.

PR_SET_PDEATHSIG only reaches the agent's direct child (`/bin/sh`); anything the shell
forked would be re-parented and survive an agent crash. The guardian is one small helper
process per runner, started lazily in its own session:

- the agent writes "+<pgid>" when a task group starts and "-<pgid>" once it has ended;
- the guardian holds the read end of that pipe. When the agent dies for any reason
  (SIGKILL included) the kernel closes the write end, the guardian reads EOF, SIGKILLs
  every group still registered and exits. A clean `close()` is the same EOF with no
  groups left.

Run as a script (`python -I -S guardian.py`): this file imports only the standard library.
Known window: if the agent dies between reaping a task and writing "-<pgid>", and the pgid
is reused by a new session leader within that window, that group would be killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

__all__ = ["GroupGuardian", "main"]


class GroupGuardian:
    """Agent-side handle of the guardian process. Not thread-safe; use from one loop."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._groups: set[int] = set()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def register(self, pgid: int) -> None:
        self._groups.add(pgid)
        self._send(f"+{pgid}\n")

    def unregister(self, pgid: int) -> None:
        if pgid in self._groups:
            self._groups.discard(pgid)
            self._send(f"-{pgid}\n")

    def close(self, timeout_s: float = 5.0) -> None:
        """Close the pipe (the guardian kills what is still registered) and reap it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        assert proc.stdin is not None
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _send(self, line: str) -> None:
        try:
            self._write(line)
        except OSError:
            # The guardian died (someone killed it): start a new one with every live group.
            self._discard()
            self._write("".join(f"+{g}\n" for g in sorted(self._groups)))

    def _write(self, text: str) -> None:
        if self._proc is None:
            self._proc = _spawn()
        assert self._proc.stdin is not None
        self._proc.stdin.write(text.encode())
        self._proc.stdin.flush()

    def _discard(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.kill()
            proc.wait()


def _spawn() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-I", "-S", str(Path(__file__).resolve())],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        cwd="/",
        start_new_session=True,  # no terminal signals; outlives the agent on purpose
        close_fds=True,
    )


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    groups: set[int] = set()
    try:
        for raw in sys.stdin.buffer:
            line = raw.strip()
            if line[:1] == b"+":
                groups.add(int(line[1:]))
            elif line[:1] == b"-":
                groups.discard(int(line[1:]))
    finally:
        for pgid in groups:
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)


if __name__ == "__main__":
    main()
