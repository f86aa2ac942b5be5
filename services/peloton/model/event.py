"""The Event value type that cores return and shells publish."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Event"]


@dataclass(frozen=True, slots=True)
class Event:
    """One event: its type (the schema's short name), key and body.

    `key` names the entity the event is about (for logs and in-memory routing). The Kafka
    key of a published record is not taken from here: the shell derives it from the body
    by the topic catalog's rule (`peloton.bus.keys.key_of`), so it cannot drift.

    `topic` is None for every fact a core decides: it goes to the one catalog topic of
    its type. Only a router (`peloton.bus.routing`) sets it: a part of a fact re-published
    on an internal inbox topic (`catalog.INTERNAL_TOPICS`), with `key` as its record key
    (the router chose it to land in the partition of the part's entities).
    """

    type: str
    key: str
    body: dict[str, Any]
    topic: str | None = None
