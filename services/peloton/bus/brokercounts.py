"""The partition counts topics have on the broker, for cores that group by partition.

The catalog's counts (`peloton.bus.partitions`: defaults, overridden by the environment)
are only what a topic is created with; a topic that already exists keeps its own count,
and the producers partition by that one (murmur2 of the key mod the broker's count). A
core that groups its keys by the partition they land in (the host manager's mass-silence
zones: the partitions of host-registered; the resource manager's admissions and the
placement engine's rounds, one record per partition of tasks-admitted and placement-made,
for the job manager's shards) asks for the real count: the shell tells it
(`tell_partitions`, called by `CoreDriver.rebuild`) through the core's optional
`partitions_known(counts)`. A count that differs from the catalog's is logged once per
process and topic, with what it means.

A partitioned service cannot follow the broker's count that way: its instances, its
routers and its shares cut keys by the catalog's count (`peloton.bus.routing`), and the
group assigns the broker's partitions, so where its own topics have another count
on the broker, a shard would take another shard's keys or none (runs recorded nowhere).
It refuses to start instead (`check_sharded`, `PartitionCountMismatch`: `peloton serve
... --partitioned` exits 2 saying which topics and what to set).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from aiokafka import AIOKafkaConsumer

from peloton.bus.catalog import topic
from peloton.bus.devbroker import consumer_settings
from peloton.bus.kafkaconfig import client_settings

__all__ = ["broker_partition_counts", "differences", "sharded_problem", "check_sharded",
           "PartitionCountMismatch"]

log = logging.getLogger(__name__)

_warned: set[tuple[str, int, int]] = set()


async def broker_partition_counts(bootstrap: str, topics: Collection[str]) -> dict[str, int]:
    """{topic: its partition count on the broker} for those of `topics` that exist."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                **consumer_settings(), **client_settings())  # type: ignore[arg-type]
    await consumer.start()
    try:
        await consumer.topics()  # loads the metadata of every topic
        counts = {t: len(consumer.partitions_for_topic(t) or ()) for t in topics}
    finally:
        await consumer.stop()
    counts = {t: n for t, n in counts.items() if n}
    for name, broker, catalog in differences(counts):
        if (name, broker, catalog) not in _warned:
            _warned.add((name, broker, catalog))
            log.warning("topic %s has %d partitions on the broker, the catalog's setting "
                        "is %d (PELOTON_TOPIC_PARTITIONS): a topic keeps the count it was "
                        "created with; what groups keys by partition follows the broker's",
                        name, broker, catalog)
    return counts


def differences(counts: dict[str, int]) -> list[tuple[str, int, int]]:
    """(topic, broker's count, catalog's count) of each catalog topic whose counts differ."""
    found = []
    for name, n in sorted(counts.items()):
        try:
            catalog = topic(name).partitions
        except KeyError:  # not a catalog topic (a snapshot topic, a test's own)
            continue
        if n != catalog:
            found.append((name, n, catalog))
    return found


class PartitionCountMismatch(RuntimeError):
    """A partitioned service's own topics have another partition count on the broker than
    the one it cuts its keys by (the message says which and what to set)."""


def sharded_problem(service: str, sharded: Collection[str],
                    counts: Mapping[str, int]) -> str | None:
    """Why `service` cannot run partitioned over `sharded` (its co-partitioned topics) given
    the broker's `counts`, or None when each has the catalog's count (a topic the broker
    does not list is not judged: it is created with the catalog's count)."""
    wrong = differences({name: n for name, n in counts.items() if name in sharded})
    if not wrong:
        return None
    found = ", ".join(f"{name} has {broker}" for name, broker, _ in wrong)
    setting = " ".join(f"{name}={broker}" for name, broker, _ in wrong)
    return (f"{service}: cannot run partitioned: it cuts its keys by the configured "
            f"partition counts ({', '.join(f'{n}={c}' for n, _, c in wrong)}), but on the "
            f"broker {found}. A topic keeps the count it was created with; give every "
            f"process of the cluster PELOTON_TOPIC_PARTITIONS with the broker's counts "
            f"({setting}, and the same for the other topics partitioned with them), or "
            f"run it unpartitioned.")


async def check_sharded(bootstrap: str, service: str, sharded: Collection[str]) -> None:
    """Raise PartitionCountMismatch unless `service`'s co-partitioned topics have, on the
    broker, the counts it cuts keys by (`sharded_problem`)."""
    problem = sharded_problem(service, sharded,
                              await broker_partition_counts(bootstrap, sharded))
    if problem is not None:
        raise PartitionCountMismatch(problem)
