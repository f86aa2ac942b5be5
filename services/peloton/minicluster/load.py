"""Load-test plumbing shared by the burst and restart benchmarks and the soak test.

- `job_body`: a JobSubmitted body for a small batch job (simulated tasks).
- `submit_jobs`: produce JobSubmitted records straight to `job-submitted` (aiokafka,
  single-object Avro through bus/codec.py), as fast as the client can.
- `JobFollower`: reads `job-events` and keeps, per job of interest, its latest state and,
  per run, the (at, state, host) history from TaskStateChanged. All times are the `at`
  the job manager stamps on its facts (wall-clock ms on the machine running jobmgr) and
  the `submitted_at` the client put in JobSubmitted; on one machine they share a clock.
- `on_host_overlaps`: the "no task runs twice at once" check over a follower's history,
  or over `agent_runs` (what the agents reported, read from task-status-reported).
- `read_to_end`: every record of some topics, from their start to their current end.
- `wait_offers`: wait until the host manager offers every named host.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition

from peloton.bus.codec import DecodeError, default_codec
from peloton.bus.devbroker import consumer_settings, log_end_offsets, producer_settings
from peloton.model.taskstate import ON_HOST, TERMINAL, TERMINAL_JOB, TaskState

__all__ = ["job_body", "submit_jobs", "JobFollower", "RunHistory", "on_host_overlaps",
           "agent_runs", "read_to_end", "committed_offsets", "wait_offers", "percentile"]

#: the job-events types a `JobFollower` folds; the others are skipped undecoded
_FOLDED = frozenset({"JobStateChanged", "JobRejected", "TaskStateChanged"})


def job_body(job_id: str, instances: int, duration_s: float = 0.1, cpu: float = 0.1,
             submitted_at: int | None = None) -> dict[str, Any]:
    """A JobSubmitted body: `instances` tasks of `cpu` that run `duration_s` (simulated)."""
    cfg = {"cpu_limit": cpu, "mem_limit_mb": 16.0, "disk_limit_mb": 1.0, "gpu_limit": None,
           "command": f"sleep {duration_s}", "env": None, "constraint_json": None,
           "max_failures": 0, "labels": None, "ports": None, "kill_grace_period_s": None}
    at = int(time.time() * 1000) if submitted_at is None else submitted_at
    return {"job_id": job_id, "submitted_at": at, "name": job_id,
            "owner": "bench", "description": "", "type": "BATCH", "labels": {},
            "instance_count": instances, "respool": "/default",
            "sla": {"priority": 0, "preemptible": True, "revocable": False,
                    "minimum_running_instances": 1, "maximum_running_instances": 0},
            "default_config": cfg, "instance_config": {}, "placement_strategy": None}


async def submit_jobs(bootstrap: str, jobs: Iterable[tuple[str, int]], duration_s: float = 0.1,
                      cpu: float = 0.1, rate: float = 0.0) -> dict[str, int]:
    """Produce one JobSubmitted per (job_id, instances), without waiting between sends, or
    paced at `rate` jobs/s when it is above 0 (job i leaves i/rate s after the first);
    returns job_id -> submitted_at (ms). Returns once every record is acknowledged."""
    codec = default_codec()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5,
                                max_batch_size=512 * 1024, **producer_settings())  # type: ignore[arg-type]
    await producer.start()
    submitted: dict[str, int] = {}
    try:
        futures = []
        loop = asyncio.get_running_loop()
        first = loop.time()
        for i, (job_id, instances) in enumerate(jobs):
            if rate > 0 and (wait := first + i / rate - loop.time()) > 0:
                await asyncio.sleep(wait)
            body = job_body(job_id, instances, duration_s, cpu)
            submitted[job_id] = body["submitted_at"]
            futures.append(await producer.send("job-submitted", codec.encode("JobSubmitted", body),
                                               key=job_id.encode()))
        await producer.flush()
        for fut in futures:
            await fut
        return submitted
    finally:
        await producer.stop()


#: the states a task passes on its way to RUNNING, for `JobFollower.stage_latencies`
STAGES = (TaskState.PENDING, TaskState.READY, TaskState.PLACED, TaskState.LAUNCHING,
          TaskState.LAUNCHED, TaskState.RUNNING)


@dataclass
class RunHistory:
    """One run's TaskStateChanged history, in log order: (at, state, host)."""

    changes: list[tuple[int, str, str | None]] = field(default_factory=list)

    def first(self, states: frozenset[TaskState] | set[TaskState]) -> int | None:
        return next((at for at, s, _h in self.changes if s in states), None)

    @property
    def state(self) -> str:
        return self.changes[-1][1] if self.changes else ""


