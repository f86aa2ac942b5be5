"""Items of a batch fact cut by the partition of their job (pure).

A partitioned job manager reads a job's facts on the partition its id hashes to, so a
core that writes one fact about many jobs (the resource manager's TasksAdmitted, a
placement round's PlacementMade) writes one record per partition, each holding only that
partition's jobs and keyed by its first item's job. `shard_of_job` is the partition
function (`peloton.bus.routing.partition_of`), passed in by the shell so the core stays
free of Kafka. `by_shard` is the cut itself, for any shard function of an item (the
routers' `peloton.bus.routing.split` cuts a fact's items by their key's partition with it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["by_shard", "by_job_shard"]


def by_shard(items: list[Any], shard_of: Callable[[Any], int]) -> list[list[Any]]:
    """`items` cut into one list per shard (`shard_of(item)`), in shard order, each in the
    items' order; [] for no items."""
    parts: dict[int, list[Any]] = {}
    for item in items:
        parts.setdefault(shard_of(item), []).append(item)
    return [parts[p] for p in sorted(parts)]


def by_job_shard(items: list[dict[str, Any]], shard_of_job: Callable[[str], int] | None,
                 ) -> list[list[dict[str, Any]]]:
    """`items` (each naming its `job_id`) cut into one list per shard of their jobs, in
    shard order, each in the items' order; all in one list without `shard_of_job`; []
    for no items."""
    if shard_of_job is None:
        return [items] if items else []
    return by_shard(items, lambda item: shard_of_job(item["job_id"]))
