"""Partition counts are configuration: the catalog's numbers are defaults, overridden per
topic by the environment.

`PELOTON_TOPIC_PARTITIONS="task-launch-requested=64,task-kill-requested=64"` (comma- or
space-separated `topic=count`, count >= 1) sets those topics' partition counts for every
process that imports the catalog (`peloton.bus.catalog` applies `overrides()` to its
`TOPICS`), so topics are created with them (`peloton.bus.faustapp.ensure_topics`) and the
in-memory runner partitions like the broker. Every process of one cluster must see the same
setting (the minicluster's processes inherit the environment; Helm: one env for all). A
topic that already exists keeps the count it was created with (Kafka cannot shrink a
topic and the dev broker cannot grow one); readers that route by partition ask the broker
for the real count (`peloton.bus.hostrouted`).

A malformed setting (unknown topic, not a positive integer, no `=`) raises ValueError with
the offending item, at import of the catalog: a process never starts on a half-read setting.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any, TypeVar

__all__ = ["ENV", "parse", "overrides", "configured"]

T = TypeVar("T", bound=Any)

ENV = "PELOTON_TOPIC_PARTITIONS"


def parse(text: str, known: Collection[str]) -> dict[str, int]:
    """`topic=count` items (comma or whitespace separated) -> {topic: count}."""
    counts: dict[str, int] = {}
    for item in text.replace(",", " ").split():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"{ENV}: {item!r} is not topic=count")
        if name not in known:
            raise ValueError(f"{ENV}: unknown topic {name!r}")
        try:
            count = int(value)
        except ValueError:
            raise ValueError(f"{ENV}: {item!r}: the count is not an integer") from None
        if count < 1:
            raise ValueError(f"{ENV}: {item!r}: a topic needs at least one partition")
        counts[name] = count
    return counts


def overrides(known: Collection[str], env: Mapping[str, str] | None = None) -> dict[str, int]:
    """The partition counts the environment sets (empty when unset)."""
    return parse((os.environ if env is None else env).get(ENV, ""), known)


def configured(groups: tuple[tuple[T, ...], ...],
               env: Mapping[str, str] | None = None) -> tuple[tuple[T, ...], ...]:
    """The catalog's topic groups (dataclasses with `name` and `partitions`) with the
    environment's counts applied; every name of every group may be set."""
    counts = overrides({t.name for g in groups for t in g}, env)
    return tuple(tuple(replace(t, partitions=counts.get(t.name, t.partitions)) for t in g)
                 for g in groups)
