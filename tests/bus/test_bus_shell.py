"""The shell itself against the real dev broker (and etcd): decide, publish, then commit.

Each test has a broker of its own. The driver (`peloton.bus.driver.CoreDriver`) is what
the Faust agents call; here the tests hand it the records, from offset 0 each time (a
consumer that lost its group offsets: the worst case for the skip rule).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from shell_core import (
    AnswerCore,
    DiscardingCore,
    answers,
    consume_live,
    driver_for,
    log_state,
    produce,
    read_topic,
    rejected,
    submit,
)

from peloton.bus.codec import default_codec
from peloton.bus.faustapp import ensure_topics
from peloton.bus.publisher import Publisher
from peloton.bus.snapshots import FORMAT, SnapshotHeader, encode_state, write_snapshot
from peloton.model.event import Event

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

JOBS = [f"job-{i:03d}" for i in range(40)]


async def test_a_restarted_shell_neither_refolds_nor_skips(fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    await submit(fresh_broker, JOBS[:10])
    first = driver_for(fresh_broker, AnswerCore(answer_backlog=True), snapshot_every=10**9)
    assert await first.rebuild() == 10
    await first.start_live()  # the backlog: the 10 submitted before the start
    await submit(fresh_broker, JOBS[10:20])
    assert await consume_live(first, fresh_broker) == (10, 10)
    await first.stop()

    await submit(fresh_broker, JOBS[20:25])  # while it is down
    second = driver_for(fresh_broker, AnswerCore(answer_backlog=True), snapshot_every=10**9)
    assert await second.rebuild() == 25 + 20  # submissions + its own answers
    await second.start_live()
    await submit(fresh_broker, JOBS[25:30])
    handled, skipped = await consume_live(second, fresh_broker)
    assert (handled, skipped) == (5, 25)
    await second.stop()
    assert await answers(fresh_broker) == {j: 1 for j in JOBS[:30]}
    state = second.core.snapshot()
    assert state == {"submitted": {j: 1 for j in JOBS[:30]},
                     "answered": {j: 1 for j in JOBS[:30]}}
    assert state == await log_state(fresh_broker, AnswerCore())


async def test_a_start_from_a_snapshot_folds_only_the_tail(fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    first = driver_for(fresh_broker, AnswerCore(), snapshot_every=10**9)
    await first.rebuild()
    await first.start_live()
    await submit(fresh_broker, JOBS[:30])
    await consume_live(first, fresh_broker)
    assert await first.snapshot()
    await submit(fresh_broker, JOBS[30:37])
    await consume_live(first, fresh_broker)
    await first.stop()

    second = driver_for(fresh_broker, AnswerCore(), snapshot_every=10**9)
    folded = await second.rebuild()
    assert folded == 7 + 7  # the tail: 7 submissions and the 7 answers published after
    assert second.core.snapshot() == first.core.snapshot()
    assert second.core.snapshot() == await log_state(fresh_broker, AnswerCore())
    assert await consume_live(second, fresh_broker) == (0, 37)


async def _snapshot_then_tail(broker: str) -> dict:  # type: ignore[type-arg]
    first = driver_for(broker, AnswerCore(), snapshot_every=10**9)
    await first.rebuild()
    await first.start_live()
    await submit(broker, JOBS[:12])
    await consume_live(first, broker)
    assert await first.snapshot()
    await submit(broker, JOBS[12:15])
    await consume_live(first, broker)
    await first.stop()
    return first.core.snapshot()  # type: ignore[no-any-return]


async def _write(broker: str, header: SnapshotHeader, blob: bytes) -> None:
    publisher = Publisher(broker, default_codec())
    try:
        await write_snapshot(publisher, "jobmgr-snapshots", header, blob)
    finally:
        await publisher.stop()


def _header(**over: object) -> SnapshotHeader:
    fields: dict[str, object] = dict(format=FORMAT, service="jobmgr", core_version=1,
                                     positions={}, created_at=1, snapshot_id="bad")
    fields.update(over)
    return SnapshotHeader(**fields)  # type: ignore[arg-type]


BAD_SNAPSHOTS = {
    "older format": (_header(format=FORMAT - 1), encode_state({})),
    "another service": (_header(service="placement"), encode_state({})),
    "older core version": (_header(core_version=0), encode_state({})),
    "state the core cannot read": (_header(), encode_state({"bogus": 1})),
    "not compressed JSON": (_header(), b"\x00garbage"),
}


@pytest.mark.parametrize("case", sorted(BAD_SNAPSHOTS))
async def test_the_newest_usable_snapshot_wins_over_a_newer_unusable_one(
        fresh_broker: str, case: str, caplog: pytest.LogCaptureFixture) -> None:
    await ensure_topics(fresh_broker)
    expected = await _snapshot_then_tail(fresh_broker)
    await _write(fresh_broker, *BAD_SNAPSHOTS[case])  # the newest, and unusable
    caplog.set_level(logging.WARNING, logger="peloton.bus.driver")
    second = driver_for(fresh_broker, AnswerCore())
    assert await second.rebuild() == 3 + 3  # the older good snapshot plus its tail
    assert second.core.snapshot() == expected
    assert any("snapshot" in r.getMessage() and "bad" in r.getMessage()
               for r in caplog.records if r.levelno == logging.WARNING)


@pytest.mark.parametrize("case", sorted(BAD_SNAPSHOTS))
async def test_an_unusable_snapshot_means_a_full_replay_with_a_warning(
        fresh_broker: str, case: str, caplog: pytest.LogCaptureFixture) -> None:
    await ensure_topics(fresh_broker)
    await submit(fresh_broker, JOBS[:4])
    await _write(fresh_broker, *BAD_SNAPSHOTS[case])  # the only one, and unusable
    caplog.set_level(logging.WARNING, logger="peloton.bus.driver")
    driver = driver_for(fresh_broker, AnswerCore())
    assert await driver.rebuild() == 4
    assert driver.core.snapshot() == {"submitted": {j: 1 for j in JOBS[:4]}, "answered": {}}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("replaying the whole log" in m for m in warnings), warnings


async def test_a_snapshot_of_another_log_means_a_full_replay(
        fresh_broker: str, caplog: pytest.LogCaptureFixture) -> None:
    """Its positions lie past the log end (the topics were recreated since)."""
    await ensure_topics(fresh_broker)
    await submit(fresh_broker, JOBS[:3])
    stale = {"submitted": {"gone": 1}, "answered": {"gone": 1}}
    await _write(fresh_broker, _header(positions={("job-submitted", 0): 500}),
                 encode_state(stale))
    caplog.set_level(logging.WARNING, logger="peloton.bus.driver")
    driver = driver_for(fresh_broker, AnswerCore())
    assert await driver.rebuild() == 3
    assert driver.core.snapshot() == {"submitted": {j: 1 for j in JOBS[:3]}, "answered": {}}
    assert any("does not fit this log" in r.getMessage() for r in caplog.records)


async def test_of_two_good_snapshots_the_newer_one_is_used(fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    first = driver_for(fresh_broker, AnswerCore(), snapshot_every=10**9)
    await first.rebuild()
    await first.start_live()
    await submit(fresh_broker, JOBS[:5])
    await consume_live(first, fresh_broker)
    assert await first.snapshot()
    await submit(fresh_broker, JOBS[5:9])
    await consume_live(first, fresh_broker)
    assert await first.snapshot()
    await submit(fresh_broker, JOBS[9:10])
    await consume_live(first, fresh_broker)
    await first.stop()
    second = driver_for(fresh_broker, AnswerCore())
    assert await second.rebuild() == 1 + 1
    assert second.core.snapshot() == first.core.snapshot()


async def test_with_snapshots_off_none_is_written_or_read(fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    first = driver_for(fresh_broker, AnswerCore(), snapshot_every=2, snapshots=False)
    await first.rebuild()
    await first.start_live()
    await submit(fresh_broker, JOBS[:6])
    await consume_live(first, fresh_broker)
    assert not await first.snapshot()
    await first.stop()
    assert await read_topic(fresh_broker, "jobmgr-snapshots") == []
    on = driver_for(fresh_broker, AnswerCore())
    await on.rebuild()
    await on.start_live()
    assert await on.snapshot()  # a snapshot exists now; a shell with them off ignores it
    await on.stop()
    second = driver_for(fresh_broker, AnswerCore(), snapshots=False)
    assert await second.rebuild() == 12


async def test_replay_passes_over_the_types_a_core_skips(fresh_broker: str) -> None:
    """Heartbeats (hostmgr's replay_skips) are not replayed: here JobRejected stands in."""
    await ensure_topics(fresh_broker)
    first = driver_for(fresh_broker, AnswerCore())
    await first.rebuild()
    await first.start_live()
    await submit(fresh_broker, JOBS[:4])
    await consume_live(first, fresh_broker)
    await first.stop()

    class Skipping(AnswerCore):
        replay_skips = ("JobRejected",)

    second = driver_for(fresh_broker, Skipping(), snapshots=False)
    assert await second.rebuild() == 4
    assert second.core.snapshot() == {"submitted": {j: 1 for j in JOBS[:4]}, "answered": {}}


async def test_a_corrupt_snapshot_record_means_a_full_replay(
        fresh_broker: str, caplog: pytest.LogCaptureFixture) -> None:
    await ensure_topics(fresh_broker)
    await submit(fresh_broker, JOBS[:4])
    await produce(fresh_broker, [("jobmgr-snapshots", b"manifest", b"PLSNM{not json\n"),
                                 ("jobmgr-snapshots", b"x", b"random bytes")])
    caplog.set_level(logging.WARNING, logger="peloton.bus.driver")
    driver = driver_for(fresh_broker, AnswerCore())
    assert await driver.rebuild() == 4
    assert any("replaying the whole log" in r.getMessage() for r in caplog.records)


async def test_a_manifest_whose_chunks_are_not_its_own_is_never_read(
        fresh_broker: str, caplog: pytest.LogCaptureFixture) -> None:
    await ensure_topics(fresh_broker)
    await submit(fresh_broker, JOBS[:3])
    # an unusable snapshot (older core version), then a manifest copied from it that
    # claims the same chunk for another snapshot id
    old = SnapshotHeader(FORMAT, "jobmgr", 0, {("job-submitted", 0): 10**6}, 1, "lost")
    await _write(fresh_broker, old, encode_state({"submitted": {}, "answered": {}}))
    records = await read_topic(fresh_broker, "jobmgr-snapshots")
    manifest = records[-1][3]
    assert manifest is not None and b'"core_version":0' in manifest
    forged = manifest.replace(b'"lost"', b'"lost2"').replace(b'"core_version":0',
                                                           b'"core_version":1')
    await produce(fresh_broker, [("jobmgr-snapshots", b"manifest", forged)])
    caplog.set_level(logging.WARNING, logger="peloton.bus.driver")
    driver = driver_for(fresh_broker, AnswerCore())
    assert await driver.rebuild() == 3
    assert driver.core.snapshot()["submitted"] == {j: 1 for j in JOBS[:3]}
    assert any("is not chunk 0" in r.getMessage() for r in caplog.records)


async def test_an_undecodable_record_is_dead_lettered_and_the_next_one_handled(
        fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    codec = default_codec()
    driver = driver_for(fresh_broker, AnswerCore())
    await driver.rebuild()
    await driver.start_live()
    misplaced = codec.encode("JobRejected", {"job_id": "x", "at": 1, "name": "n",
                                             "reasons": []})
    await produce(fresh_broker, [("job-submitted", b"job-a", b"not avro at all"),
                                 ("job-submitted", b"job-a", misplaced)])
    await submit(fresh_broker, ["job-a"])  # same key: same partition, after the bad ones
    assert await consume_live(driver, fresh_broker) == (3, 0)
    await driver.stop()
    letters = [codec.decode(v)[1] for _, _, _, v in await read_topic(fresh_broker,
                                                                     "dead-letters")]
    assert [(d["source_topic"], d["value"]) for d in letters] == [
        ("job-submitted", b"not avro at all"), ("job-submitted", misplaced)]
    assert "C3 01 marker" in letters[0]["reason"]
    assert "does not belong on topic job-submitted" in letters[1]["reason"]
    assert await answers(fresh_broker) == {"job-a": 1}


async def test_a_handler_that_raises_half_way_leaves_the_core_as_the_log_says(
        fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    driver = driver_for(fresh_broker, AnswerCore(fail_on=frozenset({"job-b"})))
    await driver.rebuild()
    await driver.start_live()
    await submit(fresh_broker, ["job-a"])
    await consume_live(driver, fresh_broker)
    await submit(fresh_broker, ["job-b"])
    await consume_live(driver, fresh_broker)
    assert driver.rebuilds == 1
    # the log has job-b's submission but no answer; so has the core (it was rebuilt)
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())
    assert driver.core.snapshot()["answered"] == {"job-a": 1}
    letters = await read_topic(fresh_broker, "dead-letters")
    reason = default_codec().decode(letters[0][3])[1]["reason"]
    assert len(letters) == 1 and "half-way through job-b" in reason
    await submit(fresh_broker, ["job-c"])  # the service keeps going
    assert (await consume_live(driver, fresh_broker))[0] == 1
    await driver.stop()
    assert await answers(fresh_broker) == {"job-a": 1, "job-c": 1}


async def test_a_core_that_can_undo_is_not_rebuilt_when_its_handler_raises(
        fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    core = DiscardingCore(fail_on=frozenset({"job-b"}))
    driver = driver_for(fresh_broker, core)
    await driver.rebuild()
    await driver.start_live()
    await submit(fresh_broker, ["job-a", "job-b", "job-c"])
    await consume_live(driver, fresh_broker)
    await driver.stop()
    assert driver.rebuilds == 0 and core.discarded == 1 and driver.core is core
    assert await answers(fresh_broker) == {"job-a": 1, "job-c": 1}
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())


class BacklogBomb(AnswerCore):
    """after_replay raises half-way (after marking answers it never returns)."""

    def after_replay(self, now: int) -> list[Event]:
        for jid in self.submitted:
            self.answered[jid] += 1
        if "job-boom" in self.submitted:
            raise RuntimeError("backlog bug")
        return []


async def test_an_after_replay_that_raises_leaves_the_core_as_the_log_says(
        fresh_broker: str, caplog: pytest.LogCaptureFixture) -> None:
    await ensure_topics(fresh_broker)
    await submit(fresh_broker, ["job-a", "job-boom"])
    driver = driver_for(fresh_broker, BacklogBomb())
    assert await driver.rebuild() == 2  # no crash
    assert driver.backlog == []
    assert driver.core.snapshot() == {"submitted": {"job-a": 1, "job-boom": 1},
                                      "answered": {}}
    assert any("after_replay raised" in r.getMessage() for r in caplog.records)
    await driver.start_live()
    await submit(fresh_broker, ["job-c"])
    assert (await consume_live(driver, fresh_broker))[0] == 1  # it keeps going
    await driver.stop()
    assert await answers(fresh_broker) == {"job-c": 1}


async def test_an_event_that_does_not_encode_publishes_nothing_of_its_decision(
        fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    core = DiscardingCore(bad_body_on=frozenset({"job-b"}))
    driver = driver_for(fresh_broker, core)
    await driver.rebuild()
    await driver.start_live()
    await submit(fresh_broker, ["job-a", "job-b"])
    await consume_live(driver, fresh_broker)
    await driver.stop()
    assert await answers(fresh_broker) == {"job-a": 1}  # not even the good half of job-b
    assert driver.rebuilds == 0 and core.discarded == 1  # the core could undo it itself
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())
    letters = await read_topic(fresh_broker, "dead-letters")
    assert "unencodable event" in default_codec().decode(letters[0][3])[1]["reason"]


async def test_a_lease_lost_at_publish_time_publishes_nothing(
        fresh_broker: str, etcd_endpoint: str) -> None:
    """Real etcd: the decision for job-slow blocks the loop past the lease's TTL, so the
    lease is gone (by the election's own clock) when the shell is about to publish. The
    core goes back to what the log says; once it leads again it starts from the log, and
    its backlog decides job-slow (and job-c, which arrived meanwhile) once."""
    from peloton.ha.election import LeaderElection

    await ensure_topics(fresh_broker)
    election = LeaderElection(etcd_endpoint, "/test/bus-shell", "me", ttl=1.0)
    await election.start()
    try:
        await election.wait_until_leader(timeout=10)
        core = AnswerCore(slow_on=frozenset({"job-slow"}), slow_s=1.6, answer_backlog=True)
        driver = driver_for(fresh_broker, core, leading=election.still_leader)
        await driver.rebuild()
        await driver.start_live()
        await submit(fresh_broker, ["job-a"])
        await consume_live(driver, fresh_broker)
        await submit(fresh_broker, ["job-slow"])
        await consume_live(driver, fresh_broker)
        assert driver.rebuilds == 1
        assert await answers(fresh_broker) == {"job-a": 1}
        assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())
        assert driver.core.snapshot()["answered"] == {"job-a": 1}
        assert await read_topic(fresh_broker, "dead-letters") == []  # not the record's fault
        await election.wait_until_leader(timeout=10)  # leads again: decides again
        await submit(fresh_broker, ["job-c"])
        await consume_live(driver, fresh_broker)
        await submit(fresh_broker, ["job-d"])
        await consume_live(driver, fresh_broker)
        await driver.stop()
        assert await answers(fresh_broker) == {"job-a": 1, "job-slow": 1, "job-c": 1,
                                               "job-d": 1}
        assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())
    finally:
        await election.stop()


