"""`peloton serve <svc>`: the snapshot options reach the shell (and its driver) and show
in `--help`. The shell is the real ServiceShell with `run` replaced (no broker needed)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from peloton.bus import service
from peloton.cli.serve_cmd import build

SNAPSHOTTING = ["jobmgr", "hostmgr", "resmgr", "placement"]
WIDE = {"COLUMNS": "240", "TERMINAL_WIDTH": "240", "NO_COLOR": "1"}


@pytest.fixture
def shells(monkeypatch: pytest.MonkeyPatch) -> list[service.ServiceShell]:
    built: list[service.ServiceShell] = []

    class Recorded(service.ServiceShell):
        def run(self) -> None:
            built.append(self)

    monkeypatch.setattr(service, "ServiceShell", Recorded)
    for var in ("PELOTON_SNAPSHOT_INTERVAL", "PELOTON_SNAPSHOT_EVERY", "PELOTON_SNAPSHOTS"):
        monkeypatch.delenv(var, raising=False)
    return built


def serve(*args: str, env: dict[str, str] | None = None) -> Any:
    if args[0] == "resmgr" and "--help" not in args:  # it always elects (nothing dialed)
        args = (*args, "--etcd", "127.0.0.1:1")
    result = CliRunner().invoke(build(), list(args), env=WIDE | (env or {}))
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.parametrize("svc", SNAPSHOTTING)
def test_help_shows_the_snapshot_options(svc: str) -> None:
    out = serve(svc, "--help").output
    for option in ("--snapshot-interval", "--snapshot-every", "--no-snapshots"):
        assert option in out, (svc, option)


@pytest.mark.parametrize("svc", SNAPSHOTTING)
def test_the_snapshot_options_reach_the_driver(svc: str,
                                               shells: list[service.ServiceShell]) -> None:
    serve(svc, "--snapshot-interval", "2.5", "--snapshot-every", "123")
    serve(svc, "--no-snapshots")
    serve(svc, "--snapshot-interval", "0", env={"PELOTON_SNAPSHOT_EVERY": "0"})
    serve(svc)
    got = [(s.driver.snapshot_interval_s, s.driver.snapshot_every, s.driver.snapshots_enabled)
           for s in shells]
    assert got == [(2.5, 123, True), (10.0, 20_000, False), (0.0, 0, True),
                   (10.0, 20_000, True)]
    assert all(s.name == svc for s in shells)


def test_with_both_triggers_off_no_snapshot_is_ever_due(
        shells: list[service.ServiceShell]) -> None:
    serve("jobmgr", "--snapshot-interval", "0", "--snapshot-every", "0")
    driver = shells[0].driver
    driver.folded_since_snapshot = 10**9
    driver._last_snapshot_at = 0.0  # long ago
    assert not driver.snapshot_due()
    serve("jobmgr", "--snapshot-interval", "0.001")
    later = shells[1].driver
    later.folded_since_snapshot = 1
    later._last_snapshot_at = 0.0
    assert later.snapshot_due()


def test_a_negative_interval_is_refused() -> None:
    result = CliRunner().invoke(build(), ["jobmgr", "--snapshot-every", "-1"], env=WIDE)
    assert result.exit_code == 2
