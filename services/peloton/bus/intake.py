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
- `App`'s consumer hands each partition's fetched records to its batch channel together:
  flow control, the producer buffer's ebb and the buffer's pressure are checked once per
  partition and fetch instead of once per record, and no per-record coroutine runs (the
  conductor's per-record path, with its lock, decode and channel loop, measured 12-13 µs a
  record in all against about 6 through this one). A partition with any other subscriber
  (an agent's topic) still goes through the conductor record by record. The loop uses
  Faust internals (`faust_internals_missing` names them); a Faust without one of them
  gets its own loop back, with a warning, as `peloton.bus.avrocalls` falls back to
  fastavro's public calls.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import faust
from faust.transport.drivers import aiokafka as kafka_driver
from faust.types import TP
from mode.utils.queues import ThrowableQueue

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
    """Faust's aiokafka consumer whose fetch loop hands a partition's fetched records to
    its batch channel together (module doc); `batch_delivery = False` delivers them one
    by one through the conductor instead (`peloton bench intake` measures both)."""

    batch_delivery = True

    async def _drain_messages(self, fetcher: Any) -> None:  # pragma: no cover - Faust's loop
        app = self.app
        missing = faust_internals_missing(self)
        if missing:  # another Faust: its own loop, record by record, only slower
            log.warning("Faust's consumer lacks %s: records are delivered through its own "
                        "loop", ", ".join(missing))
            await super()._drain_messages(fetcher)
            return
        try:
            while not (self._stopped.is_set() or fetcher._stopped.is_set()):
                records, active = await self._wait_next_records(1.0)
                await asyncio.sleep(0)
                if not records or self.should_stop:
                    continue
                if not self.flow_active:  # a rebalance began: read again from commits
                    try:
                        await self.perform_seek()
                    except Exception as exc:  # as Faust's getmany: log, go on
                        log.warning("seek to committed offsets failed: %r", exc)
                    continue
                generation = app.consumer_generation_id
                for tp, fetched in records.items():
                    if not self.flow_active or app.consumer_generation_id != generation:
                        break  # the rest is read again after the rebalance
                    if (active is not None and tp not in active
                            and tp not in self._buffered_partitions):
                        continue
                    app.monitor.track_tp_end_offset(tp, self.highwater(tp))
                    await self._deliver(tp, fetched)
                    await asyncio.sleep(0)
        except self.consumer_stopped_errors:
            if not self.transport.app.should_stop:
                raise
        except asyncio.CancelledError:
            if not self.transport.app.should_stop:
                raise

    async def _deliver(self, tp: Any, fetched: list[Any]) -> None:  # pragma: no cover
        """Deliver one partition's fetched records, in offset order: to its batch channel
        at once when that is the partition's only subscriber, else one by one through
        Faust's conductor."""
        offsets = self._read_offset
        to_message = self._to_message
        conductor: Any = self.app.topics
        channels = conductor._tp_index.get(tp)
        channel = next(iter(channels)) if channels is not None and len(channels) == 1 else None
        batch: list[Any] | None = ([] if self.batch_delivery and isinstance(channel, BatchChannel)
                                   else None)
        for record in fetched:
            offset = record.offset
            last = offsets[tp]
            if last is not None and offset < last:
                continue  # before what was read already (a seek back)
            if last and offset - last > 1 and conductor.acks_enabled_for(tp.topic):
                # our topics are neither compacted nor transactional: a gap is records
                # the fetch passed over, which the commit will count as done
                log.warning("%s[%d]: offsets jumped from %d to %d: %d records never "
                            "delivered are taken as done", tp.topic, tp.partition, last,
                            offset, offset - last - 1)
                await self._add_gap(tp, last + 1, offset)
            if self._commit_every is not None and self._n_acked >= self._commit_every:
                self._n_acked = 0
                await self.commit()
            message = to_message(tp, record)
            if batch is not None:
                message.refcount = 1  # new, not shared yet: the conductor's incref(1)
                batch.append(message)
            elif self.suspend_flow.is_set():
                await self.wait_first(self.callback(message), self.suspend_flow.wait())
            else:
                await self.callback(message)
            offsets[tp] = offset
        if batch and channel is not None:
            await self._offer(tp, channel, batch)

    async def _offer(self, tp: Any, channel: BatchChannel,
                     messages: list[Any]) -> None:  # pragma: no cover - Faust's loop
        """Put `messages` (one reference each, set by `_deliver`) in `channel`'s
        flow-controlled buffer as Faust's conductor does for each (flow control, the
        producer buffer's ebb, the partition's fetch paused under pressure and resumed when
        it drops), checked once per batch."""
        app = self.app
        await app.flow_control.acquire()
        await app.producer.buffer.wait_until_ebb()
        callbacks = self.__dict__.setdefault("_pressure_callbacks", {})
        pressure = callbacks.get(tp)
        if pressure is None:  # one pair per partition, as the conductor's (Faust's TP)
            ftp = TP(tp.topic, tp.partition)
            pressure = callbacks[tp] = (ftp, partial(_pressure_high, app, self, ftp),
                                        partial(self.on_buffer_drop, ftp))
        ftp, on_high, on_drop = pressure
        queue = channel.queue
        for i, message in enumerate(messages):
            if queue.full():  # past Faust's buffer size: pause, wait for room
                if queue.in_pressure_high_state(on_drop):
                    on_high()
                app.sensors.on_topic_buffer_full(ftp)
                for rest in messages[i:]:
                    await channel.put(rest)
                return
            queue.force_put_nowait(message)
        # after the batch, not before: nothing runs in between, and the size only grew
        if queue.in_pressure_high_state(on_drop):
            on_high()


#: what the fetch loop above uses of Faust that is not its public API
_CONSUMER_INTERNALS = ("_wait_next_records", "perform_seek", "flow_active", "highwater",
                       "_buffered_partitions", "_read_offset", "_to_message", "_add_gap",
                       "_commit_every", "_n_acked", "commit", "callback", "suspend_flow",
                       "wait_first", "on_buffer_full", "on_buffer_drop")
_QUEUE_INTERNALS = ("in_pressure_high_state", "force_put_nowait", "full")


def faust_internals_missing(consumer: Any) -> list[str]:
    """The Faust internals the fetch loop uses that this Faust lacks (none with the Faust
    the suite runs; `_drain_messages` falls back to Faust's own loop otherwise)."""
    app = consumer.app
    missing = [name for name in _CONSUMER_INTERNALS if not hasattr(consumer, name)]
    if not hasattr(app.topics, "_tp_index"):
        missing.append("Conductor._tp_index")
    if not hasattr(getattr(app.producer, "buffer", None), "wait_until_ebb"):
        missing.append("ProducerBuffer.wait_until_ebb")
    missing += [f"ThrowableQueue.{name}" for name in _QUEUE_INTERNALS
                if not hasattr(ThrowableQueue, name)]  # the channels' buffer
    return missing


def _pressure_high(app: Any, consumer: Any, tp: Any) -> None:  # pragma: no cover
    app.sensors.on_topic_buffer_full(tp)
    consumer.on_buffer_full(tp)


class _Transport(kafka_driver.Transport):  # type: ignore[misc]
    Consumer = _Consumer


class App(faust.App):  # type: ignore[misc]
    """A Faust app whose consumer is `_Consumer` (module doc)."""

    def _new_transport(self) -> Any:
        return _Transport(self.conf.broker_consumer, self)
