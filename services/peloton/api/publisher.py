"""Publishing the API's commands-as-facts (JobSubmitted, JobKillRequested) to the bus.

`Publisher` is the I/O seam: `await publish(event)` returns only once the broker has
acknowledged the record, and raises `PublishError` otherwise. A publisher may also have
`async connected() -> bool` (the API's /readyz asks it; one without it counts as
connected). `KafkaPublisher` is the real one (aiokafka, `send_and_wait`);
`MemoryPublisher` is the shipped fake for unit tests.
An event that does not match its schema raises `peloton.bus.codec.EncodeError` before
anything is sent.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from peloton.api.errors import PublishError
from peloton.bus.catalog import topic_for_event
from peloton.bus.codec import Codec, default_codec
from peloton.bus.kafkaconfig import client_settings
from peloton.bus.metrics import count_published
from peloton.model.event import Event

__all__ = ["Publisher", "KafkaPublisher", "MemoryPublisher", "producer_config"]

log = logging.getLogger(__name__)


class Publisher(Protocol):
    async def publish(self, event: Event) -> None: ...


def producer_config() -> dict[str, Any]:
    """The bus's producer settings (the dev-broker shim's, if present)."""
    try:
        from peloton.bus.devbroker import producer_settings
    except ImportError:  # an older tree without the shim
        return {"enable_idempotence": False, "acks": 1}
    return dict(producer_settings())


class KafkaPublisher:
    """Publishes to the catalog topic of each event type, keyed by the event's key."""

    def __init__(self, bootstrap: str, codec: Codec | None = None,
                 request_timeout_ms: int = 10_000) -> None:
        self.bootstrap = bootstrap
        self.codec = codec or default_codec()
        self._timeout_ms = request_timeout_ms
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        if self._producer is None:
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap,
                                        request_timeout_ms=self._timeout_ms,
                                        **producer_config(), **client_settings())
            await producer.start()
            self._producer = producer

    async def stop(self) -> None:
        if self._producer is not None:
            producer, self._producer = self._producer, None
            await producer.stop()

    async def publish(self, event: Event) -> None:
        value = self.codec.encode(event.type, event.body)
        topic = topic_for_event(event.type).name
        try:
            await self.start()
            assert self._producer is not None
            await self._producer.send_and_wait(topic, value=value, key=event.key.encode())
        except KafkaError as exc:
            log.warning("publishing %s to %s failed: %r", event.type, topic, exc)
            raise PublishError(f"broker did not acknowledge {event.type}: {exc}") from exc
        count_published("api", [topic])

    async def connected(self, timeout_s: float = 2.0) -> bool:
        """/readyz: the producer is started and reaches a broker within `timeout_s`."""
        producer = self._producer
        if producer is None:
            return False
        client = producer.client
        for broker in sorted(client.cluster.brokers(), key=lambda b: str(b.nodeId)):
            try:
                if await asyncio.wait_for(client.ready(broker.nodeId), timeout_s):
                    return True
            except (KafkaError, OSError, TimeoutError):
                continue
        return False


class MemoryPublisher:
    """A fake Publisher: keeps the events (encoded, to check they match their schema)."""

    def __init__(self, codec: Codec | None = None) -> None:
        self.codec = codec or default_codec()
        self.events: list[Event] = []
        self.records: list[tuple[str, bytes, bytes]] = []  # (topic, key, value)
        self.fail: str | None = None  # set to a message to simulate an unacknowledged send

    async def publish(self, event: Event) -> None:
        value = self.codec.encode(event.type, event.body)
        if self.fail is not None:
            raise PublishError(self.fail)
        self.events.append(event)
        self.records.append((topic_for_event(event.type).name, event.key.encode(), value))

    async def connected(self) -> bool:
        """/readyz: a fake that fails its sends is not connected."""
        return self.fail is None
