"""Running one health check of a real process: a command in its sandbox, or an HTTP GET.

- `command_probe(command, cwd, env, timeout_s)`: `/bin/sh -c command` in the task's
  sandbox with the task's environment, in its own process group (SIGKILLed as a group on
  timeout, and by PR_SET_PDEATHSIG if the agent dies). Passes on exit code 0. `preexec`
  replaces the default child setup: the runner passes its confinement's (the task user,
  then the death signal), so a check runs as the task's user.
- `http_probe(port, path, timeout_s)`: `GET http://127.0.0.1:<port><path>` (HTTP/1.0,
  `Connection: close`). Passes on a 2xx or 3xx status line.
Both are asyncio all the way (no thread, no blocking call on the event loop), never raise
for a failing check (the reason is in `ProbeResult.error`), and finish within
`timeout_s` plus the time to reap a killed check.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from peloton.agent import procutil

__all__ = ["ProbeResult", "command_probe", "http_probe", "http_status_ok"]

SHELL = "/bin/sh"
_OUTPUT_TAIL = 200  # bytes of a failing command's output kept for the message


@dataclass(frozen=True, slots=True)
class ProbeResult:
    passed: bool
    error: str = ""  # why it failed ("" when it passed)


async def command_probe(command: str, cwd: Path, env: Mapping[str, str],
                        timeout_s: float,
                        preexec: Callable[[], None] | None = None) -> ProbeResult:
    try:
        proc = await asyncio.create_subprocess_exec(
            SHELL, "-c", command, cwd=cwd, env=dict(env), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec if preexec is not None else procutil.child_setup())
    except (OSError, ValueError) as exc:
        return ProbeResult(False, f"could not run the check: {exc}")
    try:
        output, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        procutil.signal_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return ProbeResult(False, f"timed out after {timeout_s:g}s")
    assert proc.returncode is not None
    if proc.returncode == 0:
        return ProbeResult(True)
    procutil.signal_group(proc.pid, signal.SIGKILL)  # whatever it left behind
    tail = output[-_OUTPUT_TAIL:].decode(errors="replace").strip()
    outcome = procutil.describe_exit(proc.returncode)
    return ProbeResult(False, f"{outcome}: {tail}" if tail else outcome)


def http_status_ok(status_line: bytes) -> tuple[bool, str]:
    """(passed, reason) for an HTTP status line such as b"HTTP/1.0 200 OK\\r\\n"."""
    parts = status_line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        shown = status_line[:60].decode(errors="replace").strip()
        return False, f"not an HTTP response: {shown!r}"
    code = int(parts[1])
    if 200 <= code < 400:
        return True, ""
    return False, f"HTTP {code}"


async def http_probe(port: int, path: str, timeout_s: float) -> ProbeResult:
    if not 0 < port < 65536:
        return ProbeResult(False, f"no port to check (got {port})")
    writer: asyncio.StreamWriter | None = None

    async def get() -> bytes:
        nonlocal writer
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n"
                     "Connection: close\r\n\r\n".encode())
        await writer.drain()
        return await reader.readline()

    try:
        line = await asyncio.wait_for(get(), timeout_s)
    except TimeoutError:
        return ProbeResult(False, f"GET {path} on port {port} timed out after {timeout_s:g}s")
    except OSError as exc:
        return ProbeResult(False, f"GET {path} on port {port}: {exc.strerror or exc}")
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    passed, reason = http_status_ok(line)
    return ProbeResult(passed, "" if passed else f"GET {path} on port {port}: {reason}")