class JobFollower:
    """Follows job-events for a set of job ids (see module docstring for the times)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.codec = default_codec()
        self.wanted: set[str] = set()
        self.job_state: dict[str, str] = {}
        self.rejected: dict[str, str] = {}
        self.runs: dict[tuple[str, int, int], RunHistory] = {}
        #: the runs whose end the job manager learned from an agent's answer to its
        #: reconciliation (the first report of the end was lost on its way)
        self.recovered_runs: set[tuple[str, int, int]] = set()
        self.instances: dict[str, int] = {}
        self._consumer: AIOKafkaConsumer | None = None

    def want(self, jobs: dict[str, int]) -> None:
        """jobs: job_id -> instance count."""
        self.wanted |= set(jobs)
        self.instances.update(jobs)

    async def start(self, from_end: bool = False) -> None:
        """Read job-events from its start, or (from_end) from about its current end: the
        dev broker's "latest" may fall a batch short, which only re-reads old records."""
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, **consumer_settings(),  # type: ignore[arg-type]
            auto_offset_reset="earliest", enable_auto_commit=False,
            max_partition_fetch_bytes=8 << 20)
        await self._consumer.start()
        parts = [TopicPartition("job-events", p)
                 for p in sorted(self._consumer.partitions_for_topic("job-events") or ())]
        self._consumer.assign(parts)
        if from_end:
            await self._consumer.seek_to_end(*parts)
        else:
            await self._consumer.seek_to_beginning(*parts)

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None

    async def poll(self, timeout_ms: int = 200) -> int:
        """Read what is there; returns the number of records of wanted jobs folded."""
        assert self._consumer is not None, "start() first"
        batch = await self._consumer.getmany(timeout_ms=timeout_ms, max_records=20_000)
        return sum(self.fold_record(rec.value) for records in batch.values()
                   for rec in records)

    def fold_record(self, value: bytes) -> int:
        """Fold one job-events record; returns the number of facts of wanted jobs folded."""
        if self.codec.event_type(value) not in _FOLDED:
            return 0  # JobCreated (a whole spec) and the rest: not decoded
        try:
            facts = self.codec.decode_each(value)
        except DecodeError:
            return 0
        n = 0
        for etype, body in facts:  # a joined TaskStateChanged: one per job
            if body.get("job_id") in self.wanted:
                self._fold(etype, body)
                n += 1
        return n

    def _fold(self, etype: str, body: dict[str, Any]) -> None:  # the types of `_FOLDED`
        job_id = body["job_id"]
        if etype == "JobStateChanged":
            self.job_state[job_id] = body["state"]
        elif etype == "JobRejected":
            self.rejected[job_id] = "; ".join(body.get("reasons") or [])
        elif etype == "TaskStateChanged":
            for ch in body["changes"]:
                key = (job_id, ch["instance"], ch["run"])
                self.runs.setdefault(key, RunHistory()).changes.append(
                    (body["at"], ch["state"], ch.get("host")))
                if ch["state"] in TERMINAL and "reconciliation)" in (ch.get("reason") or ""):
                    self.recovered_runs.add(key)

    @property
    def recovered(self) -> int:
        """How many runs' ends came back by reconciliation."""
        return len(self.recovered_runs)

    def terminal_jobs(self) -> set[str]:
        ended = {j for j, s in self.job_state.items() if s in TERMINAL_JOB}
        return ended | set(self.rejected)

    def pending_jobs(self) -> set[str]:
        return self.wanted - self.terminal_jobs()

    def newest_runs(self) -> dict[tuple[str, int], tuple[int, RunHistory]]:
        """For jobs not terminal: each instance's newest run seen, and its history."""
        pending = self.pending_jobs()
        newest: dict[tuple[str, int], tuple[int, RunHistory]] = {}
        for (job, inst, run), hist in self.runs.items():
            if job in pending and run >= newest.get((job, inst), (0, hist))[0]:
                newest[(job, inst)] = (run, hist)
        return newest

    def stuck_task_states(self) -> dict[str, int]:
        """For jobs not terminal: the latest state of each instance's newest run, counted."""
        newest = self.newest_runs()
        counts: dict[str, int] = {}
        for job in self.pending_jobs():
            for inst in range(self.instances.get(job, 0)):
                found = newest.get((job, inst))
                state = "no task event" if found is None else found[1].state
                counts[state] = counts.get(state, 0) + 1
        return counts

    def task_latencies(self, submitted: dict[str, int]) -> tuple[list[int], list[int]]:
        """Per task (job, instance): ms from its job's submitted_at to its first RUNNING,
        and to the terminal state of its newest run (only tasks that got there)."""
        ended: dict[tuple[str, int], tuple[int, int]] = {}
        for (job, inst, run), hist in self.runs.items():
            if job not in submitted:
                continue
            end = hist.first(TERMINAL)
            if end is not None and run >= ended.get((job, inst), (0, 0))[0]:
                ended[(job, inst)] = (run, end)
        to_run = self.stage_latencies(submitted, (TaskState.RUNNING,))[TaskState.RUNNING]
        to_end = [end - submitted[j] for (j, _i), (_r, end) in ended.items()]
        return to_run, to_end

    def stage_latencies(self, submitted: dict[str, int],
                        states: tuple[TaskState, ...] = STAGES) -> dict[str, list[int]]:
        """Per state of `states`: ms from each task's job's submitted_at to the first time
        one of its runs reached that state (where the time goes in a burst)."""
        out: dict[str, list[int]] = {str(s): [] for s in states}
        for (job, _inst, s), at in self._first_reached(submitted, states).items():
            out[s].append(at - submitted[job])
        return out

    def running_by_submit(self, submitted: dict[str, int]) -> list[tuple[int, int]]:
        """Per task that got to RUNNING: (its job's submitted_at, ms from it to the first
        RUNNING of any of its runs): a wave's latency in the order it was offered."""
        return [(submitted[job], at - submitted[job]) for (job, _i, _s), at
                in self._first_reached(submitted, (TaskState.RUNNING,)).items()]

    def _first_reached(self, submitted: dict[str, int], states: tuple[TaskState, ...],
                       ) -> dict[tuple[str, int, str], int]:
        """(job, instance, state) -> the first time one of the task's runs reached the
        state, for the submitted jobs' tasks and the states of `states`."""
        first: dict[tuple[str, int, str], int] = {}
        for (job, inst, _run), hist in self.runs.items():
            if job not in submitted:
                continue
            for at, s, _h in hist.changes:
                if s in states:
                    key = (job, inst, s)
                    first[key] = min(at, first.get(key, at))
        return first


