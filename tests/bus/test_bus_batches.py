"""The shell's batches against the real dev broker: a batch of records is decided in
order, its events are published at once and their delivery awaited once, and only then do
the records' positions advance. A failure in a batch leaves the core as the log says.

Every batch here is one partition's records in offset order (one key), as a Faust agent
hands them over (`stream.take_events`).
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY
from shell_core import (
    AnswerCore,
    DiscardingCore,
    answers,
    driver_for,
    log_state,
    produce,
    read_topic,
    refusing,
    submitted,
)

from peloton.bus import driver as driver_module
from peloton.bus.catalog import topic
from peloton.bus.codec import default_codec
from peloton.bus.driver import CoreDriver, Record
from peloton.bus.faustapp import ensure_topics
from peloton.bus.publisher import PublishError
from peloton.model.event import Event

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

JOBS = [f"job-{i}" for i in range(1, 6)]  # job-3 is the third record of the batch
CARRIES = {"job-submitted": set(topic("job-submitted").events)}


async def submit_one_partition(broker: str, job_ids: list[str]) -> None:
    codec = default_codec()
    await produce(broker, [("job-submitted", b"one-key", codec.encode("JobSubmitted",
                                                                      submitted(j)))
                           for j in job_ids])


async def the_batch(broker: str) -> list[Record]:
    return [("job-submitted", p, o, k, v)
            for p, o, k, v in sorted(await read_topic(broker, "job-submitted"))]


async def started(broker: str, core: AnswerCore, **kw: Any) -> CoreDriver:
    await ensure_topics(broker)
    driver = driver_for(broker, core, snapshot_every=10**9, **kw)
    await driver.rebuild()
    await driver.start_live()
    return driver


def refusals_counted(retriable: str) -> float:
    """`peloton_publish_refused_total` of the job manager's service label so far."""
    return REGISTRY.get_sample_value("peloton_publish_refused_total",
                                     {"service": "jobmgr", "retriable": retriable}) or 0.0


async def dead_letters(broker: str) -> list[dict[str, Any]]:
    codec = default_codec()
    return [codec.decode(v)[1] for _, _, _, v in await read_topic(broker, "dead-letters")]


def positions_of(driver: CoreDriver, batch: list[Record]) -> dict[tuple[str, int], int]:
    return {(t, p): driver.positions.get((t, p), 0) for t, p, _, _, _ in batch}


async def test_a_batch_is_published_at_once_and_its_positions_advance_after_delivery(
        fresh_broker: str) -> None:
    driver = await started(fresh_broker, AnswerCore())
    await submit_one_partition(fresh_broker, JOBS)
    batch = await the_batch(fresh_broker)
    before = positions_of(driver, batch)
    seen_at_send: list[dict[tuple[str, int], int]] = []
    real_send = driver.publisher.send_all

    async def send_all(records: Any) -> Any:
        seen_at_send.append(positions_of(driver, batch))
        delivered = await real_send(records)
        seen_at_send.append(positions_of(driver, batch))  # delivered, not yet committed
        return delivered

    driver.publisher.send_all = send_all  # type: ignore[method-assign]
    assert await driver.on_records(batch, CARRIES) == 5
    await driver.stop()
    assert seen_at_send == [before, before]  # one send for the five records' events
    assert positions_of(driver, batch) == {("job-submitted", batch[0][1]): batch[-1][2] + 1}
    assert await answers(fresh_broker) == {j: 1 for j in JOBS}
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())


async def test_a_batch_whose_third_record_raises_publishes_the_two_before_it(
        fresh_broker: str) -> None:
    """The core cannot undo a call: it is rebuilt from the log, which holds the first two
    records' answers; the rebuild folds the records after the failed one (skipped live)."""
    driver = await started(fresh_broker, AnswerCore(fail_on=frozenset({"job-3"})))
    await submit_one_partition(fresh_broker, JOBS)
    batch = await the_batch(fresh_broker)
    assert await driver.on_records(batch, CARRIES) == 3  # job-4, job-5 folded by the rebuild
    await driver.stop()
    assert driver.rebuilds == 1
    assert await answers(fresh_broker) == {"job-1": 1, "job-2": 1}
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())
    assert driver.core.snapshot()["answered"] == {"job-1": 1, "job-2": 1}
    letters = await dead_letters(fresh_broker)
    assert len(letters) == 1 and "half-way through job-3" in letters[0]["reason"]
    assert letters[0]["offset"] == batch[2][2]
    assert await driver.on_records(batch, CARRIES) == 0  # every position is past the batch


async def test_a_core_that_can_undo_undoes_the_failed_record_and_decides_the_rest(
        fresh_broker: str) -> None:
    core = DiscardingCore(fail_on=frozenset({"job-3"}))
    driver = await started(fresh_broker, core)
    await submit_one_partition(fresh_broker, JOBS)
    batch = await the_batch(fresh_broker)
    assert await driver.on_records(batch, CARRIES) == 5
    await driver.stop()
    assert driver.rebuilds == 0 and core.discarded == 1 and driver.core is core
    assert await answers(fresh_broker) == {j: 1 for j in JOBS if j != "job-3"}
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())
    assert len(await dead_letters(fresh_broker)) == 1


