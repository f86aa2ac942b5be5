"""Avro single-object encoding of events.

Wire format (Avro 1.11 spec, "Single-object encoding"): the two marker bytes C3 01, the
8-byte little-endian CRC-64-AVRO fingerprint of the writer's schema (Parsing Canonical
Form), then the Avro binary body. A reader looks the fingerprint up among every published
version of every event schema (schemas/<Name>.v<N>.avsc) and resolves the writer's schema
against the newest version of that event (Avro schema resolution), so old records stay
readable after a schema evolves.

Errors: anything that cannot be decoded raises `DecodeError` with a reason fit for a
dead-letter record; encoding a body that does not match its schema raises `EncodeError`.

Speed: every schema is parsed once, when the codec is made; a record costs only its body
(`peloton.bus.avrocalls`: prepared readers per writer version, resolved to the newest, and
a prepared writer per version; both run code generated for the schema where it is exact,
`peloton.bus.avrocompiled`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from fastavro.schema import fingerprint, parse_schema, to_parsing_canonical_form

from peloton.bus.avrocalls import BodyReader, BodyWriter
from peloton.datafiles import schemas_dir
from peloton.model.event import Event
from peloton.model.joinedchanges import explode

__all__ = ["Event", "Codec", "DecodeError", "EncodeError", "MARKER", "default_codec", "schema_dir"]

MARKER = b"\xc3\x01"
_NAME = re.compile(r"^(?P<name>[A-Za-z]+)\.v(?P<version>\d+)\.avsc$")


class DecodeError(ValueError):
    """A record is not a valid single-object-encoded event we know."""


class EncodeError(ValueError):
    """An event body does not match its schema."""


@dataclass(frozen=True, slots=True)
class _Version:
    name: str
    version: int
    parsed: Any
    fingerprint: bytes
    writer: BodyWriter


def schema_dir() -> Path:
    """The event schemas: the wheel's copy or the repository's schemas/ (PELOTON_SCHEMAS
    overrides; see peloton.datafiles)."""
    return schemas_dir()


class Codec:
    """Encodes and decodes events by the schemas found in one directory."""

    def __init__(self, directory: Path) -> None:
        self._by_fp: dict[bytes, _Version] = {}
        self._by_version: dict[tuple[str, int], _Version] = {}
        self._latest: dict[str, _Version] = {}
        for path in sorted(directory.glob("*.avsc")):
            match = _NAME.match(path.name)
            if not match:
                raise ValueError(f"schema file {path.name} is not named <Event>.v<N>.avsc")
            raw = json.loads(path.read_text())
            parsed = parse_schema(raw, _write_hint=False)
            # fastavro returns the fingerprint already in the spec's little-endian byte order
            fp = bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))
            ver = _Version(match["name"], int(match["version"]), parsed, fp,
                           BodyWriter(parsed, MARKER + fp))
            self._by_fp[ver.fingerprint] = ver
            self._by_version[(ver.name, ver.version)] = ver
            current = self._latest.get(ver.name)
            if current is None or current.version < ver.version:
                self._latest[ver.name] = ver
        if not self._latest:
            raise ValueError(f"no schemas in {directory}")
        # one reader per writer version, resolving to the newest version of its event
        self._readers: dict[bytes, BodyReader] = {}
        for fp, ver in self._by_fp.items():
            newest = self._latest[ver.name]
            self._readers[fp] = BodyReader(ver.parsed, None if newest is ver else newest.parsed)

    @property
    def event_types(self) -> list[str]:
        return sorted(self._latest)

    def versions(self, name: str) -> list[int]:
        return sorted(v.version for v in self._by_fp.values() if v.name == name)

    def schema(self, name: str, version: int | None = None) -> Any:
        if version is None:
            return self._latest[name].parsed
        for v in self._by_fp.values():
            if v.name == name and v.version == version:
                return v.parsed
        raise KeyError(f"{name} v{version}")

    def header(self, name: str, version: int | None = None) -> bytes:
        """The single-object prefix (marker + fingerprint) of an event's version (newest by
        default); KeyError if there is no such version."""
        ver = self._latest[name] if version is None else self._by_version.get((name, version))
        if ver is None:
            raise KeyError(f"{name} v{version}")
        return MARKER + ver.fingerprint

    def encode(self, event_type: str, body: dict[str, Any], version: int | None = None) -> bytes:
        ver = self._latest.get(event_type)
        if ver is None:
            raise EncodeError(f"unknown event type {event_type!r}")
        if version is not None and version != ver.version:
            found = self._by_version.get((event_type, version))
            if found is None:
                raise EncodeError(f"{event_type} has no version {version}")
            ver = found
        try:
            return ver.writer.write(body)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise EncodeError(f"{event_type}: {exc}") from exc

    def event_type(self, data: bytes | None) -> str | None:
        """The event type a record says it is (by its fingerprint), without decoding it;
        None if that cannot be told."""
        if data is None or len(data) < 10 or data[:2] != MARKER:
            return None
        writer = self._by_fp.get(bytes(data[2:10]))
        return None if writer is None else writer.name

    def decode(self, data: bytes | None) -> tuple[str, dict[str, Any]]:
        """Return (event type, body) resolved to the newest schema of that event."""
        if data is None:
            raise DecodeError("empty record (tombstone)")
        if len(data) < 10 or data[:2] != MARKER:
            raise DecodeError("not Avro single-object encoding (missing C3 01 marker)")
        fp = bytes(data[2:10])
        writer = self._by_fp.get(fp)
        if writer is None:
            raise DecodeError(f"unknown schema fingerprint {fp.hex()}")
        try:
            body, end = self._readers[fp].read_at(data, 10)
        except Exception as exc:  # fastavro raises many types on corrupt bodies
            raise DecodeError(f"{writer.name}: corrupt body ({type(exc).__name__}: {exc})") from exc
        if end != len(data):
            raise DecodeError(f"{writer.name}: {len(data) - end} trailing bytes")
        return writer.name, body  # type: ignore[return-value]

    def decode_each(self, data: bytes | None) -> list[tuple[str, dict[str, Any]]]:
        """The facts one record holds, in order: (event type, body) for each; a record
        that joins several jobs' TaskStateChanged gives one per job
        (`peloton.model.joinedchanges`). Every reader of job-events reads through this."""
        etype, body = self.decode(data)
        return [(etype, b) for b in explode(etype, body)]


@cache
def default_codec() -> Codec:
    return Codec(schema_dir())
