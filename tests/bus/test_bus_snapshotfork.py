"""A snapshot built by a forked child (`peloton.bus.snapshotfork`): the child sees the
state as it was at the fork, sends all of it (more than a pipe holds), and a child that
raised, died half-way or hung is a clear BuildFailed, always reaped."""

from __future__ import annotations

import os
import resource
import time

import pytest

from peloton.bus import snapshotfork
from peloton.bus.snapshotfork import BuildFailed, Child, start


def collect(build: object, **kw: float) -> bytes:
    child = start(build)  # type: ignore[arg-type]
    assert isinstance(child, Child)
    for k, v in kw.items():
        setattr(child, k, v)
    try:
        return child.collect()
    finally:
        with pytest.raises(ChildProcessError):  # reaped whatever happened
            os.waitpid(child.pid, os.WNOHANG)


def test_the_child_sends_the_state_as_it_was_at_the_fork() -> None:
    state = {"tasks": list(range(300_000))}  # ~2 MB of output: many pipe buffers
    child = start(lambda: repr(state).encode())
    assert child is not None
    state["tasks"].append(-1)  # the parent goes on changing its state
    state["late"] = []
    body = child.collect()
    assert body == repr({"tasks": list(range(300_000))}).encode()


def test_a_pipe_numbered_past_1024_is_read() -> None:
    """select() cannot watch fds >= 1024 (found by the suite: its process held 2,600)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the fd limit ({hard}) is too low to open 1,100 files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held: list[int] = []
    try:
        while not held or held[-1] < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        assert collect(lambda: b"past select's limit") == b"past select's limit"
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_empty_output_is_delivered_as_empty() -> None:
    assert collect(lambda: b"") == b""


def test_a_build_that_raises_is_reported_with_its_error() -> None:
    def build() -> bytes:
        raise RuntimeError("state half-migrated")

    with pytest.raises(BuildFailed, match="RuntimeError: state half-migrated") as failed:
        collect(build)
    assert not failed.value.crashed  # the core's error, not the fork's


def test_a_child_that_dies_half_way_is_not_taken_for_a_snapshot() -> None:
    def build() -> bytes:
        os._exit(3)  # like a kill -9 (or the OOM killer) before the reply

    with pytest.raises(BuildFailed, match="exited with status 3 after 0 bytes") as failed:
        collect(build)
    assert failed.value.crashed


def test_a_child_that_hangs_is_killed() -> None:
    def build() -> bytes:
        time.sleep(60)  # SIGKILLed long before
        return b"never"

    began = time.monotonic()
    with pytest.raises(BuildFailed, match="took over 0 s; killed"):
        collect(build, timeout_s=0.3)
    assert time.monotonic() - began < 10


def test_forking_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(snapshotfork.ENV, "0")
    assert not snapshotfork.fork_enabled()
    assert start(lambda: b"x") is None


def test_states_whose_last_snapshot_was_small_are_built_in_the_loop() -> None:
    assert not snapshotfork.worth_forking(snapshotfork.FORK_ABOVE_BYTES - 1)
    assert snapshotfork.worth_forking(snapshotfork.FORK_ABOVE_BYTES)
    assert snapshotfork.worth_forking(None)  # no snapshot yet: it may be large already
