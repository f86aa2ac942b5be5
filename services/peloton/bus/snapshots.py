"""Core snapshots on a per-service topic: chunks, then a manifest naming them.

A snapshot is a header (format version, service, the core's `snapshot_version`, the log
positions it covers, created_at, id) plus the core's `snapshot()` as zlib-compressed JSON,
cut into chunks below the broker's message size limit (Kafka: 1 MB by default). The chunks
are written first; once all are delivered, a manifest record with the header, the chunks'
offsets and a sha256 of the whole is written. A snapshot exists only once its manifest is
in the log, so a writer that dies half-way leaves no half snapshot.

Reading (`read_snapshots`): from the log end backwards (the dev broker's log end comes
from `peloton.bus.devbroker.log_end_offsets`, not ListOffsets, which Tansu answers short),
the newest manifests are tried in turn; those whose chunks are all there, intact, of our
format, service and core version are returned, newest first, for the caller to restore
(the newest one the core can restore wins). Everything skipped on the way (a manifest of
another format, service or core version, a chunk gone, a checksum mismatch, a record that
is not a snapshot record) is a reason for the caller's warning; with no candidate left the
caller replays the whole log. Nothing here relies on compaction (Tansu ignores it): only a
bounded window at the log end is read. Records: `MAGIC kind header-json \\n payload`,
kind C (chunk) or M (manifest).
"""

from __future__ import annotations

import hashlib
import json
import logging
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from peloton.bus.devbroker import consumer_settings, log_end_offsets
from peloton.bus.kafkaconfig import client_settings
from peloton.bus.publisher import Publisher
from peloton.bus.replay import Positions

__all__ = ["FORMAT", "CHUNK_BYTES", "SnapshotHeader", "Snapshot", "SnapshotUnreadable",
           "encode_state", "state_json", "compress", "decode_state", "write_snapshot",
           "read_snapshots", "read_newest"]

log = logging.getLogger(__name__)

FORMAT = 1
CHUNK_BYTES = 512 * 1024  # well below Kafka's 1 MB default message.max.bytes
MAGIC = b"PLSN"
_WINDOW = 64  # records read per step backwards from the log end
_TRIES = 3  # manifests tried before giving up
_GARBAGE = 16  # foreign records met before giving up
_FOREIGN = 512  # other services' manifests passed over before giving up (shards share)


class SnapshotUnreadable(ValueError):
    """No snapshot we can use (the message says why)."""


