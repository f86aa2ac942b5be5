"""The publisher sends a decision's records as soon as they are all handed to the
producer, not after its linger (the caller awaits the delivery before it sends anything
more, so nothing would join them), and a partition's records of one decision go in one
batch even when one of them is a joined TaskStateChanged of a few hundred KiB."""

from __future__ import annotations

import time

import pytest
from shell_core import read_topic

import peloton.bus.publisher as publisher_module
from peloton.bus.codec import default_codec
from peloton.bus.faustapp import ensure_topics
from peloton.bus.publisher import MAX_BATCH_BYTES, Publisher

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


async def test_a_send_does_not_wait_for_the_linger(fresh_broker: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(publisher_module, "LINGER_MS", 20_000)  # far longer than the test
    await ensure_topics(fresh_broker)
    publisher = Publisher(fresh_broker, default_codec())
    try:
        await publisher.start()
        started = time.monotonic()
        delivered = await publisher.send_all([("job-submitted", b"k", b"one"),
                                              ("job-submitted", b"k", b"two")])
        assert time.monotonic() - started < 10  # sent at once, not after 20 s
        assert [offset for _, _, offset in delivered] == [0, 1]
        # a second decision after the first: sent at once as well
        more = await publisher.send_all([("job-submitted", b"k", b"three")])
        assert time.monotonic() - started < 10 and more[0][2] == 2
    finally:
        await publisher.stop()
    values = [v for _, _, _, v in sorted(await read_topic(fresh_broker, "job-submitted"))]
    assert values == [b"one", b"two", b"three"]


async def test_large_records_of_one_partition_are_delivered_in_order(
        fresh_broker: str) -> None:
    big = 300 * 1024  # more than a joined record may hold, less than a batch
    assert big < MAX_BATCH_BYTES
    await ensure_topics(fresh_broker)
    publisher = Publisher(fresh_broker, default_codec())
    records = [("job-submitted", b"k", bytes([i]) * big) for i in range(3)]
    try:
        delivered = await publisher.send_all(records)
    finally:
        await publisher.stop()
    assert [offset for _, _, offset in delivered] == [0, 1, 2]
    stored = [v for _, _, _, v in sorted(await read_topic(fresh_broker, "job-submitted"))]
    assert stored == [v for _, _, v in records]
