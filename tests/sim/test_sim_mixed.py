"""`peloton sim mixed`: every job type on the production cores under simulated time, a
small scenario end to end: batch borrows, the service arrives and takes its reservation
back (preemption), rolls to version 2, a host is maintained; the figures are there."""

from __future__ import annotations

from pathlib import Path

import yaml

from peloton.sim.mixed import load_mixed, run_mixed, write_mixed

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sim" / "mixed.yaml"


def small() -> str:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["duration_s"] = 600
    doc["hosts"]["count"] = 6
    for pool in doc["pools"].values():
        for r in pool["resources"]:
            r["reservation"] = r["reservation"] / 2
            r["limit"] = r["limit"] / 2
    jobs = {j["id"]: j for j in doc["jobs"]}
    jobs["web"]["job"]["instanceCount"] = 12
    jobs["store"]["job"]["instanceCount"] = 3  # the services fit /services' reservation
    jobs["etl"]["count"] = 4
    for event, at in zip(doc["events"], (200, 330, 540), strict=True):
        event["at_s"] = at
    doc["events"][0]["job"]["instanceCount"] = 12
    doc["events"][1]["maintenance"] = ["host-3"]
    doc["events"][2]["maintenance"] = ["host-3"]
    return yaml.safe_dump(doc)


def test_a_mixed_scenario_runs_on_the_real_cores(tmp_path: Path) -> None:
    result = run_mixed(load_mixed(small()), lambda m, f: None)
    assert result["tasks_run_twice_at_once"] == 0 and result["dead_letters"] == 0
    assert "update of web: SUCCEEDED" in " ".join(result["outcomes"])
    assert result["preempted_runs"] > 0  # the services took their reservation back
    assert 0.5 < result["utilization_mean"] <= 1.05
    assert result["jain_over_pools_mean"] is not None
    assert result["submit_to_running_s"]["n"] > 0
    states = {s["t"]: s["hosts_up"] for s in result["samples"]}
    assert min(states.values()) < 6 and states[max(states)] == 6  # host-3 left and came back
    written = write_mixed(result, tmp_path)
    assert (tmp_path / "metrics.json") in written