async def test_an_unencodable_event_in_a_batch_publishes_nothing_of_its_record(
        fresh_broker: str) -> None:
    core = DiscardingCore(bad_body_on=frozenset({"job-3"}))
    driver = await started(fresh_broker, core)
    await submit_one_partition(fresh_broker, JOBS)
    assert await driver.on_records(await the_batch(fresh_broker), CARRIES) == 5
    await driver.stop()
    assert await answers(fresh_broker) == {j: 1 for j in JOBS if j != "job-3"}
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())
    letters = await dead_letters(fresh_broker)
    assert len(letters) == 1 and "unencodable event" in letters[0]["reason"]


async def test_an_undecodable_record_in_a_batch_is_dead_lettered_and_the_rest_decided(
        fresh_broker: str) -> None:
    driver = await started(fresh_broker, AnswerCore())
    await submit_one_partition(fresh_broker, JOBS[:2])
    await produce(fresh_broker, [("job-submitted", b"one-key", b"not avro at all")])
    await submit_one_partition(fresh_broker, JOBS[2:])
    assert await driver.on_records(await the_batch(fresh_broker), CARRIES) == 6
    await driver.stop()
    assert driver.rebuilds == 0
    assert await answers(fresh_broker) == {j: 1 for j in JOBS}
    assert [d["value"] for d in await dead_letters(fresh_broker)] == [b"not avro at all"]


class LeaseLostOn(AnswerCore):
    """Loses the lease while deciding job-2 (as a loop blocked past the TTL would)."""

    def __init__(self, lease: list[bool], **kw: Any) -> None:
        super().__init__(**kw)
        self.lease = lease

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        if body["job_id"] == "job-2":
            self.lease[0] = False
        return super().handle(etype, body, now)


async def test_a_lease_lost_at_publish_time_drops_the_whole_batch(fresh_broker: str) -> None:
    lease = [True]
    driver = await started(fresh_broker, LeaseLostOn(lease, answer_backlog=True),
                           leading=lambda: lease[0])
    await submit_one_partition(fresh_broker, JOBS)
    batch = await the_batch(fresh_broker)
    assert await driver.on_records(batch, CARRIES) == 5
    assert driver.rebuilds == 1
    assert await answers(fresh_broker) == {}  # not even job-1's answer, decided in lease
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())
    assert driver.core.snapshot()["answered"] == {}
    assert await dead_letters(fresh_broker) == []  # not the records' fault
    lease[0] = True  # leads again: starts from the log, its backlog decides each once
    await driver.flush_recovery()
    await driver.stop()
    assert await answers(fresh_broker) == {j: 1 for j in JOBS}
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())


async def test_a_batch_the_broker_refuses_for_good_leaves_the_core_as_the_log_says(
        fresh_broker: str) -> None:
    driver = await started(fresh_broker, DiscardingCore())
    await submit_one_partition(fresh_broker, JOBS)
    # the batch's events refused; the dead letters then go through
    refusing(driver, "MessageSizeTooLargeError: refused", retriable=False)
    before = refusals_counted("false")
    assert await driver.on_records(await the_batch(fresh_broker), CARRIES) == 5
    await driver.flush_recovery()
    await driver.stop()
    assert refusals_counted("false") == before + 1
    # five calls to undo: one `discard_unpublished` cannot, so the core was rebuilt
    assert driver.rebuilds == 1 and driver.core.discarded == 0  # type: ignore[attr-defined]
    assert await answers(fresh_broker) == {}
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())
    letters = await dead_letters(fresh_broker)
    assert sorted(d["offset"] for d in letters) == list(range(5))
    assert all("publish failed" in d["reason"] for d in letters)


