"""The API process: the read-model materializer and the HTTP API in one event loop.

One process because one process owns a chdb directory. Shape:
1. `ensure_topics`, open the `Store` (creating its tables).
2. A Faust app with one agent per catalog topic (all of them) reading raw bytes in batches
   (`take_events(1000, within=0.2)`): decode with the codec, project, insert in a worker
   thread, and only then let Faust acknowledge the batch (at-least-once). Undecodable
   records are counted and skipped (the owning services dead-letter them). Rows carry their
   source position, so re-delivered records change nothing.
3. uvicorn serves `create_app(store, KafkaPublisher)` on the same loop (its signal
   handlers off: the Faust worker owns shutdown). It also serves /healthz, /readyz
   (store, publisher, partitions assigned) and /metrics (peloton.api.health); the
   materializer's records consumed, batch latency and lag carry service="readmodel".
The consumer group is `peloton-readmodel-<instance>-<store epoch>`: stable while the store
lives, so a restart resumes where it stopped; a fresh store reads every topic from the
start (the store epoch is drawn when its tables are created).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import faust
import uvicorn
from clickhouse_connect.driver.exceptions import OperationalError
from mode import Service

from peloton.api.app import create_app
from peloton.api.auth import Authenticator
from peloton.api.publisher import KafkaPublisher
from peloton.bus import eventloop, logformat
from peloton.bus.catalog import TOPICS
from peloton.bus.codec import Codec, DecodeError, default_codec
from peloton.bus.consumerlag import LAG_SAMPLE_S, HandledOffsets, sample_lag
from peloton.bus.faustapp import ensure_topics, make_app, raw_topic
from peloton.bus.metrics import EVENTS_CONSUMED, HANDLER_SECONDS
from peloton.bus.readiness import announce_ready
from peloton.readmodel.projector import Row, SourcePos, project
from peloton.readmodel.store import Store

__all__ = ["Materializer", "RawRecord", "run_api", "build_worker_app"]

log = logging.getLogger(__name__)
BATCH = 1000
WITHIN_S = 0.2
STORE_RETRY_S = 1.0
#: the read model's fetch wait on the dev broker (the services': 25 ms): it reads every
#: partition of every topic, and the dev broker polls while a fetch waits and charges each
#: fetch by the partitions it names; it writes in batches of up to WITHIN_S anyway
READ_MODEL_FETCH_WAIT_MS = 100


@dataclass(frozen=True, slots=True)
class RawRecord:
    topic: str
    partition: int
    offset: int
    value: bytes | None


@dataclass
class Materializer:
    """Records in, rows stored. `apply` returns once the rows are in the store."""

    store: Store
    codec: Codec = field(default_factory=default_codec)
    records: int = 0
    rows: int = 0
    undecodable: int = 0
    failed: int = 0
    last_insert_ms: int | None = None

    def project_records(self, batch: Sequence[RawRecord]) -> list[list[Row]]:
        """Rows per record (undecodable records yield none and are counted)."""
        out: list[list[Row]] = []
        for rec in batch:
            try:
                etype, body = self.codec.decode(rec.value)
            except DecodeError as exc:
                self.undecodable += 1
                log.warning("read model: skipping %s[%d]@%d: %s", rec.topic, rec.partition,
                            rec.offset, exc)
                continue
            try:
                out.append(project(etype, body, SourcePos(rec.topic, rec.partition, rec.offset)))
            except (KeyError, ValueError, TypeError) as exc:  # a body the projector rejects
                self.failed += 1
                log.warning("read model: cannot project %s %s[%d]@%d: %r", etype, rec.topic,
                            rec.partition, rec.offset, exc)
        self.records += len(batch)
        return out

    def store_rows(self, per_record: Sequence[Sequence[Row]]) -> None:
        """Blocking: insert all rows; if the batch is refused, insert record by record and
        skip the records the store refuses. Waits while the store is unreachable."""
        flat = [r for rows in per_record for r in rows]
        if not flat:
            return
        while True:
            try:
                self.rows += self.store.insert(flat)
                break
            except OperationalError as exc:  # store unreachable: keep the batch, retry
                log.warning("read model: store unavailable (%s), retrying", exc)
                time.sleep(STORE_RETRY_S)
            except Exception as exc:  # a bad value somewhere: isolate it below
                log.warning("read model: batch insert failed (%r), inserting one by one", exc)
                self._insert_each(per_record)
                break
        self.last_insert_ms = int(time.time() * 1000)

    def _insert_each(self, per_record: Sequence[Sequence[Row]]) -> None:
        for rows in per_record:
            try:
                self.rows += self.store.insert(rows)
            except OperationalError:
                raise
            except Exception as exc:  # this record's rows are invalid: skip and count
                self.failed += 1
                first = rows[0].values if rows else {}
                log.error("read model: dropping rows of %s[%s]@%s: %r", first.get("src_topic"),
                          first.get("src_partition"), first.get("src_offset"), exc)

    async def apply(self, batch: Sequence[RawRecord]) -> None:
        per_record = self.project_records(batch)
        await asyncio.to_thread(self.store_rows, per_record)

    def status(self) -> dict[str, Any]:
        return {"materializer": {"records": self.records, "rows": self.rows,
                                 "undecodable": self.undecodable, "failed": self.failed,
                                 "last_insert_ms": self.last_insert_ms}}


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without its own signal handlers (the Faust worker handles signals)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def build_worker_app(bootstrap: str, store: Store, port: int, instance: str = "1",
                     host: str = "127.0.0.1", authenticator: Authenticator | None = None,
                     ) -> tuple[faust.App, Materializer]:
    """The Faust app: materializer agents plus the HTTP API service. The API's socket is
    bound here, so a taken port fails before anything starts. `authenticator`: who may
    call the API (peloton.api.auth; None: nobody but the open paths)."""
    materializer = Materializer(store)
    app = make_app(f"peloton-readmodel-{instance}-{store.epoch()}", bootstrap,
                   fetch_wait_ms=READ_MODEL_FETCH_WAIT_MS)
    consuming = [False]  # /readyz: partitions assigned
    announce_ready(app, "api", on_ready=lambda: consuming.__setitem__(0, True))
    handled = HandledOffsets()
    for t in TOPICS:
        _add_agent(app, t.name, materializer, handled)

    @app.timer(LAG_SAMPLE_S, name="readmodel-lag")
    async def lag() -> None:
        await sample_lag(app, "readmodel", handled)

    publisher = KafkaPublisher(bootstrap)
    api = create_app(store, publisher, status=materializer.status,
                     authenticator=authenticator,
                     checks=lambda: {"consuming": consuming[0]})
    sock = _bind(host, port)

    class ApiService(Service):
        server: _EmbeddedServer | None = None
        serving: asyncio.Future[None] | None = None

        async def on_start(self) -> None:
            await publisher.start()
            config = uvicorn.Config(api, log_level="info", lifespan="on")
            self.server = _EmbeddedServer(config)
            self.serving = asyncio.ensure_future(self.server.serve(sockets=[sock]))
            log.info("API listening on http://%s:%d (docs at /docs)", host, port)

        async def on_stop(self) -> None:
            if self.server is not None and self.serving is not None:
                self.server.should_exit = True
                await self.serving
            await publisher.stop()

    app.service(ApiService)
    return app, materializer


def _add_agent(app: faust.App, topic_name: str, materializer: Materializer,
               handled: HandledOffsets) -> None:
    source = raw_topic(app, topic_name)
    consumed = EVENTS_CONSUMED.labels("readmodel", topic_name)
    latency = HANDLER_SECONDS.labels("readmodel", topic_name)

    async def consume(stream: Any) -> None:
        async for events in stream.take_events(BATCH, within=WITHIN_S):
            started = time.perf_counter()
            batch = [RawRecord(e.message.topic, e.message.partition, e.message.offset,
                               e.value) for e in events]
            await materializer.apply(batch)
            latency.observe(time.perf_counter() - started)
            consumed.inc(len(batch))
            handled.note([(r.topic, r.partition, r.offset) for r in batch])

    app.agent(source, name=f"readmodel-{topic_name}")(consume)


def run_api(bootstrap: str, dsn: str, port: int, instance: str = "1",
            host: str = "127.0.0.1", authenticator: Authenticator | None = None) -> None:
    """Blocking: materialize the read model and serve the API until stopped (on uvloop
    where installed, `peloton.bus.eventloop`)."""
    eventloop.install()
    asyncio.run(ensure_topics(bootstrap))
    store = Store(dsn)
    try:
        asyncio.set_event_loop(asyncio.new_event_loop())
        app, _ = build_worker_app(bootstrap, store, port, instance, host, authenticator)
        eventloop.announce(app, f"api {instance}")
        logformat.worker(app).execute_from_commandline()
    finally:
        store.close()
