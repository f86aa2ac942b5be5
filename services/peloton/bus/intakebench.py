"""`peloton bench intake`: what a consumer pays per record before the shell's own work.

One dev broker; `records` small records on one topic's partitions; then, each in its own
process and consumer group, reading them all: the raw aiokafka consumer (`getmany`, the
client's floor), a Faust agent (Faust's per-record stream: an Event per record), the
shells' intake with each record delivered through Faust's conductor (as it was until
2026-11-25), and the batch intake (`peloton.bus.intake`: a partition's fetch handed to
its channel together).
Each figure is the reader's CPU seconds (process time, every thread) from its first
record to its last (each takes at most 500 records a batch, so the first batch, not
timed, is a small part of a run), per record, the best of `repeats` rounds (the readers
take turns, so a slow spell of the machine does not land on one of them only); the
ratios are between figures of the same run. The handlers only count: what is measured
is the path, not a core.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["intake_bench", "READERS"]

TOPIC = "job-submitted"
READERS = ("aiokafka", "faust agent", "intake, record by record", "batch intake")
_VALUE = b"x" * 120  # about a TaskStateChanged of one change


def intake_bench(records: int = 100_000, repeats: int = 2,
                 progress: Callable[[str, float], None] | None = None) -> dict[str, Any]:
    from peloton.minicluster.servers import free_port, start_tansu

    if records < 1 or repeats < 1:  # a reader of no record would wait forever
        raise ValueError(f"records and repeats must be at least 1 (got {records}, {repeats})")
    say = progress or (lambda _m, _f: None)
    with tempfile.TemporaryDirectory(prefix="peloton-intake-") as tmp:
        server = start_tansu(free_port(), Path(tmp) / "tansu.log")
        try:
            say(f"writing {records:,} records", 0.0)
            asyncio.run(_produce(server.address, records))
            cost: dict[str, float] = {}
            steps = [(r, reader) for r in range(repeats) for reader in READERS]
            for i, (r, reader) in enumerate(steps):
                say(f"reading with {reader} ({r + 1} of {repeats})", (i + 1) / (len(steps) + 1))
                got = _read_in_child(server.address, reader, records, f"{r}")
                cost[reader] = min(cost.get(reader, got), got)
        finally:
            server.stop()
    raw = cost["aiokafka"]
    result: dict[str, Any] = {"records": records, "repeats (the best of each is shown)": repeats}
    for reader in READERS:
        result[f"{reader}: us per record"] = round(cost[reader] * 1e6, 2)
    for reader in READERS[1:]:
        result[f"{reader} / aiokafka"] = round(cost[reader] / raw, 2)
    result["batch intake / record by record"] = round(
        cost["batch intake"] / cost["intake, record by record"], 2)
    return result


async def _produce(broker: str, n: int) -> None:
    from aiokafka import AIOKafkaProducer

    from peloton.bus.devbroker import producer_settings
    from peloton.bus.faustapp import ensure_topics

    await ensure_topics(broker)
    producer = AIOKafkaProducer(bootstrap_servers=broker, linger_ms=10, **producer_settings())
    await producer.start()
    try:
        sent = [await producer.send(TOPIC, value=_VALUE, key=str(i % 997).encode())
                for i in range(n)]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


def _read_in_child(broker: str, reader: str, n: int, round_: str) -> float:
    """CPU seconds per record of `reader` in a fresh process (Faust apps keep global
    state, and each reader must start cold and alone)."""
    out = subprocess.run(
        [sys.executable, "-m", "peloton.bus.intakebench", broker, reader, str(n), round_],
        capture_output=True, text=True, timeout=600, check=False)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{reader} reader failed ({out.returncode}): "
                           f"{out.stderr.strip()[-2000:]}")
    return float(json.loads(lines[-1])["cpu_s_per_record"])


class _Clock:
    """Process CPU time from the first record to the `n`th."""

    def __init__(self, n: int) -> None:
        self.n, self.seen, self.first = n, 0, 0.0
        self.done = asyncio.Event()
        self.cpu = 0.0

    def add(self, k: int) -> None:
        if not self.seen:
            self.first = time.process_time()
        self.seen += k
        if self.seen >= self.n and not self.done.is_set():
            self.cpu = time.process_time() - self.first
            self.done.set()


async def _read_aiokafka(broker: str, group: str, clock: _Clock) -> None:
    from aiokafka import AIOKafkaConsumer

    from peloton.bus.devbroker import consumer_settings

    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=broker, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=True,
                                **consumer_settings())
    await consumer.start()
    try:
        while not clock.done.is_set():
            batches = await consumer.getmany(timeout_ms=500, max_records=500)
            for batch in batches.values():
                clock.add(len(batch))
    finally:
        await consumer.stop()


async def _read_faust(broker: str, reader: str, group: str, clock: _Clock) -> None:
    from peloton.bus import intake
    from peloton.bus.driver import Record
    from peloton.bus.faustapp import make_app, raw_topic

    intake._Consumer.batch_delivery = reader == "batch intake"
    app = make_app(group, broker)
    if reader != "faust agent":
        async def handle(records: list[Record]) -> None:
            clock.add(len(records))

        intake.add_intake(app, TOPIC, "bench", handle, batch_max=500)
    else:
        @app.agent(raw_topic(app, TOPIC))
        async def read(stream: Any) -> None:
            async for _value in stream:
                clock.add(1)

    await app.start()
    try:
        await clock.done.wait()
    finally:
        await app.stop()


async def _child(broker: str, reader: str, n: int, round_: str) -> float:
    clock = _Clock(n)
    group = f"bench-{reader.replace(' ', '-').replace(',', '')}-{round_}"  # reads from 0
    run = _read_aiokafka(broker, group, clock) if reader == "aiokafka" else \
        _read_faust(broker, reader, group, clock)
    await asyncio.wait_for(run, timeout=300)
    return clock.cpu / n


if __name__ == "__main__":  # a reader's process (see _read_in_child)
    import logging

    logging.basicConfig(level=logging.ERROR)
    cpu = asyncio.run(_child(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
    print(json.dumps({"cpu_s_per_record": cpu}), flush=True)
