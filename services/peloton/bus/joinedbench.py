"""`peloton bench joined`: what a reader of job-events pays per fact, one job's
TaskStateChanged per record (as until 2026-11-28) against joined records
(`peloton.bus.coalesce`).

Two dev brokers hold the same `facts` TaskStateChanged (jobs of 1-8 tasks, one to four
changes each, as the job manager writes them): one a record each, the other joined as the
job manager's shell joins what it sends together (`batch` facts a publish, split by
partition). A reader, in its own process, takes each log through the services' own path:
the batch intake (Faust's consumer, the shell's channel) and the `CoreDriver` (decode,
explode, one core call per fact) with a core that only counts. Its CPU seconds (process
time) from the first record to the last fact, per fact, the best of `repeats` rounds (the
two logs take turns); the ratio is of figures of the same run. What is measured is the
readers' path per fact, not a core: the resource manager, placement, the host manager,
the read model and the benchmarks' followers each pay it.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from peloton.bus.coalesce import TOPIC

__all__ = ["joined_bench", "LOGS"]

LOGS = ("a record per job", "joined")


def joined_bench(facts: int = 100_000, batch: int = 32, repeats: int = 2, seed: int = 7,
                 progress: Callable[[str, float], None] | None = None) -> dict[str, Any]:
    from peloton.minicluster.servers import free_port, start_tansu

    if facts < 1 or batch < 1 or repeats < 1:
        raise ValueError(f"facts, batch and repeats must be at least 1 (got {facts}, "
                         f"{batch}, {repeats})")
    say = progress or (lambda _m, _f: None)
    with tempfile.TemporaryDirectory(prefix="peloton-joined-") as tmp:
        servers = {log: start_tansu(free_port(), Path(tmp) / f"tansu-{i}.log")
                   for i, log in enumerate(LOGS)}
        try:
            records: dict[str, int] = {}
            for log, server in servers.items():
                say(f"writing {facts:,} facts ({log})", 0.0)
                records[log] = asyncio.run(_produce(server.address, facts, batch,
                                                    log == "joined", seed))
            cost: dict[str, float] = {}
            steps = [(r, log) for r in range(repeats) for log in LOGS]
            for i, (r, log) in enumerate(steps):
                say(f"reading {log} ({r + 1} of {repeats})", (i + 1) / (len(steps) + 1))
                got = _read_in_child(servers[log].address, facts, f"{r}")
                cost[log] = min(cost.get(log, got), got)
        finally:
            for server in servers.values():
                server.stop()
    result: dict[str, Any] = {"facts": facts, "facts per publish": batch,
                              "repeats (the best of each is shown)": repeats}
    for log in LOGS:
        result[f"{log}: records"] = records[log]
        result[f"{log}: us per fact"] = round(cost[log] * 1e6, 2)
    result["joined / a record per job"] = round(cost["joined"] / cost["a record per job"], 2)
    return result


def _facts(n: int, seed: int) -> list[dict[str, Any]]:
    """`n` TaskStateChanged bodies of jobs of 1-8 tasks, as a burst's job manager writes."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    job = 0
    while len(out) < n:
        job += 1
        tasks = rng.randint(1, 8)
        for state, previous in (("PENDING", "INITIALIZED"), ("READY", "PENDING"),
                                ("PLACED", "READY"), ("RUNNING", "LAUNCHED")):
            changed = rng.sample(range(tasks), rng.randint(1, min(4, tasks)))
            out.append({"job_id": f"bench-{job:06d}", "at": 1_700_000_000_000 + len(out),
                        "changes": [_change(i, state, previous) for i in sorted(changed)]})
    return out[:n]


def _change(instance: int, state: str, previous: str) -> dict[str, Any]:
    return {"instance": instance, "run": 1, "state": state, "previous_state": previous,
            "reason": "", "host": f"host-{instance:05d}" if state != "PENDING" else None,
            "exit_code": None, "failures": 0, "not_before_ms": None, "round": -1,
            "pinned_host": None, "config_version": 1}


async def _produce(broker: str, n: int, batch: int, join: bool, seed: int) -> int:
    """Write the facts; joined: each `batch` of them as the publisher joins a publish.
    Returns the records written."""
    from aiokafka import AIOKafkaProducer

    from peloton.bus.catalog import topic
    from peloton.bus.coalesce import coalesce, joiner_for
    from peloton.bus.codec import default_codec
    from peloton.bus.devbroker import producer_settings
    from peloton.bus.faustapp import ensure_topics
    from peloton.bus.publisher import encode_events
    from peloton.model.event import Event

    codec = default_codec()
    joiner = joiner_for(codec)
    count = topic(TOPIC).partitions
    await ensure_topics(broker)
    producer = AIOKafkaProducer(bootstrap_servers=broker, linger_ms=10, **producer_settings())
    await producer.start()
    written = 0
    try:
        facts = _facts(n, seed)
        for i in range(0, n, batch):
            out = encode_events(codec, [Event("TaskStateChanged", b["job_id"], b)
                                        for b in facts[i:i + batch]])
            placed = coalesce(out, joiner, lambda _t: count) if join else \
                [(*r, None) for r in out]
            sent = [await producer.send(t, value=v, key=k, partition=p)
                    for t, k, v, p in placed]
            written += len(sent)
        await producer.flush()
    finally:
        await producer.stop()
    return written


def _read_in_child(broker: str, n: int, round_: str) -> float:
    """CPU seconds per fact of a reader in a fresh process (a Faust app keeps global state,
    and each reader must start cold and alone)."""
    out = subprocess.run([sys.executable, "-m", "peloton.bus.joinedbench", broker, str(n),
                          round_], capture_output=True, text=True, timeout=600, check=False)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"reader failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    return float(json.loads(lines[-1])["cpu_s_per_fact"])


class _Counter:
    """A core that counts the facts it is handed (and when the first and the last came)."""

    inputs: tuple[str, ...] = (TOPIC,)
    replay: tuple[str, ...] = ()
    tick_interval: float | None = None

    def __init__(self, n: int) -> None:
        self.n, self.seen, self.first, self.cpu = n, 0, 0.0, 0.0
        self.done = asyncio.Event()

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Any]:
        if not self.seen:
            self.first = time.process_time()
        self.seen += 1
        if self.seen >= self.n and not self.done.is_set():
            self.cpu = time.process_time() - self.first
            self.done.set()
        return []

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        return None

    def tick(self, now: int) -> list[Any]:
        return []

    def after_replay(self, now: int) -> list[Any]:
        return []


async def _child(broker: str, n: int, round_: str) -> float:
    from peloton.bus import intake
    from peloton.bus.catalog import topic
    from peloton.bus.codec import default_codec
    from peloton.bus.driver import CoreDriver, Record
    from peloton.bus.faustapp import make_app

    core = _Counter(n)
    driver = CoreDriver("bench", core, broker, default_codec(), snapshots=False)
    await driver.rebuild()
    await driver.start_live()
    expected = {TOPIC: set(topic(TOPIC).events)}
    app = make_app(f"bench-joined-{round_}", broker)

    async def handle(records: list[Record]) -> None:
        await driver.on_records(records, expected)

    intake.add_intake(app, TOPIC, "bench", handle, batch_max=500)
    await app.start()
    try:
        await asyncio.wait_for(core.done.wait(), timeout=300)
    finally:
        await app.stop()
        await driver.stop()
    return core.cpu / n


if __name__ == "__main__":  # a reader's process (see _read_in_child)
    import logging

    logging.basicConfig(level=logging.ERROR)
    cpu = asyncio.run(_child(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
    print(json.dumps({"cpu_s_per_fact": cpu}), flush=True)
