"""Record keys: every record's Kafka key comes from the catalog's rule for its event type.

`key_of(etype, body)` is the only place a key is derived; the shell uses it for every
record it writes, whatever key a core put in its `Event`. A body without the declared field
raises `KeyError` (a bug in the core that built it, caught by `check_event` in tests).
"""

from __future__ import annotations

from typing import Any

from peloton.bus.catalog import Batch, key_rule, topic, topic_for_event
from peloton.model.event import Event

__all__ = ["key_of", "record_key", "record_target"]


def key_of(etype: str, body: dict[str, Any]) -> str:
    rule = key_rule(etype)
    if isinstance(rule, Batch):
        return rule.key
    value: Any = body
    for part in rule.path.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]  # `tasks.0.job_id`: a list's item by position
            continue
        if not isinstance(value, dict) or part not in value:
            raise KeyError(f"{etype}: key field {rule.path!r} missing from the body")
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise KeyError(f"{etype}: key field {rule.path!r} is not a string or integer")
    return str(value)


def record_key(etype: str, body: dict[str, Any]) -> bytes:
    return key_of(etype, body).encode()


def record_target(ev: Event) -> tuple[str, bytes]:
    """The (topic, record key) an event is written to: its type's catalog topic and the
    key rule's key; for a router's part of a fact (`ev.topic` set: an internal inbox,
    `peloton.bus.routing`) that topic and the key the router chose."""
    if ev.topic is None:
        return topic_for_event(ev.type).name, record_key(ev.type, ev.body)
    return topic(ev.topic).name, ev.key.encode()
