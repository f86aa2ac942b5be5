"""The Event value type that cores return and shells publish."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Event"]


@dataclass(frozen=True, slots=True)
class Event:
    """One event: its type (the schema's short name), Kafka key and body."""

    type: str
    key: str
    body: dict[str, Any]
