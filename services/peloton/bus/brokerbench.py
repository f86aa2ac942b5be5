"""`peloton bench devbroker`: what the dev broker pays for a steady load as its store grows.

The dev broker (Tansu 0.6, memory storage) keeps every batch as an object of an in-memory
object store and never deletes one (no retention; its DeleteRecords is unimplemented).
Read from Tansu's source (`tansu-storage/src/dynostore.rs`): a fetch that returns records
lists every batch object of its partition to find its offset, and every write or read of
an object first sweeps a cache of the objects touched in the last ten minutes. Apache
Kafka finds a fetch's offset through its index and keeps no such cache.

The benchmark runs one steady load (`rate` one-record batches a second spread over the
partitions of a new topic, `readers` consumers tailing all of them, as services do) and
measures the broker's CPU while it runs:
1. on a fresh broker;
2. after each step of `held` batches written to a topic nobody reads (what the store's
   size costs every operation);
3. on a second fresh broker whose load partitions already hold `held[-1]` batches (what
   the history of the partitions read costs each fetch); before that load, the broker's
   CPU per read of the last 1 and the last 50 batches of one of those partitions (a fetch
   pays for the batches its partition holds, not for those it returns).
Each row gives the load it achieved (the client waits for each batch's delivery, so an
overloaded broker shows as a lower rate) and the broker's cores; the derived figures are
the cores the same load costs more per 10,000 batches held elsewhere, and the ratio of
the two ways of holding the same batches.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["broker_bench", "held_steps", "LOAD", "HELD", "READS"]

LOAD = "load"
HELD = "held"
#: batches one read takes from the end of a full partition (`_read_cost`)
READS = (1, 50)
_PARTITIONS = 4
_VALUE = b"x" * 100
Say = Callable[[str, float], None]


def broker_bench(held: Sequence[int] = (20_000, 40_000), rate: int = 300, readers: int = 3,
                 seconds: float = 5.0, progress: Say | None = None) -> dict[str, Any]:
    """The broker's cores under one load, fresh and with `held` batches stored (module
    doc). Raises ValueError for steps that do not grow or a load of nothing."""
    from peloton.minicluster.servers import free_port, start_tansu

    steps = held_steps(held)
    if rate < 1 or readers < 1 or seconds <= 0:
        raise ValueError(f"rate, readers and seconds must be positive "
                         f"(got {rate}, {readers}, {seconds})")
    say = progress or (lambda _m, _f: None)
    total = len(steps) + 2
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="peloton-brokerbench-") as tmp:
        server = start_tansu(free_port(), Path(tmp) / "tansu.log")
        try:
            stored = 0
            for i, n in enumerate([0, *steps]):
                say(f"held {n:,}: writing {n - stored:,} batches", i / total)
                asyncio.run(_fill(server.address, HELD, n - stored, create=i == 0))
                stored = n
                say(f"held {n:,}: measuring the load", (i + 0.5) / total)
                rows.append({"batches held": n, "where": "a topic nobody reads",
                             **asyncio.run(_measure(server.pid, server.address, f"{LOAD}-{i}",
                                                    rate, readers, seconds))})
        finally:
            server.stop()
        server = start_tansu(free_port(), Path(tmp) / "tansu2.log")
        try:
            n = steps[-1]
            say(f"fresh broker: the load's partitions hold {n:,} batches", (total - 1) / total)
            asyncio.run(_fill(server.address, LOAD, n, create=True))
            end = -(-n // _PARTITIONS)  # partition 0's batches
            reads = {k: asyncio.run(_read_cost(server.pid, server.address, end, k))
                     for k in sorted({min(k, end) for k in READS})}
            rows.append({"batches held": n, "where": "the load's own partitions",
                         **asyncio.run(_measure(server.pid, server.address, LOAD, rate,
                                                readers, seconds, create=False))})
        finally:
            server.stop()
    result = _result(rows, rate, readers, seconds)
    for k, ms in reads.items():
        result[f"one read of the last {k} batch(es) of a partition holding {end:,}: "
               "broker ms"] = ms
    return result


def held_steps(held: Sequence[int]) -> list[int]:
    """`held` as the benchmark's steps: growing positive batch counts, else ValueError."""
    steps = list(held)
    if not steps or any(n <= 0 for n in steps) or steps != sorted(set(steps)):
        raise ValueError(f"held must be growing positive batch counts (got {steps})")
    return steps


