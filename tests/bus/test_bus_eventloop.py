"""The processes' event loop (`peloton.bus.eventloop`): uvloop unless PELOTON_UVLOOP=0 or
uvloop is missing, and what the services do on it (a forked snapshot child, timers) works
there as on asyncio's loop."""

from __future__ import annotations

import asyncio
import sys

import pytest

from peloton.bus import eventloop, snapshotfork
from peloton.interpreter import interpreter


@pytest.fixture(autouse=True)
def _default_policy() -> None:
    # asyncio's default, whatever ran before (tests/conftest.py restores it after)
    asyncio.set_event_loop_policy(None)


def _new_loop_name() -> str:
    loop = asyncio.new_event_loop()
    try:
        return eventloop.loop_name(loop)
    finally:
        loop.close()


def test_install_makes_new_loops_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(eventloop.ENV, raising=False)
    assert _new_loop_name() == "asyncio"
    assert eventloop.install() == "uvloop"
    assert _new_loop_name() == "uvloop"


@pytest.mark.parametrize("value", ["0", " 0 "])
def test_PELOTON_UVLOOP_0_keeps_asyncios_loop(monkeypatch: pytest.MonkeyPatch,
                                              value: str) -> None:
    monkeypatch.setenv(eventloop.ENV, value)
    assert eventloop.install() == "asyncio"
    assert _new_loop_name() == "asyncio"


def test_without_uvloop_installed_asyncios_loop_is_kept(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv(eventloop.ENV, raising=False)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    with caplog.at_level("INFO", logger="peloton.bus.eventloop"):
        assert eventloop.install() == "asyncio"
    assert _new_loop_name() == "asyncio"
    assert "uvloop is not installed" in caplog.text


def test_a_snapshot_child_forked_from_a_running_uvloop_loop_delivers() -> None:
    """The services fork their snapshot child from inside the running loop; the child must
    not need the loop (uvloop's rule for forked processes), and the parent's loop goes on."""
    assert eventloop.install() == "uvloop"
    state = {"runs": list(range(50_000))}

    async def fork_and_collect() -> tuple[bytes, str]:
        child = snapshotfork.start(lambda: repr(state).encode())
        assert child is not None
        state["runs"].append(-1)  # the parent changes its state after the fork
        body = await asyncio.get_running_loop().run_in_executor(None, child.collect)
        await asyncio.sleep(0.01)  # timers still fire on the parent's loop
        return body, eventloop.loop_name(asyncio.get_running_loop())

    body, name = asyncio.run(fork_and_collect())
    assert name == "uvloop"
    assert body == repr({"runs": list(range(50_000))}).encode()


def test_the_start_line_names_the_loop_and_the_interpreter() -> None:
    loop = asyncio.new_event_loop()
    try:
        assert eventloop.running_on("agent a", loop) == (
            f"agent a: running on the asyncio event loop, {interpreter()}")
    finally:
        loop.close()
