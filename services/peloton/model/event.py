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
    """

    type: str
    key: str
    body: dict[str, Any]
