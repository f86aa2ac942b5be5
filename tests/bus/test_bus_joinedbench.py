"""`peloton bench joined` on the real dev broker: both logs hold every fact (a reader
returns only after the last), the joined log in fewer records, and the ratio printed is
that of the two figures of the run."""

from __future__ import annotations

import pytest

from peloton.bus.joinedbench import LOGS, _facts, joined_bench

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_both_logs_are_read_to_the_last_fact_and_the_joined_one_has_fewer_records() -> None:
    steps: list[str] = []
    result = joined_bench(3_000, batch=32, repeats=1,
                          progress=lambda message, _f: steps.append(message))
    assert result["a record per job: records"] == 3_000
    assert 3_000 / 32 <= result["joined: records"] <= 3_000 / 32 * 4 + 4  # <= 4 partitions
    costs = {log: result[f"{log}: us per fact"] for log in LOGS}
    assert all(c > 0 for c in costs.values())
    assert result["joined / a record per job"] == pytest.approx(
        costs["joined"] / costs["a record per job"], rel=0.02)
    assert [s.split(" (")[0] for s in steps] == ["writing 3,000 facts"] * 2 + [
        "reading a record per job", "reading joined"]


def test_the_facts_are_jobs_of_one_to_eight_tasks_in_the_job_managers_order() -> None:
    facts = _facts(400, seed=3)
    assert len(facts) == 400
    by_job: dict[str, list[str]] = {}
    for f in facts:
        assert 1 <= len(f["changes"]) <= 4
        assert all(0 <= c["instance"] < 8 for c in f["changes"])
        by_job.setdefault(f["job_id"], []).append(f["changes"][0]["state"])
    assert all(s == ["PENDING", "READY", "PLACED", "RUNNING"][:len(s)] for s in by_job.values())
    assert facts == _facts(400, seed=3) != _facts(400, seed=4)


@pytest.mark.parametrize(("facts", "batch", "repeats"), [(0, 32, 1), (10, 0, 1), (10, 4, 0)])
def test_nothing_to_read_is_refused_before_any_broker_starts(facts: int, batch: int,
                                                             repeats: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        joined_bench(facts, batch, repeats)
