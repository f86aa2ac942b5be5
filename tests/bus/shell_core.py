"""A small core for the shell tests, and helpers to drive a CoreDriver against a broker.

`AnswerCore` answers every JobSubmitted with a JobRejected (deciding changes its state
before the shell publishes, as the real cores do). Its state counts, per job, how often a
submission and an answer were folded or decided, so a record folded twice or skipped shows.
It consumes job-submitted live and replays job-submitted plus its own job-events.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from broker_topics import produce
from bus_samples import SCHEMA_DIR, load, sample

from peloton.bus.catalog import topic
from peloton.bus.codec import default_codec
from peloton.bus.devbroker import consumer_settings, log_end_offsets
from peloton.bus.driver import CoreDriver
from peloton.bus.keys import record_key
from peloton.bus.publisher import PublishError
from peloton.bus.replay import replay_topics
from peloton.model.event import Event


def newest_sample(event: str) -> dict[str, Any]:
    paths = sorted(SCHEMA_DIR.glob(f"{event}.v*.avsc"),
                   key=lambda p: int(p.name.split(".v")[1].split(".")[0]))
    return sample(load(paths[-1]))  # type: ignore[no-any-return]


def submitted(job_id: str) -> dict[str, Any]:
    return newest_sample("JobSubmitted") | {"job_id": job_id}


def rejected(job_id: str) -> dict[str, Any]:
    return newest_sample("JobRejected") | {"job_id": job_id}


class AnswerCore:
    inputs: tuple[str, ...] = ("job-submitted",)
    replay: tuple[str, ...] = ("job-submitted", "job-events")
    tick_interval: float | None = None
    snapshot_version = 1

    def __init__(self, fail_on: frozenset[str] = frozenset(), slow_on: frozenset[str] =
                 frozenset(), slow_s: float = 0.0, bad_body_on: frozenset[str] = frozenset(),
                 answer_backlog: bool = False) -> None:
        self.fail_on, self.slow_on, self.slow_s = fail_on, slow_on, slow_s
        self.bad_body_on = bad_body_on
        self.answer_backlog = answer_backlog
        self.submitted: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        self.folds = 0
        self.handled = 0

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        self.folds += 1
        if etype == "JobSubmitted":
            self.submitted[body["job_id"]] += 1
        elif etype == "JobRejected":
            self.answered[body["job_id"]] += 1

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        self.handled += 1
        jid = body["job_id"]
        self.submitted[jid] += 1
        self.answered[jid] += 1  # decided: the state changes before the shell publishes
        if jid in self.fail_on:
            raise RuntimeError(f"half-way through {jid}")
        if jid in self.slow_on:
            time.sleep(self.slow_s)  # blocks the loop: the lease cannot be renewed
        out = [Event("JobRejected", jid, rejected(jid))]
        if jid in self.bad_body_on:  # the first event is fine, the second does not encode
            out.append(Event("JobRejected", jid, rejected(jid) | {"reasons": 7}))
        return out

    def tick(self, now: int) -> list[Event]:
        return []

    def after_replay(self, now: int) -> list[Event]:
        if not self.answer_backlog:
            return []
        todo = sorted(j for j in self.submitted if not self.answered[j])
        for jid in todo:
            self.answered[jid] += 1
        return [Event("JobRejected", j, rejected(j)) for j in todo]

    def snapshot(self) -> dict[str, Any]:
        return {"submitted": dict(self.submitted), "answered": dict(self.answered)}

    def restore(self, state: dict[str, Any]) -> None:
        submitted = Counter({str(k): int(v) for k, v in state["submitted"].items()})
        answered = Counter({str(k): int(v) for k, v in state["answered"].items()})
        self.submitted, self.answered = submitted, answered


class DiscardingCore(AnswerCore):
    """An AnswerCore that can forget its last decision (no rebuild needed)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.discarded = 0
        self._undo: list[str] = []

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        self._undo = [body["job_id"]]
        return super().handle(etype, body, now)

    def discard_unpublished(self) -> None:
        self.discarded += 1
        for jid in self._undo:
            self.answered[jid] -= 1
            if not self.answered[jid]:
                del self.answered[jid]
        self._undo = []


def driver_for(broker: str, core: AnswerCore, **kw: Any) -> CoreDriver:
    return CoreDriver("jobmgr", core, broker, default_codec(), **kw)


async def submit(broker: str, job_ids: list[str]) -> None:
    codec = default_codec()
    await produce(broker, [("job-submitted", record_key("JobSubmitted", submitted(j)),
                            codec.encode("JobSubmitted", submitted(j))) for j in job_ids])


async def read_topic(broker: str, name: str) -> list[tuple[int, int, bytes | None, bytes]]:
    """Every record of a topic: (partition, offset, key, value)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=broker, enable_auto_commit=False,
                                **consumer_settings())  # type: ignore[arg-type]
    await consumer.start()
    try:
        tps = [TopicPartition(name, p) for p in range(topic(name).partitions)] \
            if not name.endswith("-snapshots") else [TopicPartition(name, 0)]
        consumer.assign(tps)
        ends = await log_end_offsets(consumer, tps)
        out = []
        for tp in tps:
            consumer.seek(tp, 0)
            while ends[tp]:
                batch = await consumer.getmany(tp, timeout_ms=500)
                recs = batch.get(tp, [])
                out += [(tp.partition, r.offset, r.key, r.value) for r in recs
                        if r.offset < ends[tp]]
                if not recs or recs[-1].offset + 1 >= ends[tp]:
                    break
        return out
    finally:
        await consumer.stop()


async def answers(broker: str) -> Counter[str]:
    codec = default_codec()
    found: Counter[str] = Counter()
    for _, _, _, value in await read_topic(broker, "job-events"):
        etype, body = codec.decode(value)
        if etype == "JobRejected":
            found[body["job_id"]] += 1
    return found


async def consume_live(driver: CoreDriver, broker: str) -> tuple[int, int]:
    """What a Faust agent that lost its group offsets would do: hand every record of the
    core's inputs, from offset 0, to the driver. Returns (handled, skipped)."""
    handled = skipped = 0
    for name in driver.core.inputs:
        expected = set(topic(name).events)
        for partition, offset, key, value in await read_topic(broker, name):
            if await driver.on_record(name, partition, offset, key, value, expected):
                handled += 1
            else:
                skipped += 1
    return handled, skipped


async def log_state(broker: str, core: AnswerCore) -> dict[str, Any]:
    """The state the log describes: a fresh core folding the replay topics."""
    await replay_topics(broker, list(core.replay), default_codec(), core.fold)
    return core.snapshot()


def refusing(driver: CoreDriver, error: str, retriable: bool,
             times: int | None = 1) -> list[int]:
    """Make the broker refuse the driver's next `times` sends to job-events (None: every
    one) with `error`; returns the count of refusals so far, as a one-item list."""
    real_send = driver.publisher.send_all
    count = [0]

    async def send_all(records: Any) -> Any:
        if (any(t == "job-events" for t, _, _ in records)
                and (times is None or count[0] < times)):
            count[0] += 1
            raise PublishError(error, retriable=retriable)
        return await real_send(records)

    driver.publisher.send_all = send_all  # type: ignore[method-assign]
    return count
