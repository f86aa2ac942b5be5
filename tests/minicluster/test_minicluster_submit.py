"""`submit_jobs` against a real dev broker: all at once, or paced at a rate (the burst
benchmark's sustained-load mode)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from peloton.bus.faustapp import ensure_topics
from peloton.minicluster.load import submit_jobs
from peloton.minicluster.servers import free_port, start_tansu

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("rate", [0.0, 20.0])
def test_submitted_jobs_are_spaced_by_the_rate(tmp_path: Path, rate: float) -> None:
    server = start_tansu(free_port(), tmp_path / "tansu.log")
    try:
        asyncio.run(ensure_topics(server.address))
        jobs = [(f"paced-{i}", 2) for i in range(6)]
        submitted = asyncio.run(submit_jobs(server.address, jobs, rate=rate))
    finally:
        server.stop()
    assert list(submitted) == [j for j, _ in jobs]
    times = list(submitted.values())
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    if rate:
        # job i leaves i/rate s after the first: 50 ms apart, never early
        assert min(gaps) >= 40 and times[-1] - times[0] >= 5 * 1000 / rate - 10
    else:
        assert times[-1] - times[0] < 200  # no pacing: all sent at once
