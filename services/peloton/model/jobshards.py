"""Items of a batch fact cut by the partition of their job (pure).

A partitioned job manager reads a job's facts on the partition its id hashes to, so a
core that writes one fact about many jobs (the resource manager's TasksAdmitted, a
placement round's PlacementMade) writes one record per partition, each holding only that
partition's jobs and keyed by its first item's job. `shard_of_job` is the partition
function (`peloton.bus.routing.partition_of`), passed in by the shell so the core stays
free of Kafka.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["by_job_shard"]


def by_job_shard(items: list[dict[str, Any]], shard_of_job: Callable[[str], int] | None,
                 ) -> list[list[dict[str, Any]]]:
    """`items` (each naming its `job_id`) cut into one list per shard of their jobs, in
    shard order, each in the items' order; all in one list without `shard_of_job`; []
    for no items."""
    if shard_of_job is None:
        return [items] if items else []
    parts: dict[int, list[dict[str, Any]]] = {}
    for item in items:
        parts.setdefault(shard_of_job(item["job_id"]), []).append(item)
    return [parts[p] for p in sorted(parts)]
