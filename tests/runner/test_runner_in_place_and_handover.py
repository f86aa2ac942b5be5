"""On the production cores (in-memory runner, simulated time), a rolling update puts every
new run back on its instance's host (in place), and a drain of a tenth of the hosts keeps
every service instance serving (replacement first) - the `bench workloads` scenario, small."""

from __future__ import annotations

from peloton.runner.workloadbench import run_workloads


def test_updates_run_in_place_and_drains_never_take_a_service_instance_down() -> None:
    out = run_workloads(hosts=100, instances=300, progress=lambda *_: None)
    assert out["up: ok"] and out["update: ok"] and out["drain: ok"], out
    # (without the in-place pin about 185 of the 300 land back on their host here)
    assert out["update: instances updated in place (same host)"] == 300
    assert out["update: most instances down at once"] <= out["maximumUnavailableInstances"]
    assert out["drain: most instances down at once"] == 0
    assert out["drain: replacements started before the old run stopped"] >= 1
    assert out["tasks run twice at once"] == 0 and out["dead letters"] == 0
