"""One TaskStateChanged record for many jobs: the writer joins, every reader explodes.

The job manager writes a TaskStateChanged per job per decision, about 5.5 per job of 1-8
tasks, and every reader of job-events (resource manager, placement, host manager, read
model, the benchmarks' followers) pays a fixed cost per record besides the body: the
consumer's record and message objects, its ack, the shell's bookkeeping, Avro's set-up.
Records, not bytes, are what they pay for (docs/performance.md). So the writer joins the
TaskStateChanged of one partition that it sends together into one record:

- A single job's changes are written as TaskStateChanged **v3** (`PART_VERSION`, the
  "part"). A v4 record is a v3 body followed by `more`, an array of further parts, and the
  Avro bytes of an item of `more` are exactly those of a v3 body. So `coalesce` joins v3
  records into one v4 record by concatenating their bodies, never re-encoding them: the v4
  header, the first part, the array's count, the other parts, the array's end.
- Readers decode a record and `explode` it (`peloton.model.joinedchanges`) into the
  per-job bodies in their order (a v3 record resolves to v4 with `more` empty: one body).
  Every reader of job-events goes through `explode` (`Codec.decode_each`), so what a core
  sees is the same sequence of per-job facts as before, only read from fewer records.

What `coalesce` keeps (pure, property-tested in tests/bus/test_bus_coalesce.py):
- every part once, and each record of another kind as it was;
- per key, the order: a job's records stay in the order they were sent (a part joins the
  open group of its partition only if no record of its job was sent to that partition
  since the group opened; otherwise a new group starts). Across jobs the order within a
  partition may change, as it may across partitions: Kafka orders a key, and no consumer
  relies on more (every fold is per job);
- every part of a joined record hashes to the record's partition (the partitioner's count
  is the producer's, from the broker's metadata), and the record's key is its first
  part's, so the producer puts it there;
- at most `max_parts` parts and about `max_bytes` bytes in one record.
Deterministic: the same records in, the same records out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from peloton.bus.catalog import topic_for_event
from peloton.bus.routing import partition_for
from peloton.model.joinedchanges import JOINED_EVENT as EVENT

__all__ = ["EVENT", "TOPIC", "PART_VERSION", "MAX_PARTS", "MAX_BYTES", "Joiner", "Outgoing",
           "Placed", "coalesce", "joiner_for", "write_version", "zigzag"]

#: the topic whose records are joined (TaskStateChanged's)
TOPIC = topic_for_event(EVENT).name
#: the version a single job's changes are written as (the part format)
PART_VERSION = 3
MAX_PARTS = 500
MAX_BYTES = 256 * 1024

Outgoing = tuple[str, bytes, bytes]
"""A record to send: (topic, key, value)."""
Placed = tuple[str, bytes, bytes, int | None]
"""A record to send and its partition, where `coalesce` computed it (None: the
producer's partitioner decides)."""


def write_version(event_type: str, body: dict[str, Any]) -> int | None:
    """The schema version to write an event body as: the part version for a
    TaskStateChanged of one job (so `coalesce` can join it), None (the newest) otherwise."""
    if event_type == EVENT and not body.get("more"):
        return PART_VERSION
    return None


def joiner_for(codec: Any) -> Joiner:
    """The joiner of a codec's TaskStateChanged versions (the part and the newest)."""
    return Joiner(codec.header(EVENT, PART_VERSION), codec.header(EVENT))


def zigzag(n: int) -> bytes:
    """Avro's variable-length zig-zag encoding of a long."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


@dataclass(frozen=True, slots=True)
class Joiner:
    """How to tell a part and write a joined record: the single-object prefix of the
    part version (marker + fingerprint) and of the joined version."""

    part_header: bytes
    joined_header: bytes
    max_parts: int = MAX_PARTS
    max_bytes: int = MAX_BYTES

    def is_part(self, topic: str, value: bytes) -> bool:
        return topic == TOPIC and value[:10] == self.part_header

    def join(self, parts: Sequence[bytes]) -> bytes:
        """One record of the parts' bodies (the first as the record's own, the rest in
        `more`); a single part is returned as it is."""
        if len(parts) == 1:
            return parts[0]
        bodies = [p[10:] for p in parts]
        return b"".join((self.joined_header, bodies[0], zigzag(len(bodies) - 1),
                         *bodies[1:], b"\x00"))


@dataclass(slots=True)
class _Group:
    at: int  # index of the group's slot in the output
    key: bytes
    partition: int
    parts: list[bytes] = field(default_factory=list)
    size: int = 0
    blocked: set[bytes] = field(default_factory=set)  # keys sent since the group opened


def coalesce(records: Sequence[Outgoing], joiner: Joiner,
             partitions: Callable[[str], int | None]) -> list[Placed]:
    """Join the parts among `records` (sent in this order) per partition (see the module
    doc), each with the partition computed for it (the producer's own partitioner need
    not hash its key again). `partitions(topic)` is the topic's partition count, None if
    not known yet (its records are then left as they are)."""
    out: list[Placed | _Group] = []
    groups: dict[int, _Group] = {}
    for topic, key, value in records:
        count = partitions(topic) if topic == TOPIC else None
        if count is None:
            out.append((topic, key, value, None))
            continue
        partition = partition_for(key, count)
        group = groups.get(partition)
        if not joiner.is_part(topic, value):
            out.append((topic, key, value, partition))
            if group is not None:
                group.blocked.add(key)
            continue
        if (group is None or key in group.blocked or len(group.parts) >= joiner.max_parts
                or group.size + len(value) > joiner.max_bytes):
            group = groups[partition] = _Group(len(out), key, partition)
            out.append(group)
        group.parts.append(value)
        group.size += len(value)
    return [(TOPIC, r.key, joiner.join(r.parts), r.partition) if isinstance(r, _Group)
            else r for r in out]
