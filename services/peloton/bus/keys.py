"""Record keys: every record's Kafka key comes from the catalog's rule for its event type.

`key_of(etype, body)` is the only place a key is derived; the shell uses it for every
record it writes, whatever key a core put in its `Event`. A body without the declared field
raises `KeyError` (a bug in the core that built it, caught by `check_event` in tests).
"""

from __future__ import annotations

from typing import Any

from peloton.bus.catalog import Batch, key_rule

__all__ = ["key_of", "record_key"]


def key_of(etype: str, body: dict[str, Any]) -> str:
    rule = key_rule(etype)
    if isinstance(rule, Batch):
        return rule.key
    value: Any = body
    for part in rule.path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(f"{etype}: key field {rule.path!r} missing from the body")
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise KeyError(f"{etype}: key field {rule.path!r} is not a string or integer")
    return str(value)


def record_key(etype: str, body: dict[str, Any]) -> bytes:
    return key_of(etype, body).encode()
