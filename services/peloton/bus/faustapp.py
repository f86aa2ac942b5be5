"""The Faust app factory: one place for the settings every service uses.

Records travel as raw bytes (our own Avro single-object codec decodes them, so a bad record
can be dead-lettered instead of crashing a Faust serializer). Group timeouts and SASL/TLS
come from `peloton.bus.kafkaconfig` (the dev broker: 2 s session timeout, as measured: a
group join there takes about half of it, at least 1 s; Apache Kafka: 10 s by default,
within its 6 s minimum); a short producer linger.

Restart in seconds (what a kill -9 and a restart of the same service instance cost):
- The services use no Faust tables, so the table manager starts without Faust's fixed 1 s
  settle delay (`_TableManager`); with tables it behaves as Faust's.
- A process killed -9 leaves its member in the group: Apache Kafka evicts it after the
  session timeout; the dev broker never does, so against it a restart rejoins as the
  dead member (`peloton.bus.devbroker.rejoin_as_dead_member`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import faust
from faust.tables.manager import TableManager

from peloton.bus import gcpolicy
from peloton.bus.catalog import INTERNAL_TOPICS, SNAPSHOT_TOPICS, TOPICS, partitioned_for
from peloton.bus.devbroker import is_dev_broker, patch_faust_fetch_wait, rejoin_as_dead_member
from peloton.bus.intake import App
from peloton.bus.kafkaconfig import client_settings, faust_settings, ssl_context
from peloton.bus.kafkaconfig import from_env as kafka_from_env
from peloton.bus.topicconfig import from_env as topic_settings

__all__ = ["make_app", "raw_topic", "ensure_topics"]



def make_app(app_id: str, bootstrap: str, web_port: int | None = None,
             member: str | None = None, fetch_wait_ms: int | None = None,
             **extra: Any) -> faust.App:
    """A Faust app (= consumer group `app_id`); `member` names this instance when several
    instances share the group (a partitioned service, `peloton.bus.partitioned`);
    `fetch_wait_ms`: its consumer's fetch wait on the dev broker (default
    `devbroker.FETCH_MAX_WAIT_MS`; Apache Kafka answers a fetch as records arrive)."""
    kafka = kafka_from_env()
    settings: dict[str, Any] = dict(
        broker=f"kafka://{bootstrap}",
        store="memory://",
        topic_partitions=4,
        topic_disable_leader=True,
        consumer_auto_offset_reset="earliest",
        # group timeouts (within Apache Kafka's bounds) and SASL/TLS: peloton.bus.kafkaconfig
        **faust_settings(kafka, ssl_context(kafka)),
        broker_commit_interval=0.5,
        producer_linger=0.005,
        producer_max_batch_size=262144,
        producer_max_request_size=16 << 20,
        consumer_max_fetch_size=8 << 20,
        stream_wait_empty=False,
        web_enabled=web_port is not None,
        web_port=web_port or 6066,
        web_bind="127.0.0.1",
        web_host="127.0.0.1",
        TableManager=_TableManager,
        datadir=str(_faust_dir(app_id if member is None else f"{app_id}@{member}")),
    )
    settings.update(extra)
    patch_faust_fetch_wait(app_id, fetch_wait_ms)
    rejoin_as_dead_member(app_id, member)
    app = App(app_id, **settings)
    gcpolicy.install(app)  # no full-heap collection pauses every few seconds
    return app


def _faust_dir(app_id: str) -> Path:
    """Where Faust keeps its (empty: no tables) data directory: under PELOTON_STATE_DIR,
    else the temporary directory; never the working directory (read-only in containers,
    and a checkout there filled up with `peloton-*-data` folders). Its parent is created
    here: Faust makes only the last level."""
    base = os.environ.get("PELOTON_STATE_DIR") or tempfile.gettempdir()
    path = Path(base) / "faust" / app_id
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


class _TableManager(TableManager):  # type: ignore[misc]
    """Faust's table manager, without its fixed 1 s start-up delay when no table is
    registered (the services keep their state in their cores, not in Faust tables)."""

    async def on_start(self) -> None:
        if len(self):
            await super().on_start()
            return
        await self._update_channels()
        await self.recovery.start()


def raw_topic(app: faust.App, name: str) -> Any:
    return app.topic(name, key_type=bytes, value_type=bytes, key_serializer="raw",
                     value_serializer="raw", internal=False)


async def ensure_topics(bootstrap: str, env: Mapping[str, str] | None = None) -> None:
    """Create every catalog topic (and snapshot topic) that does not exist yet
    (idempotent), with the partition counts of this process, or of a process started with
    environment `env` (`catalog.partitioned_for`: a minicluster's parent creates the topics
    its services read). Replication and retention: `peloton.bus.topicconfig`
    (environment)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **client_settings())
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        events = (*TOPICS, *INTERNAL_TOPICS) if env is None else partitioned_for(env)
        topics = topic_settings()
        dev = is_dev_broker()  # it stores topic configs and ignores them
        replication = topics.replication
        missing = [NewTopic(t.name, t.partitions, replication,
                            topic_configs={} if dev else topics.event_config())
                   for t in events if t.name not in existing]
        missing += [NewTopic(t.name, t.partitions, replication,
                             topic_configs={} if dev else topics.snapshot_config())
                    for t in SNAPSHOT_TOPICS if t.name not in existing]
        if missing:
            try:
                await admin.create_topics(missing)
            except Exception as exc:  # a concurrent creator won the race; verify below
                if "TopicAlreadyExists" not in type(exc).__name__ + str(exc):
                    raise
    finally:
        await admin.close()