@dataclass(frozen=True, slots=True)
class SnapshotHeader:
    format: int
    service: str
    core_version: int
    positions: Positions
    created_at: int
    snapshot_id: str

    def to_json(self) -> dict[str, Any]:
        return {"format": self.format, "service": self.service,
                "core_version": self.core_version, "created_at": self.created_at,
                "snapshot_id": self.snapshot_id,
                "positions": [[t, p, o] for (t, p), o in sorted(self.positions.items())]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SnapshotHeader:
        return cls(int(data["format"]), str(data["service"]), int(data["core_version"]),
                   {(str(t), int(p)): int(o) for t, p, o in data["positions"]},
                   int(data["created_at"]), str(data["snapshot_id"]))


@dataclass(frozen=True, slots=True)
class Snapshot:
    header: SnapshotHeader
    blob: bytes  # the compressed JSON state (decode_state reads it)


def state_json(state: dict[str, Any]) -> bytes:
    """The state as JSON (taken while the core is locked: the state may share its data).
    orjson: the same JSON as the json module's for the cores' plain data (integer keys
    become strings), in a fifth of the time the loop is held."""
    return orjson.dumps(state, option=orjson.OPT_NON_STR_KEYS)


def compress(text: bytes) -> bytes:
    return zlib.compress(text, 1)


def encode_state(state: dict[str, Any]) -> bytes:
    return compress(state_json(state))


def decode_state(blob: bytes) -> dict[str, Any]:
    try:
        text = zlib.decompress(blob)
        try:
            state = orjson.loads(text)
        except orjson.JSONDecodeError:  # the json module's NaN/Infinity of older writers
            state = json.loads(text)
    except (zlib.error, ValueError) as exc:
        raise SnapshotUnreadable(f"state is not compressed JSON ({exc})") from exc
    if not isinstance(state, dict):
        raise SnapshotUnreadable("state is not a JSON object")
    return state


def _record(kind: bytes, header: dict[str, Any], payload: bytes = b"") -> bytes:
    return MAGIC + kind + json.dumps(header, separators=(",", ":")).encode() + b"\n" + payload


def _parse(value: bytes | None) -> tuple[bytes, dict[str, Any], bytes]:
    if not value or value[:4] != MAGIC or value[4:5] not in (b"C", b"M"):
        raise SnapshotUnreadable("not a snapshot record")
    head, _, payload = value[5:].partition(b"\n")
    try:
        header = json.loads(head)
    except ValueError as exc:
        raise SnapshotUnreadable(f"bad record header ({exc})") from exc
    return value[4:5], header, payload


async def write_snapshot(publisher: Publisher, topic: str, header: SnapshotHeader,
                         blob: bytes) -> int:
    """Write chunks, then the manifest; return the manifest's offset."""
    chunks = [blob[i:i + CHUNK_BYTES] for i in range(0, len(blob), CHUNK_BYTES)] or [b""]
    sid = header.snapshot_id
    delivered = await publisher.send_all(
        [(topic, f"chunk-{i}".encode(), _record(b"C", {"id": sid, "index": i}, c))
         for i, c in enumerate(chunks)])
    manifest = header.to_json() | {"chunks": [off for _, _, off in delivered],
                                   "size": len(blob),
                                   "sha256": hashlib.sha256(blob).hexdigest()}
    [(_, _, offset)] = await publisher.send_all([(topic, b"manifest",
                                                  _record(b"M", manifest))])
    return offset


async def read_snapshots(bootstrap: str, topic: str, service: str, core_version: int,
                         limit: int = _TRIES) -> tuple[list[Snapshot], list[str]]:
    """Intact snapshots of this service and core version on `topic`, newest first (at
    most `limit` manifests looked at), and the reasons the others were skipped."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                max_partition_fetch_bytes=8 << 20,
                                **consumer_settings(), **client_settings())  # type: ignore[arg-type]
    await consumer.start()
    found: list[Snapshot] = []
    reasons: list[str] = []
    try:
        tp = TopicPartition(topic, 0)
        if not consumer.partitions_for_topic(topic):
            return found, [f"no topic {topic}"]
        consumer.assign([tp])
        end = (await log_end_offsets(consumer, [tp]))[tp]
        tried = foreign = 0
        async for offset, manifest in _manifests_backwards(consumer, tp, end):
            if isinstance(manifest, SnapshotUnreadable):
                reasons.append(f"@{offset}: {manifest}")
                if len(reasons) >= _GARBAGE:
                    break  # a topic of foreign records: do not read it all
                continue
            if _sibling(manifest.get("service"), service, topic):
                foreign += 1  # another shard's on a shared topic: not a reason, not a try
                if foreign >= _FOREIGN:
                    break
                continue
            tried += 1
            try:
                found.append(await _load(consumer, tp, manifest, service, core_version))
            except SnapshotUnreadable as exc:
                reasons.append(f"snapshot {manifest.get('snapshot_id')!s} @{offset}: {exc}")
            if tried >= limit:
                break
        return found, reasons
    finally:
        await consumer.stop()


def _sibling(other: Any, service: str, topic: str) -> bool:
    """Whether a manifest is another shard's of the service that owns `topic` (the shards
    of a partitioned service, `<service>-p<k>`, share its snapshot topic)."""
    owner = topic.removesuffix("-snapshots")
    return (isinstance(other, str) and other != service
            and (other == owner or other.startswith(f"{owner}-p")))


async def read_newest(bootstrap: str, topic: str, service: str, core_version: int) -> Snapshot:
    """The newest intact snapshot on `topic`; raises SnapshotUnreadable with the reasons."""
    found, reasons = await read_snapshots(bootstrap, topic, service, core_version)
    if not found:
        raise SnapshotUnreadable("; ".join(reasons) or f"no snapshot in {topic}")
    return found[0]


async def _read_range(consumer: AIOKafkaConsumer, tp: TopicPartition, first: int,
                      end: int) -> dict[int, bytes | None]:
    """Records with offsets in [first, end)."""
    out: dict[int, bytes | None] = {}
    consumer.seek(tp, first)
    position = first
    while position < end:
        batch = await consumer.getmany(tp, timeout_ms=1000, max_records=_WINDOW)
        records = batch.get(tp, [])
        if not records:
            break  # compacted or deleted away: the caller sees what is missing
        for rec in records:
            if rec.offset >= end:
                return out
            out[rec.offset] = rec.value
            position = rec.offset + 1
    return out


async def _manifests_backwards(
        consumer: AIOKafkaConsumer, tp: TopicPartition, end: int,
) -> AsyncIterator[tuple[int, dict[str, Any] | SnapshotUnreadable]]:
    """Manifests from the log end backwards; a record that is no snapshot record (or a
    manifest whose header does not parse) comes as its SnapshotUnreadable."""
    while end > 0:
        first = max(0, end - _WINDOW)
        window = await _read_range(consumer, tp, first, end)
        for offset in sorted(window, reverse=True):
            try:
                kind, header, _ = _parse(window[offset])
            except SnapshotUnreadable as exc:
                yield offset, exc
                continue
            if kind == b"M":
                yield offset, header
        end = first


async def _load(consumer: AIOKafkaConsumer, tp: TopicPartition, manifest: dict[str, Any],
                service: str, core_version: int) -> Snapshot:
    try:
        header = SnapshotHeader.from_json(manifest)
        chunks = [int(o) for o in manifest["chunks"]]
        digest = str(manifest["sha256"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotUnreadable(f"bad manifest ({exc!r})") from exc
    if header.format != FORMAT:
        raise SnapshotUnreadable(f"snapshot format {header.format}, this build reads {FORMAT}")
    if header.service != service:
        raise SnapshotUnreadable(f"snapshot of {header.service}, not {service}")
    if header.core_version != core_version:
        raise SnapshotUnreadable(
            f"core snapshot version {header.core_version}, this core is {core_version}")
    if not chunks:
        raise SnapshotUnreadable("manifest names no chunks")
    found = await _read_range(consumer, tp, min(chunks), max(chunks) + 1)
    parts: list[bytes] = []
    for index, offset in enumerate(chunks):
        if offset not in found:
            raise SnapshotUnreadable(f"chunk {index} at {offset} is gone")
        kind, head, payload = _parse(found[offset])
        if kind != b"C" or head.get("id") != header.snapshot_id or head.get("index") != index:
            raise SnapshotUnreadable(f"record at {offset} is not chunk {index}")
        parts.append(payload)
    blob = b"".join(parts)
    if hashlib.sha256(blob).hexdigest() != digest:
        raise SnapshotUnreadable("checksum mismatch")
    return Snapshot(header, blob)
