"""Client shims for the dev/test broker (Tansu), in one place, used only against it.

Measured gaps (see docs/dev-stack.md):
- ListOffsets "latest" answers the first offset of the last batch + 1, not the log end.
  `log_end_offsets` instead fetches and reads the high watermark from the fetch response,
  which Tansu reports correctly. Against Apache Kafka `consumer.end_offsets` is exact.
- A fetch is answered only when fetch_max_wait expires, even when records arrive sooner
  (measured: a Faust hop took 250-750 ms with Faust's fixed 1500 ms). Against the dev
  broker every consumer here asks for `FETCH_MAX_WAIT_MS`, and `patch_faust_fetch_wait`
  makes Faust's consumer do the same.
- InitProducerId v0 is rejected, so idempotent producers are off on the dev broker
  (`producer_settings`). Transactions are not real there (aborted records stay visible),
  so nothing here relies on them.
"""

from __future__ import annotations

import asyncio
import os

from aiokafka import AIOKafkaConsumer, TopicPartition

__all__ = ["is_dev_broker", "log_end_offsets", "producer_settings", "consumer_settings",
           "patch_faust_fetch_wait", "FETCH_MAX_WAIT_MS"]

FETCH_MAX_WAIT_MS = 25


def is_dev_broker() -> bool:
    """True unless PELOTON_BROKER_KIND=kafka (production sets it)."""
    return os.environ.get("PELOTON_BROKER_KIND", "tansu") != "kafka"


def producer_settings() -> dict[str, object]:
    if is_dev_broker():
        return {"enable_idempotence": False, "acks": 1}
    return {"enable_idempotence": True, "acks": "all"}


def consumer_settings() -> dict[str, object]:
    return {"fetch_max_wait_ms": FETCH_MAX_WAIT_MS} if is_dev_broker() else {}


def patch_faust_fetch_wait() -> None:
    """Make Faust's aiokafka consumer use FETCH_MAX_WAIT_MS (dev broker only; idempotent)."""
    if not is_dev_broker():
        return
    import types

    import aiokafka
    from faust.transport.drivers import aiokafka as driver

    if getattr(driver.aiokafka, "_peloton_patched", False):
        return

    class _Consumer(aiokafka.AIOKafkaConsumer):  # type: ignore[misc]
        def __init__(self, *args: object, **kwargs: object) -> None:
            kwargs["fetch_max_wait_ms"] = FETCH_MAX_WAIT_MS
            super().__init__(*args, **kwargs)

    shim = types.SimpleNamespace(**vars(aiokafka))
    shim.AIOKafkaConsumer = _Consumer
    shim._peloton_patched = True
    driver.aiokafka = shim  # type: ignore[assignment]


async def log_end_offsets(
    consumer: AIOKafkaConsumer, partitions: list[TopicPartition]
) -> dict[TopicPartition, int]:
    """The true end offset of each partition (the next offset to be written)."""
    if not is_dev_broker():
        return dict(await consumer.end_offsets(partitions))
    ends: dict[TopicPartition, int] = {}
    for tp in partitions:
        consumer.seek(tp, 0)
    pending = set(partitions)
    deadline = asyncio.get_running_loop().time() + 10.0
    while pending and asyncio.get_running_loop().time() < deadline:
        await consumer.getmany(*pending, timeout_ms=200, max_records=1)
        for tp in list(pending):
            hw = consumer.highwater(tp)
            if hw is not None:
                ends[tp] = hw
                pending.discard(tp)
    for tp in pending:  # an empty partition whose fetch never answered
        ends[tp] = 0
    return ends
