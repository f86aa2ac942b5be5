"""Batch intake: how a shell takes its input records from Faust, a batch at a time.

The shells (`peloton.bus.service`, `peloton.bus.partitioned`) take raw bytes in batches and
commit only after their decisions are published; they use none of what a Faust agent's
stream adds per record (an Event object, the stream's processors and sensors, an ack
coroutine, a task race per delivery). Under a burst that machinery was the larger part of
every service's CPU (profiled with py-spy: `_drain_messages`' per-record `wait_first`,
the stream's passive drainer and `take_events`), so the shells take records this way:

- `BatchChannel` is a Faust topic the app's conductor subscribes like an agent's topic, so
  the consumer group, assignment, rebalances, flow control and commits stay Faust's own.
  Its `decode` hands the consumer's raw message on (no Event); its buffer is Faust's
  flow-controlled queue: cleared when a rebalance starts, like an agent's, and under
  pressure it pauses fetching of the partition, like an agent's.
- `add_intake(app, topic, name, handle, batch_max)` runs a Faust app task that takes what
  the buffer holds (up to `batch_max` messages; after the first it lets the fetcher
  deliver the rest of its fetch once), skips messages fetched before the current
  rebalance (as a Faust stream does), awaits `handle(records)` and only then acks the
  messages: Faust commits an offset once every message up to it is acked. A handler
  that raises (a bug of the shell: the driver dead-letters what a core cannot take)
  crashes the app rather than go on, since Faust would commit past the unacked records
  once later ones are acked. It tells
  Faust's monitor when each partition last moved, which Faust's consumer checks (a
  partition fetched but not processed for 5 minutes is logged as a stuck stream).
- `App`'s consumer awaits each fetched record's delivery directly while the flow runs,
  instead of racing it against the flow's suspension with two new tasks per record; while
  the flow is suspended (a rebalance) it races them as Faust does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import faust
from faust.transport.drivers import aiokafka as kafka_driver

from peloton.bus.driver import Record

__all__ = ["App", "BatchChannel", "add_intake"]

log = logging.getLogger(__name__)

class BatchChannel(faust.Topic):  # type: ignore[misc]
    """A raw-bytes Faust topic whose consumer-side decode is the identity (see module)."""

    def _compile_decode(self) -> None:  # Faust compiles `decode` per instance
        async def decode(message: Any, *, propagate: bool = False) -> Any:
            return message
        self.decode = decode  # type: ignore[method-assign]


def add_intake(app: faust.App, topic_name: str, name: str,
               handle: Callable[[list[Record]], Awaitable[None]], batch_max: int) -> None:
    """Feed `topic_name`'s records to `handle` in batches (see module); `name` labels logs."""
    channel = BatchChannel(app, topics=[topic_name], key_type=bytes, value_type=bytes,
                           key_serializer="raw", value_serializer="raw", is_iterator=True)
    app.topics.add(channel)

    async def run() -> None:
        queue = channel.queue
        while True:
            batch = await _take(queue, batch_max)
            current = app.consumer_generation_id
            live = [m for m in batch if m.generation_id == current]
            if len(live) < len(batch):  # fetched before a rebalance: re-read from commits
                log.debug("%s: %d records of an older generation skipped", name,
                          len(batch) - len(live))
            if not live:
                continue
            inbound = app.monitor.stream_inbound_time  # Faust's check that streams move
            now = time.monotonic()
            for tp in {m.tp for m in live}:
                inbound[tp] = now
            try:
                await handle([(m.topic, m.partition, m.offset, m.key, m.value)
                              for m in live])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the shells dead-letter what fails: a shell bug
                # Faust would commit past these records once later ones are acked, so
                # the service stops; its restart reads them again from the last commit
                log.exception("%s: batch handler failed; stopping the service (its "
                              "records stay unacked)", name)
                await app.crash(exc)
                return
            consumer = app.consumer
            for m in live:
                m.ack(consumer)

    run.__name__ = run.__qualname__ = f"intake_{name}".replace("-", "_")
    app.task(run)


async def _take(queue: Any, batch_max: int) -> list[Any]:
    batch = [await queue.get()]
    waited = False
    while len(batch) < batch_max:
        if queue.empty():
            if waited:
                break
            await asyncio.sleep(0)  # the fetcher delivers the rest of its fetch
            waited = True
            continue
        batch.append(queue.get_nowait())
    return batch


class _Consumer(kafka_driver.Consumer):  # type: ignore[misc]
    """Faust's aiokafka consumer whose fetch loop delivers a record without a task race
    while the flow runs (module doc)."""

    async def _drain_messages(self, fetcher: Any) -> None:  # pragma: no cover - Faust's loop
        deliver = self.callback
        offsets = self._read_offset
        suspended = self.suspend_flow.is_set
        acks_for = self.app.topics.acks_enabled_for
        since_yield = 0
        try:
            while not (self._stopped.is_set() or fetcher._stopped.is_set()):
                records = self.getmany(timeout=1.0)
                await asyncio.sleep(0)
                if self.should_stop:
                    continue
                async for tp, message in records:
                    since_yield += 1
                    if since_yield > 100:
                        await asyncio.sleep(0)
                        since_yield = 0
                    last = offsets[tp]
                    if last is not None and message.offset < last:
                        continue  # before what was read already (a seek back)
                    if last and message.offset - last > 1 and acks_for(message.topic):
                        await self._add_gap(tp, last + 1, message.offset)
                    if self._commit_every is not None and self._n_acked >= self._commit_every:
                        self._n_acked = 0
                        await self.commit()
                    if suspended():
                        await self.wait_first(deliver(message), self.suspend_flow.wait())
                    else:
                        await deliver(message)
                    offsets[tp] = message.offset
        except self.consumer_stopped_errors:
            if not self.transport.app.should_stop:
                raise
        except asyncio.CancelledError:
            if not self.transport.app.should_stop:
                raise


class _Transport(kafka_driver.Transport):  # type: ignore[misc]
    Consumer = _Consumer


class App(faust.App):  # type: ignore[misc]
    """A Faust app whose consumer is `_Consumer` (module doc)."""

    def _new_transport(self) -> Any:
        return _Transport(self.conf.broker_consumer, self)