def on_host_overlaps(runs: dict[tuple[str, int, int], RunHistory]) -> list[str]:
    """Pairs of runs of one instance that were both on a host (ON_HOST states or RUNNING
    and its kin) at the same time: a run is on host from its first ON_HOST change to its
    first terminal change (or forever if it never ended)."""
    spans: dict[tuple[str, int], list[tuple[int, float, int]]] = {}
    for (job, inst, run), hist in runs.items():
        start = hist.first(ON_HOST)
        if start is None:
            continue
        ended = hist.first(TERMINAL)
        spans.setdefault((job, inst), []).append(
            (start, float("inf") if ended is None else ended, run))
    bad = []
    for (job, inst), items in spans.items():
        items.sort()
        busy_until, owner = items[0][1], items[0][2]
        for begin, until, run in items[1:]:
            if begin < busy_until:
                bad.append(f"{job}/{inst}: run {owner} on host until {busy_until}, run {run} "
                           f"from {begin}")
            if until > busy_until:
                busy_until, owner = until, run
    return bad


async def agent_runs(bootstrap: str, jobs: set[str]) -> dict[tuple[str, int, int], RunHistory]:
    """What the agents say they did: per run of `jobs`, the (at, state, host) of every
    status in `task-status-reported`, read from its start to its current end. The agents'
    side of "no task runs twice at once" (`on_host_overlaps` over this), independent of
    what the job manager made of it."""
    codec = default_codec()
    runs: dict[tuple[str, int, int], RunHistory] = {}
    async with aclosing(read_to_end(bootstrap, ["task-status-reported"])) as records:
        async for rec in records:
            etype, body = codec.decode(rec.value)
            for st in body["statuses"] if etype == "TaskStatusReported" else ():
                if st["job_id"] in jobs:
                    key = (st["job_id"], st["instance"], st["run"])
                    runs.setdefault(key, RunHistory()).changes.append(
                        (body["at"], st["state"], body["host"]))
    return runs


