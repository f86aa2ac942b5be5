"""The Faust app factory: one place for the settings every service uses.

Records travel as raw bytes (our own Avro single-object codec decodes them, so a bad record
can be dead-lettered instead of crashing a Faust serializer). Settings measured against the
dev broker: 2 s session timeout (a group join there takes about half of it, at least 1 s),
4 s rebalance timeout, 0.5 s heartbeats, a short producer linger.

Restart in seconds (what a kill -9 and a restart of the same service instance cost):
- The services use no Faust tables, so the table manager starts without Faust's fixed 1 s
  settle delay (`_TableManager`); with tables it behaves as Faust's.
- A process killed -9 leaves its member in the group: Apache Kafka evicts it after the
  2 s session timeout; the dev broker never does, so against it a restart rejoins as the
  dead member (`peloton.bus.devbroker.rejoin_as_dead_member`).
"""

from __future__ import annotations

import os
from typing import Any

import faust
from faust.tables.manager import TableManager

from peloton.bus.catalog import SNAPSHOT_TOPICS, TOPICS
from peloton.bus.devbroker import is_dev_broker, patch_faust_fetch_wait, rejoin_as_dead_member

__all__ = ["make_app", "raw_topic", "ensure_topics"]



def make_app(app_id: str, bootstrap: str, web_port: int | None = None, **extra: Any) -> faust.App:
    settings: dict[str, Any] = dict(
        broker=f"kafka://{bootstrap}",
        store="memory://",
        topic_partitions=4,
        topic_disable_leader=True,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=2,
        broker_rebalance_timeout=4,
        broker_heartbeat_interval=0.5,
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
    )
    settings.update(extra)
    patch_faust_fetch_wait()
    rejoin_as_dead_member(app_id)
    return faust.App(app_id, **settings)


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


# snapshot topics in production: time-based deletion, small segments (see catalog doc)
_SNAPSHOT_CONFIG = {"cleanup.policy": "delete", "retention.ms": str(6 * 3600 * 1000),
                    "segment.ms": str(600 * 1000), "max.message.bytes": str(1 << 20)}


async def ensure_topics(bootstrap: str) -> None:
    """Create every catalog topic (and snapshot topic) that does not exist yet
    (idempotent). The replication factor is PELOTON_TOPIC_REPLICATION (default 1, the dev
    broker; 3 in production)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        replication = int(os.environ.get("PELOTON_TOPIC_REPLICATION", "1"))
        missing = [NewTopic(t.name, t.partitions, replication)
                   for t in TOPICS if t.name not in existing]
        missing += [NewTopic(t.name, t.partitions, replication, topic_configs=_SNAPSHOT_CONFIG
                             if not is_dev_broker() else {})
                    for t in SNAPSHOT_TOPICS if t.name not in existing]
        if missing:
            try:
                await admin.create_topics(missing)
            except Exception as exc:  # a concurrent creator won the race; verify below
                if "TopicAlreadyExists" not in type(exc).__name__ + str(exc):
                    raise
    finally:
        await admin.close()