@pytest.mark.parametrize("refusals", [1, 3])
async def test_a_batch_the_broker_refuses_for_now_is_decided_again_and_nothing_is_lost(
        fresh_broker: str, refusals: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A timeout or a leader moving (a retriable refusal): the batch's records are facts
    nothing else brings back (an agent's end report), so they are decided again once the
    core is back to the log, not dead-lettered and passed (a run's end read in a refused
    batch left its job RUNNING for good)."""
    monkeypatch.setattr(driver_module, "REFUSED_RETRY_S", 0.01)
    driver = await started(fresh_broker, LiveInputCore())
    await submit_one_partition(fresh_broker, JOBS)
    refused = refusing(driver, "RequestTimedOutError: refused for now", retriable=True,
                       times=refusals)
    before = refusals_counted("true")
    assert await driver.on_records(await the_batch(fresh_broker), CARRIES) == 5
    await driver.flush_recovery()
    assert refusals_counted("true") == before + refusals  # what operators see
    # a redelivery of the batch (at least once) decides nothing twice
    assert await driver.on_records(await the_batch(fresh_broker), CARRIES) == 0
    await driver.stop()
    assert refused == [refusals] and driver.rebuilds == refusals
    assert await answers(fresh_broker) == {j: 1 for j in JOBS}  # each decided once
    assert driver.core.answered == {j: 1 for j in JOBS}  # the core holds the log's state
    assert await dead_letters(fresh_broker) == []


async def test_refused_for_too_long_the_driver_stops_and_leaves_the_batch_unread(
        fresh_broker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker that refuses for good while saying "for now" (a topic gone) must not hold
    the service behind its lock for ever: after `REFUSED_GIVE_UP_S` the error reaches the
    caller (the intake, which stops the process), the records neither acked, passed nor
    dead-lettered, so a restart reads them again."""
    monkeypatch.setattr(driver_module, "REFUSED_RETRY_S", 0.01)
    monkeypatch.setattr(driver_module, "REFUSED_GIVE_UP_S", 0.2)
    driver = await started(fresh_broker, LiveInputCore())
    await submit_one_partition(fresh_broker, JOBS)
    tries = refusing(driver, "UnknownTopicOrPartitionError: refused", retriable=True,
                     times=None)
    batch = await the_batch(fresh_broker)
    with pytest.raises(PublishError, match="refused for .* s in a row"):
        await driver.on_records(batch, CARRIES)
    await driver.stop()
    assert tries[0] >= 2  # tried again, pausing, until the deadline
    assert all(driver.positions.get(("job-submitted", p), 0) <= o
               for _t, p, o, _k, _v in batch)  # not passed
    assert await answers(fresh_broker) == {}
    assert await dead_letters(fresh_broker) == []


class LiveInputCore(DiscardingCore):
    """Reads its inputs live only (as the job manager reads the agents' reports): a
    rebuild does not fold them, so a refused decision of one is made again only if the
    record is decided again."""

    replay = ("job-events",)


async def test_batches_that_wait_for_the_lock_are_decided_together(
        fresh_broker: str) -> None:
    """Two agents' batches arrive while a decision holds the lock: the drainer decides
    both at its next turn, in the order they came, with one send; each call learns its own
    count."""
    import asyncio

    driver = await started(fresh_broker, AnswerCore())
    await submit_one_partition(fresh_broker, JOBS)
    batch = await the_batch(fresh_broker)
    sends: list[int] = []
    real_send = driver.publisher.send_all

    async def send_all(records: Any) -> Any:
        sends.append(len(records))
        return await real_send(records)

    driver.publisher.send_all = send_all  # type: ignore[method-assign]
    async with driver.lock:  # a decision in progress
        first = asyncio.create_task(driver.on_records(batch[:2], CARRIES))
        second = asyncio.create_task(driver.on_records(batch[2:], CARRIES))
        await asyncio.sleep(0.05)
        assert not first.done() and not second.done()
    assert await first == 2
    assert await second == 3
    await driver.stop()
    assert sends == [5]
    assert await answers(fresh_broker) == {j: 1 for j in JOBS}
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())


async def test_a_call_whose_batch_is_decided_returns_without_waiting_for_later_batches(
        fresh_broker: str) -> None:
    """A batch that arrives while another round is being decided is decided at the next
    round; the calls whose records the first round decided return as soon as it is
    delivered, not after the next round (they used to queue on the lock behind it)."""
    import asyncio

    driver = await started(fresh_broker, AnswerCore())
    await submit_one_partition(fresh_broker, JOBS)
    batch = await the_batch(fresh_broker)
    sends: list[int] = []
    gate = asyncio.Event()
    real_send = driver.publisher.send_all

    async def send_all(records: Any) -> Any:
        sends.append(len(records))
        if len(sends) == 2:
            await gate.wait()  # the second round's delivery is slow
        return await real_send(records)

    driver.publisher.send_all = send_all  # type: ignore[method-assign]
    async with driver.lock:  # a tick in progress
        first = asyncio.create_task(driver.on_records(batch[:1], CARRIES))
        second = asyncio.create_task(driver.on_records(batch[1:3], CARRIES))
        await asyncio.sleep(0.05)
    third = asyncio.create_task(driver.on_records(batch[3:], CARRIES))  # during round 1
    await asyncio.wait_for(asyncio.gather(first, second), timeout=10)
    await asyncio.sleep(0.05)
    assert sends == [3, 2] and not third.done()  # round 2 is still being delivered
    assert (first.result(), second.result()) == (1, 2)
    gate.set()
    assert await third == 2
    await driver.stop()
    assert await answers(fresh_broker) == {j: 1 for j in JOBS}
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())


async def test_a_standby_that_can_undo_undoes_each_decision_and_never_rebuilds(
        fresh_broker: str) -> None:
    core = DiscardingCore()
    driver = await started(fresh_broker, core, leading=lambda: False)
    await submit_one_partition(fresh_broker, JOBS)
    assert await driver.on_records(await the_batch(fresh_broker), CARRIES) == 5
    await driver.stop()
    assert driver.rebuilds == 0 and core.discarded == 5 and driver.core is core
    assert await answers(fresh_broker) == {}
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())
