"""Shards of a partitioned service against the real dev broker (bus/partitioned.py builds
them this way): a `CoreDriver` per partition, reading only its partition of the
co-partitioned topics (`takes`) and writing snapshots named for it on the service's shared
snapshot topic. A shard restores its own newest snapshot whatever its siblings wrote after
it, never a sibling's, and folds only its partition's tail."""

from __future__ import annotations

from typing import Any

import pytest
from shell_core import AnswerCore, read_topic, submit

from peloton.bus.catalog import topic
from peloton.bus.codec import default_codec
from peloton.bus.driver import CoreDriver
from peloton.bus.faustapp import ensure_topics
from peloton.bus.routing import partition_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

JOBS = [f"job-{i:03d}" for i in range(60)]
SHARDED = {"job-submitted", "job-events"}
N = topic("job-submitted").partitions


def shard(broker: str, p: int) -> CoreDriver:
    return CoreDriver(f"jobmgr-p{p}", AnswerCore(), broker, default_codec(),
                      snapshot_every=10**9, snapshot_service="jobmgr",
                      takes=lambda t, q: t not in SHARDED or q == p)


def of(p: int, jobs: list[str]) -> list[str]:
    return [j for j in jobs if partition_for(j.encode(), N) == p]


async def live(driver: CoreDriver, broker: str, p: int) -> int:
    """Hand the shard its partition of its inputs (what its Faust agent would)."""
    handled = 0
    for partition, offset, key, value in await read_topic(broker, "job-submitted"):
        if partition == p and await driver.on_record(
                "job-submitted", partition, offset, key, value, {"JobSubmitted"}):
            handled += 1
    return handled


def expected(jobs: list[str]) -> dict[str, Any]:
    return {"submitted": {j: 1 for j in sorted(jobs)}, "answered": {j: 1 for j in sorted(jobs)}}


async def test_a_shard_restores_its_own_snapshot_not_a_newer_siblings(
        fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    shards = [shard(fresh_broker, p) for p in range(N)]
    for d in shards:
        await d.rebuild()
        await d.start_live()
    await submit(fresh_broker, JOBS[:40])
    for p, d in enumerate(shards):
        assert await live(d, fresh_broker, p) == len(of(p, JOBS[:40]))
        assert await d.snapshot()
    await submit(fresh_broker, JOBS[40:])
    for p, d in reversed(list(enumerate(shards))):  # siblings' snapshots come after p0's
        await live(d, fresh_broker, p)
        if p:
            assert await d.snapshot()
    for d in shards:
        await d.stop()

    again = shard(fresh_broker, 0)  # partition 0 moved to another instance
    folded = await again.rebuild()
    tail = of(0, JOBS[40:])
    assert folded == 2 * len(tail)  # its submissions and answers after its snapshot
    assert again.core.snapshot() == expected(of(0, JOBS)) == shards[0].core.snapshot()
    assert again.last_snapshot_ms is not None
    assert await live(again, fresh_broker, 0) == 0  # every input was decided: none again
    await again.stop()


async def test_a_shard_without_a_snapshot_of_its_own_replays_its_partition_only(
        fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    one = shard(fresh_broker, 1)
    await one.rebuild()
    await one.start_live()
    await submit(fresh_broker, JOBS)
    await live(one, fresh_broker, 1)
    assert await one.snapshot()  # only partition 1 ever wrote one
    await one.stop()
    zero = shard(fresh_broker, 0)
    folded = await zero.rebuild()
    assert folded == len(of(0, JOBS))  # its submissions, never answered: no sibling state
    assert zero.core.snapshot() == {"submitted": {j: 1 for j in sorted(of(0, JOBS))},
                                    "answered": {}}
    assert zero.last_snapshot_ms is None
