"""`peloton bench intake` on the real dev broker: each reader takes every record (a
reader's process returns only after its last record), and the figures it prints are
those readers' costs and their ratios to the raw consumer."""

from __future__ import annotations

import pytest

from peloton.bus.intakebench import READERS, intake_bench

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_every_reader_reads_every_record_and_the_ratios_are_to_the_raw_consumer() -> None:
    steps: list[str] = []
    result = intake_bench(5_000, repeats=2,
                          progress=lambda message, _f: steps.append(message))
    assert result["records"] == 5_000
    costs = {r: result[f"{r}: us per record"] for r in READERS}
    assert all(c > 0 for c in costs.values())
    for reader in READERS[1:]:
        assert result[f"{reader} / aiokafka"] == pytest.approx(
            costs[reader] / costs["aiokafka"], rel=0.02)
    assert result["batch intake / record by record"] == pytest.approx(
        costs["batch intake"] / costs["intake, record by record"], rel=0.02)
    assert steps[0].startswith("writing") and len(steps) == 1 + 2 * len(READERS)


@pytest.mark.parametrize(("records", "repeats"), [(0, 2), (-5, 2), (100, 0)])
def test_nothing_to_read_is_refused_before_any_broker_starts(records: int, repeats: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        intake_bench(records, repeats=repeats)
