"""Prepared Avro body readers and writers: one schema parse at start-up, none per record.

fastavro's public `schemaless_reader`/`schemaless_writer` parse (or re-walk) the schema on
every call, and the reader compares the writer's and the reader's schema dicts each time:
for the small records the services exchange (a 50-200 byte TaskStateChanged) that set-up
costs more than the body itself (measured: decode 27 -> 10 us, encode 30 -> 13 us for a
JobSubmitted). `BodyReader` and `BodyWriter` do that work once per schema and then call
fastavro's compiled body functions (`_read_data`, `write_data`) directly.

Those two are fastavro internals. `prepared_calls_work()` checks, once per process, that
they exist with the signatures used here and give the same bytes and values as the public
API on a sample; if not (another fastavro version), every reader and writer falls back to
the public calls, which give the same results, only slower. The suite checks the prepared
calls against the public ones on generated bodies of every schema version
(tests/bus/test_bus_avrocalls.py).

First of all, where the schema allows, both use Python code generated for the schema
(`peloton.bus.avrocompiled`: about three times faster than fastavro's compiled body
functions on our events), which hands any value or encoding it does not know to the
fastavro calls above (`compiled=False` turns it off).

Errors are the public calls' errors: a body that does not fit raises what fastavro raises
(ValueError, TypeError, KeyError, AttributeError); a corrupt record raises whatever the
reader raises. `peloton.bus.codec` maps them to EncodeError and DecodeError.
"""

from __future__ import annotations

import copy
import io
from functools import cache
from typing import Any

import fastavro
from fastavro import _read as _fastavro_read
from fastavro import _write as _fastavro_write
from fastavro.schema import parse_schema

from peloton.bus.avrocompiled import compile_reader, compile_writer

__all__ = ["BodyReader", "BodyWriter", "prepared_calls_work", "appended_defaults"]

_READ_OPTIONS = {"return_record_name": False, "return_record_name_override": False,
                 "handle_unicode_errors": "strict", "return_named_type": False,
                 "return_named_type_override": False}
_WRITE_OPTIONS = {"strict": False, "strict_allow_default": False,
                  "disable_tuple_notation": False}

# the compiled body functions the public calls end in (None in a build without them)
_read_body: Any = getattr(_fastavro_read, "_read_data", None)
_write_body: Any = getattr(_fastavro_write, "write_data", None)


class BodyReader:
    """Reads one Avro body written with `writer` (a schema dict) as `reader` (None: the
    same schema) from a stream positioned at the body.

    A reader that only appends fields with plain defaults to the writer's record (a
    version that added top-level fields, as TaskStateChanged v4 added `more` to v3) reads
    with the writer's schema and sets those defaults: the same values as fastavro's schema
    resolution, which costs three times the plain read (32 against 10 us a record)."""

    def __init__(self, writer: Any, reader: Any | None = None,
                 prepared: bool | None = None, compiled: bool = True) -> None:
        self._appended = None if reader is None else appended_defaults(writer, reader)
        if self._appended is not None:
            reader = None  # read as written; the appended defaults are set after
        self.writer, self.reader = writer, reader
        self._named: dict[str, dict[str, Any]] = {"writer": {}, "reader": {}}
        self._writer = parse_schema(writer, self._named["writer"])
        self._reader = None if reader is None else parse_schema(reader, self._named["reader"])
        self.prepared = prepared_calls_work() if prepared is None else prepared
        #: generated code for reading as written (`peloton.bus.avrocompiled`), when exact
        self._compiled = (compile_reader(self._writer, self._named["writer"])
                          if compiled and self._reader is None else None)

    def read(self, stream: io.BytesIO) -> Any:
        return self._filled(self._read(stream))

    def read_at(self, data: bytes, pos: int) -> tuple[Any, int]:
        """The body that starts at `pos` of `data`, and where it ends."""
        if self._compiled is not None:
            if type(data) is not bytes:
                data = bytes(data)
            try:
                body, end = self._compiled(data, pos)
            except Exception:  # noqa: BLE001 (anything unusual: fastavro reads it, or fails)
                pass
            else:
                return self._filled(body), end
        stream = io.BytesIO(data)
        stream.seek(pos)
        body = self._read(stream)
        return self._filled(body), stream.tell()

    def _read(self, stream: io.BytesIO) -> Any:
        if self.prepared:
            return _read_body(stream, self._writer, self._named, self._reader, _READ_OPTIONS)
        return fastavro.schemaless_reader(stream, self.writer, self.reader)

    def _filled(self, body: Any) -> Any:
        if self._appended is not None:
            for name, default in self._appended:
                body[name] = copy.copy(default)  # a fresh [] or {} per record
        return body