async def read_to_end(bootstrap: str,
                      topics: Iterable[str]) -> AsyncGenerator[ConsumerRecord, None]:
    """Every record of every partition of `topics`, from its start to its end as it was when
    reading began (what is produced meanwhile is not read), each partition in offset order.
    Use it in `contextlib.aclosing` so the consumer stops however the loop ends."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, **consumer_settings(),  # type: ignore[arg-type]
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                max_partition_fetch_bytes=8 << 20)
    await consumer.start()
    try:
        parts = [TopicPartition(t, p) for t in topics
                 for p in sorted(consumer.partitions_for_topic(t) or ())]
        consumer.assign(parts)
        ends = await log_end_offsets(consumer, parts)
        await consumer.seek_to_beginning(*parts)
        left = {tp for tp in parts if ends[tp] > 0}
        while left:
            batch = await consumer.getmany(*left, timeout_ms=500, max_records=10_000)
            for tp, records in batch.items():
                for rec in records:
                    if rec.offset < ends[tp]:
                        yield rec
                if records and records[-1].offset + 1 >= ends[tp]:
                    left.discard(tp)
    finally:
        await consumer.stop()


async def committed_offsets(bootstrap: str, group: str, partitions: set[tuple[str, int]],
                            ) -> dict[tuple[str, int], int]:
    """The offsets `group` has committed on `partitions` (those it committed nothing on
    are left out), read as a client outside the group."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                enable_auto_commit=False, **consumer_settings())  # type: ignore[arg-type]
    await consumer.start()
    try:
        out = {}
        for tp in sorted(partitions):
            offset = await consumer.committed(TopicPartition(*tp))
            if offset is not None:
                out[tp] = offset
        return out
    finally:
        await consumer.stop()


async def wait_offers(bootstrap: str, hosts: set[str], timeout: float) -> None:
    """Wait until OfferReceived has offered each host (available) at least once."""
    await wait_hosts_seen(bootstrap, "offer-received", "OfferReceived", hosts, timeout,
                          lambda body: {o["host"] for o in body["offers"] if o["available"]},
                          "offered")


async def wait_hosts_seen(bootstrap: str, topic_name: str, etype: str, hosts: set[str],
                          timeout: float, named: Callable[[dict[str, Any]], set[str]],
                          what: str, alive: Callable[[], None] = lambda: None) -> None:
    """Read `topic_name` from its start until the `etype` records have named every host
    (`named`: the hosts one body names); TimeoutError after `timeout` s, saying how many
    were not `what`. `alive` is called every round (it raises if a process it watches
    died). Other event types are passed over undecoded."""
    codec = default_codec()
    consumer = AIOKafkaConsumer(topic_name, bootstrap_servers=bootstrap,
                                **consumer_settings(),  # type: ignore[arg-type]
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    try:
        while not hosts <= seen:
            if time.monotonic() > deadline:
                missing = sorted(hosts - seen)
                raise TimeoutError(f"{len(missing)} hosts not {what} in {timeout:.0f}s: "
                                   f"{missing[:10]}")
            alive()
            batch = await consumer.getmany(timeout_ms=500, max_records=10_000)
            for records in batch.values():
                for rec in records:
                    if codec.event_type(rec.value) == etype:
                        seen |= named(codec.decode(rec.value)[1])
    finally:
        await consumer.stop()


def percentile(values: list[int], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of `values`, None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return float(ordered[rank - 1])
