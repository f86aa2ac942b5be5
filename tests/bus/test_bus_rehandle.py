"""Topics a core reads whole with no group offset (`core.rehandle`, bus/rehandle.py), on
the real dev broker: their positions are in the core's snapshots, and a rebuild handles
their records again from there, so a successor decides what its predecessor had not
published, and nothing twice.

The core here answers each submission once (a JobRejected on job-events, which it
replays); it reads job-submitted whole and never folds it, as a job manager shard reads
the agents' statuses."""

from __future__ import annotations

from typing import Any

import pytest
from shell_core import AnswerCore, answers, consume_live, driver_for, rejected, submit

from peloton.bus.faustapp import ensure_topics
from peloton.model.event import Event

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

JOBS = [f"job-{i:02d}" for i in range(30)]


class WholeCore(AnswerCore):
    inputs: tuple[str, ...] = ("job-submitted",)
    replay: tuple[str, ...] = ("job-events",)
    rehandle: tuple[str, ...] = ("job-submitted",)

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        self.handled += 1
        jid = body["job_id"]
        if self.answered[jid]:  # idempotent to a submission read again
            return []
        self.answered[jid] += 1
        return [Event("JobRejected", jid, rejected(jid))]


async def started(broker: str) -> Any:
    driver = driver_for(broker, WholeCore(), snapshot_every=10**9)
    async with driver.lock:
        await driver.rebuild()
    await driver.start_live()
    return driver


async def first_reading(broker: str, jobs: list[str]) -> Any:
    """A first driver that has read and answered the submissions of `jobs`."""
    await ensure_topics(broker)
    first = await started(broker)
    await submit(broker, jobs)
    assert (await consume_live(first, broker))[0] == len(jobs)
    return first


async def test_a_successor_decides_what_was_read_after_the_snapshot_and_nothing_twice(
        fresh_broker: str) -> None:
    first = await first_reading(fresh_broker, JOBS[:20])
    assert await first.snapshot()
    snap = first._last_snapshot
    assert snap is not None
    whole = {tp: o for tp, o in snap.header.positions.items() if tp[0] == "job-submitted"}
    assert sum(whole.values()) == 20  # the snapshot covers the records read whole
    await first.stop()
    # the first dies; ten more submissions arrive that it never read
    await submit(fresh_broker, JOBS[20:])
    second = await started(fresh_broker)
    assert second.core.handled == 10  # only the records after the snapshot's positions
    assert second.folded_since_snapshot == 10  # so its next snapshot is due, as after folds
    assert await answers(fresh_broker) == {j: 1 for j in JOBS}
    assert sum(o for tp, o in second.positions.items() if tp[0] == "job-submitted") == 30
    assert await consume_live(second, fresh_broker) == (0, 30)  # all already handled
    await second.stop()


async def test_without_a_snapshot_every_record_is_handled_again_and_decided_once(
        fresh_broker: str) -> None:
    first = await first_reading(fresh_broker, JOBS[:12])
    await first.stop()
    await submit(fresh_broker, JOBS[12:15])
    second = await started(fresh_broker)
    assert second.core.handled == 15  # from the start: the answers folded make 12 nothing
    assert second.folded_since_snapshot == 12 + 15  # the answers folded, the 15 read whole
    assert await answers(fresh_broker) == {j: 1 for j in JOBS[:15]}
    await second.stop()


async def test_a_rebuild_that_does_not_decide_handles_nothing_again(
        fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    await submit(fresh_broker, JOBS[:5])
    driver = driver_for(fresh_broker, WholeCore(), snapshot_every=10**9)
    async with driver.lock:
        await driver.rebuild(decide=False)  # a standby's: its decisions would be dropped
    assert driver.core.handled == 0 and driver.backlog == []
    assert not any(tp[0] == "job-submitted" for tp in driver.positions)