_PLAIN_DEFAULTS = (type(None), bool, int, float, str)


def _without_docs(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _without_docs(v) for k, v in schema.items() if k != "doc"}
    if isinstance(schema, list):
        return [_without_docs(v) for v in schema]
    return schema


def appended_defaults(writer: Any, reader: Any) -> list[tuple[str, Any]] | None:
    """The (name, default) of the fields `reader` appends to `writer`'s record, if that is
    all it changes (same record name, the writer's fields first and unchanged but for
    docs) and every default is plain (null, a boolean, a number, a string, an empty array
    or map); else None (schema resolution is needed)."""
    if not (isinstance(writer, dict) and isinstance(reader, dict)
            and writer.get("type") == reader.get("type") == "record"
            and writer.get("name") == reader.get("name")
            and writer.get("namespace") == reader.get("namespace")):
        return None
    old, new = writer.get("fields", []), reader.get("fields", [])
    if len(new) <= len(old) or _without_docs(new[:len(old)]) != _without_docs(old):
        return None
    added: list[tuple[str, Any]] = []
    for field in new[len(old):]:
        if "default" not in field:
            return None
        default = field["default"]
        if not (isinstance(default, _PLAIN_DEFAULTS) or default in ([], {})):
            return None
        added.append((field["name"], default))
    return added


class BodyWriter:
    """Writes bodies of one schema, after a fixed `header` (the single-object prefix)."""

    def __init__(self, schema: Any, header: bytes = b"", prepared: bool | None = None,
                 compiled: bool = True) -> None:
        self.schema, self.header = schema, header
        self._named: dict[str, Any] = {}
        self._schema = parse_schema(schema, self._named)
        self.prepared = prepared_calls_work() if prepared is None else prepared
        #: generated code (`peloton.bus.avrocompiled`); None where it does not cover the schema
        self._compiled = (compile_writer(self._schema, self._named, header)
                          if compiled else None)

    def write(self, body: Any) -> bytes:
        if self._compiled is not None:
            try:
                return self._compiled(body)
            except Exception:  # noqa: BLE001 (anything unusual: fastavro writes it, or fails)
                pass
        if self.prepared:
            buf = bytearray(self.header)
            _write_body(buf, body, self._schema, self._named, "", _WRITE_OPTIONS)
            return bytes(buf)
        out = io.BytesIO()
        out.write(self.header)
        fastavro.schemaless_writer(out, self.schema, body)
        return out.getvalue()


_PROBE_SCHEMA = {
    "type": "record", "name": "Probe", "namespace": "peloton.probe", "fields": [
        {"name": "s", "type": "string"}, {"name": "n", "type": "long"},
        {"name": "d", "type": "double"}, {"name": "o", "type": ["null", "string"]},
        {"name": "m", "type": {"type": "map", "values": "int"}},
        {"name": "a", "type": {"type": "array", "items": {
            "type": "record", "name": "Item", "fields": [{"name": "i", "type": "int"}]}}}]}
_PROBE_NEWER = {**_PROBE_SCHEMA, "fields": [
    *_PROBE_SCHEMA["fields"], {"name": "added", "type": "int", "default": 7}]}
_PROBE_BODY = {"s": "é-x", "n": -(2 ** 40), "d": 0.25, "o": None, "m": {"k": 3},
               "a": [{"i": 1}, {"i": -2}]}


@cache
def prepared_calls_work() -> bool:
    """True if fastavro's body functions take the calls made here and agree with the
    public API on a probe record (same schema and an evolved reader)."""
    if _read_body is None or _write_body is None:
        return False
    try:
        public = io.BytesIO()
        fastavro.schemaless_writer(public, _PROBE_SCHEMA, _PROBE_BODY)
        data = BodyWriter(_PROBE_SCHEMA, prepared=True).write(_PROBE_BODY)
        if data != public.getvalue():
            return False
        for reader in (None, _PROBE_NEWER):
            stream = io.BytesIO(data)
            got = BodyReader(_PROBE_SCHEMA, reader, prepared=True).read(stream)
            want = fastavro.schemaless_reader(io.BytesIO(data), _PROBE_SCHEMA, reader)
            if got != want or stream.tell() != len(data):
                return False
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, EOFError):
        # an internal call that does not fit this fastavro: use the public API
        return False
    return True
