"""Low-level process helpers for `ProcessRunner`: child setup, group signals, exit text.

Linux specifics, stated once:
- `child_setup()` returns a preexec_fn that sets PR_SET_PDEATHSIG=SIGKILL through ctypes,
  so the direct child dies with the agent. The kernel fires it when the *thread* that
  forked the child exits, so launch from the event loop's (long-lived) thread. It then
  re-checks the parent pid to close the race where the agent died before prctl ran.
  The death signal is not inherited across fork: grandchildren are covered by
  `peloton.agent.guardian`, not by this.
- libc and prctl are resolved in the parent (once, lazily) so the forked child runs only
  the prctl call and getppid/kill.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
from collections.abc import Callable

__all__ = ["child_setup", "signal_group", "describe_exit", "exit_code_of"]

_PR_SET_PDEATHSIG = 1


@functools.cache
def _prctl() -> Callable[..., int]:
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.prctl
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


def child_setup(death_signal: signal.Signals = signal.SIGKILL,
                before: Callable[[], None] | None = None) -> Callable[[], None] | None:
    """A preexec_fn making the child receive `death_signal` when the agent dies.

    `before` runs first in the child (confinement: cgroup, limits, change of user; a
    change of user resets the death signal, so it must come before prctl).
    Call it in the parent right before spawning (it captures the parent's pid). Off
    Linux, where no death signal exists, it returns `before`.
    """
    if not sys.platform.startswith("linux"):
        return before
    prctl = _prctl()
    parent_pid = os.getpid()
    signum = int(death_signal)

    def setup() -> None:
        if before is not None:
            before()
        if prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(err)}")
        if os.getppid() != parent_pid:  # the agent already died: do not outlive it
            os.kill(os.getpid(), signum)

    return setup


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Send `sig` to process group `pgid`; False if the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        # Only possible if the pgid was recycled by another user's process: not ours.
        return False
    return True


def exit_code_of(returncode: int) -> int | None:
    """Popen returncode -> exit status, or None when the process died by a signal."""
    return returncode if returncode >= 0 else None


def describe_exit(returncode: int) -> str:
    """'exit code 3' or 'killed by signal 9 (SIGKILL)' for a Popen returncode."""
    if returncode >= 0:
        return f"exit code {returncode}"
    signum = -returncode
    try:
        name = signal.Signals(signum).name
    except ValueError:
        return f"killed by signal {signum}"
    return f"killed by signal {signum} ({name})"
