"""Snapshots built in a forked child, so a snapshot holds the service's loop for a fork
(milliseconds), not for as long as the core takes to write its state.

Writing the state is O(state): with 100,000 tasks in flight on 10,000 hosts it held the
host manager's loop 340 ms and the job manager's 220 ms every ten seconds (measured), and
everything queued behind it: a snapshot set the p99 of submit -> RUNNING. So, the way
Redis writes its RDB files, `start` forks: the child has a copy-on-write image of the core
as it was at the fork (taken under the driver's lock, with the positions it covers, so
state and positions agree as before), turns it into the snapshot's bytes and sends them
through a pipe; the parent goes on folding and deciding while a thread waits for them
(`Child.collect`).

The child runs nothing but `build`: garbage collection off (a collection would walk, and
copy, every page of the heap), SIGINT/SIGTERM at their defaults and no signal wake-up fd
(a signal to the process group must not reach the parent's loop through the child), no
logging, and `os._exit` whatever happens (no atexit hooks, no Faust shutdown, no buffered
output written twice). The parent's other threads do not exist in the child and it never
touches their locks, sockets or the event loop (gRPC's fork support is off by default and
the child makes no call into it). The reply is framed (a status byte, a length, the
bytes), so a child that died half-way is told from one that finished, whoever reaped it.

Cost: the child touches every object of the state (reference counts), so the pages that
hold them are copied: up to the state's size in extra memory while the child lives (a
second or so). A state whose last snapshot was small is built in the loop
(`worth_forking`), and so is every state with `PELOTON_SNAPSHOT_FORK=0`, on a platform
without `os.fork`, or when a fork fails (ENOMEM, EAGAIN: logged).
"""

from __future__ import annotations

import gc
import logging
import os
import select
import signal
import struct
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ENV", "FORK_ABOVE_BYTES", "BuildFailed", "Child", "fork_enabled",
           "worth_forking", "start"]

log = logging.getLogger(__name__)

ENV = "PELOTON_SNAPSHOT_FORK"
#: a child that has not answered by then is killed (a build takes about a second)
TIMEOUT_S = 300.0
#: a state whose last snapshot compressed to less is built in the loop: it takes about as
#: long as a fork and a child (~10 ms; measured ~0.5-1.3 ms of building per KB written)
FORK_ABOVE_BYTES = 16 << 10
_OK, _ERROR = b"O", b"E"
_HEAD = struct.Struct(">cQ")  # status, length of what follows


class BuildFailed(Exception):
    """The child did not deliver the snapshot: its error, or how it ended. `crashed`: it
    ended without a reply (killed, timed out, died): forking itself is suspect."""

    def __init__(self, message: str, crashed: bool = True) -> None:
        super().__init__(message)
        self.crashed = crashed


def fork_enabled() -> bool:
    """Forking is on unless PELOTON_SNAPSHOT_FORK=0, where the platform has os.fork."""
    return os.environ.get(ENV, "1") != "0" and hasattr(os, "fork")


def worth_forking(last_size: int | None) -> bool:
    """Whether a state whose last snapshot was `last_size` bytes is built by a child
    (None: no snapshot yet; the state may already be large, a fork is cheap)."""
    return last_size is None or last_size >= FORK_ABOVE_BYTES


@dataclass
class Child:
    """A forked child building a snapshot; `collect` (blocking: call it in a thread)."""

    pid: int
    fd: int
    timeout_s: float = TIMEOUT_S

    def collect(self) -> bytes:
        """The child's bytes, once it has sent them all; BuildFailed otherwise. Always
        reaps the child and closes the pipe."""
        try:
            data = self._read_all()
        finally:
            os.close(self.fd)
            ended = _reap(self.pid)
        if len(data) < _HEAD.size:
            raise BuildFailed(f"the snapshot child {ended} after {len(data)} bytes")
        status, length = _HEAD.unpack_from(data)
        body = data[_HEAD.size:]
        if len(body) != length:
            raise BuildFailed(f"the snapshot child sent {len(body)} of {length} bytes")
        if status != _OK:
            raise BuildFailed(body.decode("utf-8", "replace").strip(), crashed=False)
        return body

    def _read_all(self) -> bytes:
        parts: list[bytes] = []
        deadline = time.monotonic() + self.timeout_s
        poller = select.poll()  # not select(): a service may hold more than 1,024 fds
        poller.register(self.fd, select.POLLIN)
        while True:
            left_ms = max(0, round((deadline - time.monotonic()) * 1000))
            if not poller.poll(left_ms):
                os.kill(self.pid, signal.SIGKILL)
                raise BuildFailed(f"the snapshot child took over {self.timeout_s:.0f} s; "
                                  "killed")
            part = os.read(self.fd, 1 << 20)
            if not part:
                return b"".join(parts)
            parts.append(part)


def start(build: Callable[[], bytes]) -> Child | None:
    """Fork a child that runs `build` and sends its bytes back; None when forking is off
    or failed (the caller builds in the loop)."""
    if not fork_enabled():
        return None
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        log.warning("snapshot: fork failed (%s); building in the loop", exc)
        return None
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        _run_child(build, write_fd)
    os.close(write_fd)
    return Child(pid, read_fd)


def _run_child(build: Callable[[], bytes], fd: int) -> None:
    code = 0
    try:
        gc.disable()
        _quiet_signals()
        try:
            reply = _frame(_OK, build())
        except BaseException:  # everything is reported: the parent logs it
            code = 1
            reply = _frame(_ERROR, traceback.format_exc().encode())
        _write_all(fd, reply)
    except BaseException:  # the parent is gone or the pipe broke: nothing to tell
        code = 2
    finally:
        os._exit(code)


def _frame(status: bytes, data: bytes) -> bytes:
    return _HEAD.pack(status, len(data)) + data


def _quiet_signals() -> None:
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
    except (ValueError, OSError):  # not the main thread: the parent's handlers stay
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _reap(pid: int) -> str:
    """Wait for the child; how it ended, in words."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:  # someone else reaped it; the framing tells how it went
        return "ended"
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"
