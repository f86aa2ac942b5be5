"""TaskStateChanged records that hold several jobs' changes (v4's `more`).

A record of job-events may join the TaskStateChanged of several jobs of its partition
(`peloton.bus.coalesce` writes them so: readers pay per record). Its body is the first
job's batch of changes plus `more`, the other jobs' batches in order. `explode` gives the
per-job bodies a record holds; every reader of job-events folds those, one by one, so a
core never sees `more`. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

__all__ = ["JOINED_EVENT", "explode"]

#: the event whose records may join several jobs' facts
JOINED_EVENT = "TaskStateChanged"


def explode(event_type: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-job bodies a decoded record holds, in order: the body itself (its `more`
    removed) and each body of its `more`; any other event: the body alone."""
    if event_type != JOINED_EVENT:
        return [body]
    more = body.pop("more", None)
    if not more:
        return [body]
    return [body, *more]