def _result(rows: list[dict[str, Any]], rate: int, readers: int,
            seconds: float) -> dict[str, Any]:
    fresh, elsewhere = rows[0], rows[-2]
    per_10k = (elsewhere["broker cores"] - fresh["broker cores"]) * 10_000 / max(
        elsewhere["batches held"], 1)
    result: dict[str, Any] = {
        "load": f"{rate} one-record batches/s over {_PARTITIONS} partitions, "
                f"{readers} readers tailing them, {seconds:g} s a row"}
    for row in rows:
        label = f"{row['batches held']:,} held in {row['where']}"
        result[f"{label}: broker cores"] = row["broker cores"]
        result[f"{label}: batches/s achieved"] = row["batches/s"]
    result["broker cores added per 10,000 batches held (a topic nobody reads)"] = round(
        per_10k, 3)
    result["own partitions / nobody's topic, same batches held"] = round(
        rows[-1]["broker cores"] / max(elsewhere["broker cores"], 1e-9), 2)
    return result


async def _fill(broker: str, topic: str, batches: int, create: bool) -> None:
    """`batches` one-record batches on `topic`: one record per partition in flight, so
    each is its own batch (its own object in the broker's store)."""
    from aiokafka import AIOKafkaProducer

    from peloton.bus.devbroker import producer_settings

    if create:
        await _create(broker, (topic,))
    producer = AIOKafkaProducer(bootstrap_servers=broker, linger_ms=0, **producer_settings())
    await producer.start()
    try:
        for start in range(0, batches, _PARTITIONS):
            sent = [await producer.send(topic, _VALUE, partition=p)
                    for p in range(min(_PARTITIONS, batches - start))]
            await asyncio.gather(*sent)
    finally:
        await producer.stop()


async def _create(broker: str, names: Sequence[str]) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=broker)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, _PARTITIONS, 1) for n in names])
    finally:
        await admin.close()


async def _read_cost(pid: int, broker: str, end: int, k: int, repeats: int = 20) -> float:
    """The broker's CPU (ms) per read of the last `k` batches of LOAD's partition 0, which
    holds `end` one-record batches: one consumer seeks back `k` and reads to the end."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from peloton.bus.devbroker import consumer_settings
    from peloton.minicluster.agentbench import cpu_seconds

    tp = TopicPartition(LOAD, 0)
    consumer = AIOKafkaConsumer(bootstrap_servers=broker, enable_auto_commit=False,
                                **consumer_settings())
    await consumer.start()
    try:
        consumer.assign([tp])
        cpu0 = cpu_seconds(pid)
        for _ in range(repeats):
            consumer.seek(tp, end - k)
            got = 0
            while got < k:
                got += sum(map(len, (await consumer.getmany(tp, timeout_ms=1000)).values()))
        return round((cpu_seconds(pid) - cpu0) * 1000 / repeats, 1)
    finally:
        await consumer.stop()


async def _measure(pid: int, broker: str, topic: str, rate: int, readers: int,
                   seconds: float, create: bool = True) -> dict[str, float]:
    """The broker's cores while `rate` one-record batches a second go to the partitions of
    `topic` (created here unless `create` is false) in turn and `readers` consumers tail
    them all."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    from peloton.bus.devbroker import consumer_settings, producer_settings
    from peloton.minicluster.agentbench import cpu_seconds

    if create:
        await _create(broker, (topic,))
    parts = [TopicPartition(topic, p) for p in range(_PARTITIONS)]
    consumers = [AIOKafkaConsumer(bootstrap_servers=broker, enable_auto_commit=False,
                                  **consumer_settings()) for _ in range(readers)]
    producer = AIOKafkaProducer(bootstrap_servers=broker, linger_ms=0, **producer_settings())
    await producer.start()
    stop = asyncio.Event()

    async def tail(consumer: AIOKafkaConsumer) -> None:
        await consumer.start()
        consumer.assign(parts)
        await consumer.seek_to_end(*parts)
        while not stop.is_set():
            await consumer.getmany(timeout_ms=100)

    tails = [asyncio.create_task(tail(c)) for c in consumers]
    try:
        await asyncio.sleep(1.0)  # the readers joined and sit at the end
        loop = asyncio.get_running_loop()
        cpu0, t0, sent = cpu_seconds(pid), loop.time(), 0
        while (now := loop.time()) - t0 < seconds:
            # delivered before the next is sent: each record is a batch of its own
            await (await producer.send(topic, _VALUE, partition=sent % _PARTITIONS))
            sent += 1
            await asyncio.sleep(max(0.0, t0 + sent / rate - now))
        elapsed = loop.time() - t0
        cores = (cpu_seconds(pid) - cpu0) / elapsed
    finally:
        stop.set()
        await asyncio.gather(*tails, return_exceptions=True)
        for consumer in consumers:
            await consumer.stop()
        await producer.stop()
    return {"broker cores": round(cores, 3), "batches/s": round(sent / elapsed, 1)}
