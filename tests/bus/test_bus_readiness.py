"""A shell says it is ready (its ready file, /readyz's "consuming") only once its
partitions are assigned and its own start-up is done, in either order
(`peloton.bus.readiness`): Faust completes the first rebalance before it starts the
fetcher and the shell's services, and a shell that said ready then could still fail to
start. Checked on a real Faust app's rebalance signal; the whole service in
tests/bus/test_bus_stopdeadline.py."""

from __future__ import annotations

from pathlib import Path

import faust
import pytest

from peloton.bus.readiness import announce_ready


def _app(name: str) -> faust.App:
    return faust.App(name, broker="kafka://127.0.0.1:1")


@pytest.mark.parametrize("start_first", [True, False])
async def test_ready_once_both_assigned_and_started(tmp_path: Path, start_first: bool,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "ready" / "svc"
    monkeypatch.setenv("PELOTON_READY_FILE", str(marker))
    app = _app(f"readiness-{start_first}")
    calls: list[str] = []
    started = announce_ready(app, "svc", on_ready=lambda: calls.append("ready"),
                             after_start=True)
    if start_first:
        started()
        assert not marker.exists() and calls == []  # no partitions yet
        await app.on_rebalance_complete.send()
    else:
        await app.on_rebalance_complete.send()
        assert not marker.exists() and calls == []  # assigned, not started
        started()
    assert marker.read_text().strip().isdigit() and calls == ["ready"]
    started()  # a second call announces nothing more ...
    assert calls == ["ready"]
    await app.on_rebalance_complete.send()  # ... every later rebalance does
    assert calls == ["ready", "ready"]


async def test_without_a_start_up_to_wait_for_the_rebalance_is_enough(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "ready" / "api"
    monkeypatch.setenv("PELOTON_READY_FILE", str(marker))
    app = _app("readiness-api")
    announce_ready(app, "api")
    assert not marker.exists()
    await app.on_rebalance_complete.send()
    assert marker.exists()