async def test_a_standby_publishes_nothing_and_a_new_leader_starts_from_the_log(
        fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    await submit(fresh_broker, ["job-a", "job-b"])  # before the start: the backlog
    lease = [False]
    driver = driver_for(fresh_broker, AnswerCore(answer_backlog=True),
                        leading=lambda: lease[0])
    await driver.rebuild()
    await driver.start_live()  # the start's backlog is undone, not published
    assert driver.rebuilds == 1
    assert driver.core.snapshot() == {"submitted": {"job-a": 1, "job-b": 1}, "answered": {}}
    await submit(fresh_broker, ["job-c"])  # decided by the standby, not published
    assert await consume_live(driver, fresh_broker) == (1, 2)
    assert driver.rebuilds == 2  # its decision was dropped: the core is the log's again
    assert not await driver.snapshot()  # only the leader writes snapshots
    assert await answers(fresh_broker) == {}
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())
    lease[0] = True  # wins the lease: rebuilds, then publishes the backlog once
    await driver.flush_recovery()
    assert driver.rebuilds == 3
    await submit(fresh_broker, ["job-d"])
    assert await consume_live(driver, fresh_broker) == (1, 3)
    await driver.stop()
    assert await answers(fresh_broker) == {j: 1 for j in ("job-a", "job-b", "job-c", "job-d")}
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())


