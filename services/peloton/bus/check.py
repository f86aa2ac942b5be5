"""`check_event`: is an event one the bus can carry? For the tests of every core.

Checks, in order: the type is in the topic catalog, the body matches the schema of the
version the shell writes it as (the newest; a single job's TaskStateChanged: its part
version, `peloton.bus.coalesce`): no field left out, even one with a default, no unknown
top-level field, fastavro's validator (so the message names the bad field); and the
catalog's key rule finds a key in the body. Raises `EventCheckError` with every reason found.
"""

from __future__ import annotations

from fastavro.validation import ValidationError, validate

from peloton.bus.catalog import topic, topic_for_event
from peloton.bus.coalesce import write_version
from peloton.bus.codec import Codec, default_codec
from peloton.bus.keys import key_of
from peloton.model.event import Event

__all__ = ["check_event", "EventCheckError"]


class EventCheckError(ValueError):
    """An event the shell could not publish: unknown type, bad body or no key."""


def check_event(ev: Event, codec: Codec | None = None) -> None:
    codec = codec or default_codec()
    try:
        topic_for_event(ev.type)
    except KeyError:
        raise EventCheckError(f"{ev.type}: not in the topic catalog") from None
    if ev.topic is not None and ev.type not in topic(ev.topic).events:
        raise EventCheckError(f"{ev.type}: not carried by {ev.topic}")
    if ev.type not in codec.event_types:
        raise EventCheckError(f"{ev.type}: no schema in schemas/")
    schema = codec.schema(ev.type, write_version(ev.type, ev.body))
    names = {f["name"] for f in schema["fields"]}
    if extra := set(ev.body) - names:
        raise EventCheckError(f"{ev.type}: fields not in its schema: {sorted(extra)}")
    if missing := names - set(ev.body):
        raise EventCheckError(f"{ev.type}: fields left out: {sorted(missing)}")
    try:
        validate(ev.body, schema, raise_errors=True, strict=True)
    except ValidationError as exc:
        raise EventCheckError(f"{ev.type}: body does not match its schema: {exc}") from None
    try:
        key_of(ev.type, ev.body)
    except KeyError as exc:
        raise EventCheckError(str(exc.args[0])) from None
