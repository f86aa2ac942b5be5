"""A topic of a test's own on a real broker (the catalog's come from `ensure_topics`);
shared by the bus and minicluster tests (tests/model is on pytest's pythonpath)."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient, NewTopic


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()
