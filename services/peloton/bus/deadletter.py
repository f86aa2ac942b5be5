"""Dead letters: a record a service cannot decode or handle is kept, with the reason."""

from __future__ import annotations

from peloton.model.event import Event

__all__ = ["dead_letter"]


def dead_letter(service: str, topic: str, partition: int, offset: int, reason: str,
                key: bytes | None, value: bytes | None, now_ms: int) -> Event:
    return Event("DeadLetterRecorded", topic, {
        "at": now_ms, "service": service, "source_topic": topic, "partition": partition,
        "offset": offset, "reason": reason[:2000], "key": key, "value": value or b""})