class FoldingCore(AnswerCore):
    """Consumes its own answers live too, and counts an answer only when it comes back
    through the log (as resmgr, placement and hostmgr do)."""

    inputs = ("job-submitted", "job-events")

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        self.handled += 1
        self.fold(etype, body)
        jid = body["job_id"]
        return [Event("JobRejected", jid, rejected(jid))] if etype == "JobSubmitted" else []

    def after_replay(self, now: int) -> list[Event]:
        return [Event("JobRejected", j, rejected(j)) for j in sorted(self.submitted)
                if not self.answered[j]]


async def test_a_new_leader_that_consumes_all_it_replays_takes_over_without_a_rebuild(
        fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    await submit(fresh_broker, ["job-a"])
    lease = [False]
    driver = driver_for(fresh_broker, FoldingCore(answer_backlog=True),
                        leading=lambda: lease[0])
    await driver.rebuild()
    await driver.start_live()  # the start's backlog (job-a) is undone
    await submit(fresh_broker, ["job-b"])
    await consume_live(driver, fresh_broker)
    assert await answers(fresh_broker) == {}
    rebuilt = driver.rebuilds
    lease[0] = True
    await driver.flush_recovery()
    assert driver.rebuilds == rebuilt  # no replay at takeover: the core was the log's
    assert await answers(fresh_broker) == {"job-a": 1, "job-b": 1}
    await submit(fresh_broker, ["job-c"])
    await consume_live(driver, fresh_broker)  # its own answers come back: folded once
    await driver.stop()
    assert await answers(fresh_broker) == {"job-a": 1, "job-b": 1, "job-c": 1}
    assert driver.core.snapshot() == await log_state(fresh_broker, AnswerCore())


async def test_a_snapshot_above_the_message_limit_is_chunked_and_read_back(
        fresh_broker: str) -> None:
    import os

    from peloton.bus.snapshots import CHUNK_BYTES, read_newest

    await ensure_topics(fresh_broker)
    blob = os.urandom(2 * CHUNK_BYTES + 1000)  # incompressible: three chunks
    header = _header(snapshot_id="big", positions={("job-submitted", 2): 5})
    await _write(fresh_broker, header, blob)
    records = await read_topic(fresh_broker, "jobmgr-snapshots")
    assert len(records) == 4 and all(len(v or b"") < 1 << 20 for *_, v in records)
    snap = await read_newest(fresh_broker, "jobmgr-snapshots", "jobmgr", 1)
    assert snap.blob == blob and snap.header == header


async def test_snapshots_are_taken_after_enough_records(fresh_broker: str) -> None:
    from peloton.bus.snapshots import read_newest

    await ensure_topics(fresh_broker)
    driver = driver_for(fresh_broker, AnswerCore(), snapshot_every=5)
    await driver.rebuild()
    await driver.start_live()
    await submit(fresh_broker, JOBS[:7])
    await consume_live(driver, fresh_broker)
    await driver.stop()
    snap = await read_newest(fresh_broker, "jobmgr-snapshots", "jobmgr", 1)
    covered = sum(o for (t, _), o in snap.header.positions.items() if t == "job-submitted")
    answered = sum(o for (t, _), o in snap.header.positions.items() if t == "job-events")
    assert covered == 5 and answered == 5  # the positions cover exactly what was answered


async def _one_batch(broker: str, records: list[tuple[str, bytes, bytes]]) -> None:
    """Send records in one produce batch per partition (Tansu's ListOffsets then answers
    the first offset of that batch + 1 as "latest", not the log end)."""
    import asyncio

    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=broker, enable_idempotence=False, acks=1,
                                linger_ms=200, max_batch_size=4 << 20)
    await producer.start()
    try:
        futures = [await producer.send(t, value=v, key=k) for t, k, v in records]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def test_the_log_end_is_the_true_one_despite_tansu_list_offsets(
        fresh_broker: str) -> None:
    """Replay and the snapshot reader find the real log end when the last batch holds many
    records: 10 submissions of one job key in one batch, and a snapshot followed by the
    chunks of a snapshot whose writer died (no manifest) in one batch."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from shell_core import submitted

    from peloton.bus.codec import default_codec as codec_
    from peloton.bus.keys import record_key
    from peloton.bus.snapshots import read_newest

    await ensure_topics(fresh_broker)
    first = driver_for(fresh_broker, AnswerCore(), snapshot_every=10**9)
    await first.rebuild()
    await first.start_live()
    await submit(fresh_broker, ["job-a"])
    await consume_live(first, fresh_broker)
    assert await first.snapshot()
    await first.stop()
    codec = codec_()
    body = submitted("job-same")
    await _one_batch(fresh_broker, [("job-submitted", record_key("JobSubmitted", body),
                                     codec.encode("JobSubmitted", body))] * 10)
    await _one_batch(fresh_broker, [("jobmgr-snapshots", f"chunk-{i}".encode(),
                                     b'PLSNC{"id":"died","index":%d}\n' % i + b"x" * 100)
                                    for i in range(8)])
    consumer = AIOKafkaConsumer(bootstrap_servers=fresh_broker)
    await consumer.start()
    try:
        tps = [TopicPartition("jobmgr-snapshots", 0)]
        listed = await consumer.end_offsets(tps)
    finally:
        await consumer.stop()
    snap = await read_newest(fresh_broker, "jobmgr-snapshots", "jobmgr", 1)
    assert snap.header == first._last_snapshot.header  # type: ignore[union-attr]
    second = driver_for(fresh_broker, AnswerCore())
    assert await second.rebuild() == 10, f"ListOffsets said {listed}"
    assert second.core.snapshot()["submitted"] == {"job-a": 1, "job-same": 10}
