"""Pipeline benchmark: raw bus throughput beside end-to-end scheduling throughput.

Both are measured in one run on the same broker:
- raw bus: N Avro-encoded events produced by aiokafka and consumed (and decoded) by another
  client concurrently; events/s until the consumer has them all.
- end to end: a minicluster with simulated agents (no processes) runs J jobs totalling
  T tasks; tasks/s from the first JobSubmitted to the last job SUCCEEDED, and the number
  of records all services wrote per task.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from peloton.bus.catalog import TOPICS
from peloton.bus.codec import default_codec
from peloton.bus.devbroker import consumer_settings, log_end_offsets, producer_settings
from peloton.minicluster.cluster import AgentSpec, Layout, down, up
from peloton.minicluster.load import job_body, wait_offers

__all__ = ["raw_bus", "topic_ends", "topic_partitions", "pipeline"]

Progress = Callable[[str, float], None]


async def raw_bus(bootstrap: str, events: int = 100_000) -> dict[str, float]:
    codec = default_codec()
    topic = f"bench-raw-{uuid.uuid4().hex[:6]}"
    body = {"host": "host-1", "incarnation": "abc", "at": 0, "statuses": [
        {"job_id": "bench-job", "instance": 7, "run": 1, "state": "RUNNING",
         "exit_code": None, "message": "", "sandbox": "/tmp/sandbox/bench-job-7-1"}]}
    value = codec.encode("TaskStatusReported", body)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20,
                                max_batch_size=512 * 1024, **producer_settings())  # type: ignore[arg-type]
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, **consumer_settings(),  # type: ignore[arg-type]
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await producer.start()
    await producer.send_and_wait(topic, b"warmup", key=b"w")  # creates the topic
    await consumer.start()
    try:
        got = 0
        started = time.perf_counter()

        async def consume() -> None:
            nonlocal got
            while got < events + 1:
                batch = await consumer.getmany(timeout_ms=500, max_records=10_000)
                for records in batch.values():
                    for rec in records:
                        if rec.key != b"w":
                            codec.decode(rec.value)
                        got += 1

        reader = asyncio.ensure_future(consume())
        for i in range(events):
            await producer.send(topic, value, key=str(i % 64).encode())
        await producer.flush()
        produced = time.perf_counter() - started
        await asyncio.wait_for(reader, 120)
        total = time.perf_counter() - started
        return {"raw_bus_events_per_s": events / total, "produce_events_per_s": events / produced,
                "raw_events": events, "value_bytes": len(value)}
    finally:
        await consumer.stop()
        await producer.stop()


async def topic_partitions(bootstrap: str) -> dict[str, int]:
    """The partition count of every catalog topic as the broker has it (a topic keeps the
    count it was created with, whatever the catalog says now)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        await consumer.topics()  # a metadata round trip: every topic's partitions
        return {t.name: len(consumer.partitions_for_topic(t.name) or ()) for t in TOPICS}
    finally:
        await consumer.stop()


async def topic_ends(bootstrap: str) -> int:
    """Records in every catalog topic (the sum of their partitions' end offsets)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(t.name, p) for t in TOPICS
               for p in sorted(consumer.partitions_for_topic(t.name) or ())]
        consumer.assign(tps)
        return sum((await log_end_offsets(consumer, tps)).values())
    finally:
        await consumer.stop()


async def _run_jobs(bootstrap: str, tasks: int, jobs: int, progress: Progress) -> float:
    codec = default_codec()
    per_job = tasks // jobs
    ids = [f"bench-{uuid.uuid4().hex[:8]}-{j}" for j in range(jobs)]
    consumer = AIOKafkaConsumer("job-events", bootstrap_servers=bootstrap,
                                **consumer_settings(),  # type: ignore[arg-type]
                                auto_offset_reset="earliest", enable_auto_commit=False)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **producer_settings())  # type: ignore[arg-type]
    await consumer.start()
    await producer.start()
    try:
        started = time.perf_counter()
        for job_id in ids:
            body = job_body(job_id, per_job, duration_s=0.05)
            await producer.send_and_wait("job-submitted", codec.encode("JobSubmitted", body),
                                         key=job_id.encode())
        done: set[str] = set()
        counts: dict[str, int] = {}
        while len(done) < len(ids):
            if time.perf_counter() - started > 600:
                raise TimeoutError(f"only {len(done)}/{len(ids)} jobs finished")
            batch = await consumer.getmany(timeout_ms=300)
            for records in batch.values():
                for rec in records:
                    etype, body = codec.decode(rec.value)
                    if etype == "JobStateChanged" and body["job_id"] in ids:
                        counts[body["job_id"]] = body["task_counts"].get("SUCCEEDED", 0)
                        if body["state"] in ("SUCCEEDED", "FAILED", "KILLED"):
                            done.add(body["job_id"])
                    elif etype == "JobRejected" and body["job_id"] in ids:
                        raise RuntimeError(f"bench job rejected: {body['reasons']}")
            finished = sum(per_job if j in done else 0 for j in ids)
            progress(f"jobs done {len(done)}/{len(ids)}", finished / tasks)
        return time.perf_counter() - started
    finally:
        await producer.stop()
        await consumer.stop()


def pipeline(tasks: int = 10_000, jobs: int = 10, agents: int = 2, raw_events: int = 100_000,
             progress: Progress | None = None) -> dict[str, Any]:
    say: Progress = progress or (lambda _m, _f: None)
    with tempfile.TemporaryDirectory(prefix="peloton-bench-") as tmp:
        layout = Layout.local(Path(tmp), agents=agents, free=True, detach=False,
                              simulated=True, resmgr_instances=1, with_api=False)
        layout.agents = [AgentSpec(a.name, cpu=100_000, memory=10**8, disk=10**8,
                                   web_port=a.web_port) for a in layout.agents]
        say("starting minicluster (simulated agents)", 0.0)
        up(layout)
        try:
            say("measuring raw bus throughput", 0.0)
            raw = asyncio.run(raw_bus(layout.bootstrap, raw_events))
            asyncio.run(wait_offers(layout.bootstrap, {a.name for a in layout.agents}, 60))
            before = asyncio.run(topic_ends(layout.bootstrap))
            wall = asyncio.run(_run_jobs(layout.bootstrap, tasks, jobs, say))
            records = asyncio.run(topic_ends(layout.bootstrap)) - before
        finally:
            down(layout.run_dir)
    e2e = tasks / wall
    return {"tasks": tasks, "jobs": jobs, "agents": agents,
            "raw_bus_events_per_s": round(raw["raw_bus_events_per_s"], 1),
            "raw_produce_events_per_s": round(raw["produce_events_per_s"], 1),
            "e2e_tasks_per_s": round(e2e, 1), "e2e_wall_s": round(wall, 2),
            "events_per_task": round(records / tasks, 3),
            "ratio": round(e2e / raw["raw_bus_events_per_s"], 4)}
