"""The Avro single-object codec: round trips of every event, the wire header checked
against an independent CRC-64-AVRO (written here from the Avro spec), and DecodeError for
everything that is not a record we know."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import event_bodies as eb
import hypothesis.strategies as st
import pytest
from bus_samples import PRIMITIVES, SCHEMA_DIR, fullname, load, sample
from fastavro.schema import to_parsing_canonical_form
from hypothesis import given, settings

from peloton.bus.codec import MARKER, Codec, DecodeError, EncodeError, default_codec

SCHEMA_FILES = sorted(SCHEMA_DIR.glob("*.avsc"))
EVENTS = sorted({p.name.split(".")[0] for p in SCHEMA_FILES})


@pytest.fixture(scope="module")
def codec() -> Codec:
    return default_codec()


# ------------------------------------------------- CRC-64-AVRO, from the spec

_EMPTY = 0xC15D213AA4D7A795
_TABLE = []
for _i in range(256):
    _fp = _i
    for _ in range(8):
        _fp = (_fp >> 1) ^ (_EMPTY & -(_fp & 1))
    _TABLE.append(_fp)


def crc64_avro(data: bytes) -> int:
    fp = _EMPTY
    for byte in data:
        fp = (fp >> 8) ^ _TABLE[(fp ^ byte) & 0xFF]
    return fp


def canonical_form(schema: Any, ns: str = "", seen: set[str] | None = None) -> str:
    """Parsing Canonical Form (Avro spec): primitives as names, full names, only
    name/type/fields/symbols/items/values/size in that order, no whitespace."""
    seen = set() if seen is None else seen
    dump = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
    if isinstance(schema, str):
        return dump(schema if schema in PRIMITIVES else fullname(schema, ns))
    if isinstance(schema, list):
        return "[" + ",".join(canonical_form(s, ns, seen) for s in schema) + "]"
    kind = schema["type"]
    if kind in PRIMITIVES:
        return dump(kind)
    if kind == "array":
        return '{"type":"array","items":' + canonical_form(schema["items"], ns, seen) + "}"
    if kind == "map":
        return '{"type":"map","values":' + canonical_form(schema["values"], ns, seen) + "}"
    name = fullname(schema["name"], schema.get("namespace", ns))
    seen.add(name)
    inner = name.rpartition(".")[0]
    parts = [f'"name":{dump(name)}', f'"type":{dump(kind)}']
    if kind == "record":
        fields = ",".join('{"name":' + dump(f["name"]) + ',"type":'
                          + canonical_form(f["type"], inner, seen) + "}"
                          for f in schema["fields"])
        parts.append(f'"fields":[{fields}]')
    elif kind == "enum":
        parts.append('"symbols":' + dump(schema["symbols"]).replace(", ", ","))
    elif kind == "fixed":
        parts.append(f'"size":{int(schema["size"])}')
    return "{" + ",".join(parts) + "}"


def fingerprint(schema: Any) -> bytes:
    return crc64_avro(canonical_form(schema).encode()).to_bytes(8, "little")


@pytest.mark.parametrize(("text", "expected"), [
    ('"int"', 0x7275D51A3F395C8F),
    ('"string"', 0x8F014872634503C7),
    ("", _EMPTY),
])
def test_crc64_avro_reference_values(text: str, expected: int) -> None:
    assert crc64_avro(text.encode()) == expected


def test_canonical_form_of_a_small_schema() -> None:
    schema = {"type": "record", "name": "R", "namespace": "n", "doc": "dropped",
              "fields": [{"name": "a", "type": {"type": "int"}, "default": 1},
                         {"name": "b", "type": ["null", {"type": "map", "values": "R"}]}]}
    assert canonical_form(schema) == (
        '{"name":"n.R","type":"record","fields":[{"name":"a","type":"int"},'
        '{"name":"b","type":["null",{"type":"map","values":"n.R"}]}]}')


# ------------------------------------------------------------------ round trips


def test_every_schema_file_is_an_event_the_codec_knows(codec: Codec) -> None:
    assert codec.event_types == EVENTS
    for path in SCHEMA_FILES:
        name, version = path.name.split(".")[:2]
        assert load(path)["name"] == name
        assert int(version[1:]) in codec.versions(name)


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=[p.name for p in SCHEMA_FILES])
def test_our_canonical_form_agrees_with_fastavro(path: Path) -> None:
    schema = load(path)
    assert canonical_form(schema) == to_parsing_canonical_form(schema)


@pytest.mark.parametrize("full", [True, False], ids=["full", "minimal"])
@pytest.mark.parametrize("event", EVENTS)
def test_every_event_round_trips(codec: Codec, event: str, full: bool) -> None:
    latest = max(codec.versions(event))
    schema = load(SCHEMA_DIR / f"{event}.v{latest}.avsc")
    body = sample(schema, full)
    data = codec.encode(event, body)
    assert data[:2] == b"\xc3\x01" == MARKER
    assert data[2:10] == fingerprint(schema)  # little-endian CRC-64-AVRO of the PCF
    assert codec.decode(data) == (event, body)
    assert codec.decode(bytearray(data)) == (event, body)  # type: ignore[arg-type]


SHAPED: dict[str, Callable[[], dict[str, Any]]] = {
    "JobSubmitted": lambda: eb.job_submitted("j1", 3, ports=("http",), grace_s=2),
    "JobCreated": lambda: eb.job_created("j1", 3, instance_cpu={1: 2.0}),
    "JobKillRequested": lambda: eb.job_kill_requested("j1", 0, 2, reason="done"),
    "JobRejected": lambda: eb.job_rejected("j1", "name: must not be empty"),
    "JobStateChanged": lambda: eb.job_state_changed("j1", "RUNNING", "PENDING",
                                                    {"RUNNING": 1, "PENDING": 2}),
    "TaskStateChanged": lambda: eb.task_state_changed("j1", (0, "READY"), (1, "READY")),
    "TaskHealthChanged": lambda: eb.task_health_changed("j1", (0, "PENDING"), (1, "HEALTHY")),
    "JobSpecChanged": lambda: eb.job_spec_changed("j1"),
    "UpdateStateChanged": lambda: eb.update_state_changed("j1"),
    "JobUpdateRequested": lambda: eb.job_update_requested("j1"),
    "TasksAdmitted": lambda: eb.tasks_admitted("j1", 0, 1),
    "AdmissionDeferred": lambda: eb.admission_deferred("j1", 2, "pool over entitlement"),
    "EntitlementUpdated": lambda: eb.entitlement_updated({"/": None, "/default": "/"}),
    "PlacementMade": lambda: eb.placement_made(eb.placement("j1", 0, "h1",
                                                            ports={"http": 31000})),
    "PlacementRejected": lambda: eb.placement_rejected("j1", 0, "h1"),
    "PlacementFailed": lambda: eb.placement_failed("j1", 0),
    "TaskLaunchRequested": lambda: eb.launch_requested("h1", eb.launch("j1", 0)),
    "TaskKillRequested": lambda: eb.task_kill_requested("h1", "j1", 0),
    "TaskReconcileRequested": lambda: eb.task_reconcile_requested("h1", ("j1", 0, 1)),
    "TaskStatusReported": lambda: eb.agent_status("h1", "j1", 0, "RUNNING"),
    "HostRegistered": lambda: eb.host_registered("h1", labels={"zone": "a"}),
    "HostStatusReported": lambda: eb.heartbeat("h1", 5, running=["j1-0-1"]),
    "HostDrainProgressed": lambda: eb.host_drain_progressed("h1", "web/1: SLA"),
    "HostLost": lambda: eb.host_lost("h1", runs=["j1-0-1"]),
    "OfferReceived": lambda: eb.offer_received(eb.offer("h1", used_ports=[31000])),
    "DeadLetterRecorded": lambda: eb.dead_letter_recorded(),
}


@pytest.mark.parametrize("event", sorted(SHAPED))
def test_realistic_bodies_round_trip(codec: Codec, event: str) -> None:
    body = SHAPED[event]()
    assert codec.decode_each(codec.encode(event, body)) == [(event, body)]


def test_an_avro_default_fills_what_a_producer_left_out(codec: Codec) -> None:
    newest = load(SCHEMA_DIR / f"JobKillRequested.v{max(codec.versions('JobKillRequested'))}"
                               ".avsc")
    defaults = {f["name"]: f["default"] for f in newest["fields"] if "default" in f}
    assert {"instances", "reason"} <= set(defaults)
    body = {"job_id": "j1", "at": 1}
    assert codec.decode(codec.encode("JobKillRequested", body))[1] == {**body, **defaults}


# -------------------------------------------------------------------- encoding errors


def test_encoding_an_unknown_event_type_is_an_encode_error(codec: Codec) -> None:
    with pytest.raises(EncodeError, match="unknown event type 'Nope'"):
        codec.encode("Nope", {})


@pytest.mark.parametrize("body", [
    {"job_id": "j1"},  # missing fields
    {"job_id": 5, "at": 1, "instances": [], "reason": ""},  # wrong type
    {"job_id": "j1", "at": "soon", "instances": [], "reason": ""},
    {"job_id": "j1", "at": 1, "instances": ["a"], "reason": ""},
])
def test_a_body_that_does_not_match_its_schema_is_an_encode_error(codec: Codec,
                                                                  body: dict[str, Any]) -> None:
    with pytest.raises(EncodeError, match="JobKillRequested"):
        codec.encode("JobKillRequested", body)


def test_encoding_with_an_unknown_version_is_an_encode_error(codec: Codec) -> None:
    with pytest.raises((EncodeError, KeyError)):
        codec.encode("JobKillRequested", {"job_id": "j1", "at": 1}, version=99)


# -------------------------------------------------------------------- decoding errors


def _valid(codec: Codec) -> bytes:
    return codec.encode("TaskStateChanged", eb.task_state_changed("j1", (0, "READY")))


@pytest.mark.parametrize(("data", "message"), [
    (None, "empty record (tombstone)"),
    (b"", "missing C3 01 marker"),
    (b"\xc3", "missing C3 01 marker"),
    (b"\xc3\x01\x00\x00", "missing C3 01 marker"),
    (b"\x00\x01" + bytes(8) + b"\x00", "missing C3 01 marker"),
    (b"\xc3\x02" + bytes(8) + b"\x00", "missing C3 01 marker"),
    (b'{"job_id": "j1"}', "missing C3 01 marker"),
    (b"\xc3\x01" + b"\xff" * 8 + b"\x00", "unknown schema fingerprint ffffffffffffffff"),
])
def test_garbage_is_a_decode_error(codec: Codec, data: bytes | None, message: str) -> None:
    with pytest.raises(DecodeError, match=re.escape(message)):
        codec.decode(data)


def test_every_truncation_is_a_decode_error(codec: Codec) -> None:
    data = _valid(codec)
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            codec.decode(data[:cut])


def test_trailing_bytes_are_a_decode_error(codec: Codec) -> None:
    with pytest.raises(DecodeError, match="TaskStateChanged: 3 trailing bytes"):
        codec.decode(_valid(codec) + b"\x00\x00\x00")


def test_a_corrupt_body_names_the_event(codec: Codec) -> None:
    data = _valid(codec)
    with pytest.raises(DecodeError, match="TaskStateChanged: corrupt body"):
        codec.decode(data[:10] + b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")


def test_a_record_written_by_another_schema_set_is_unknown(codec: Codec,
                                                          tmp_path: Path) -> None:
    (tmp_path / "Ping.v1.avsc").write_text(json.dumps(
        {"type": "record", "name": "Ping", "fields": [{"name": "n", "type": "int"}]}))
    other = Codec(tmp_path)
    assert other.event_types == ["Ping"]
    with pytest.raises(DecodeError, match="unknown schema fingerprint"):
        codec.decode(other.encode("Ping", {"n": 1}))
    with pytest.raises(DecodeError, match="unknown schema fingerprint"):
        other.decode(_valid(codec))


def test_a_schema_dir_with_a_badly_named_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ping.avsc").write_text('"int"')
    with pytest.raises(ValueError, match="not named <Event>.v<N>.avsc"):
        Codec(tmp_path)


def test_an_empty_schema_dir_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no schemas"):
        Codec(tmp_path)


# ------------------------------------------------------------------- fuzzing


FUZZ = settings(max_examples=150, deadline=None, derandomize=True)


def _decode_or_decode_error(codec: Codec, data: bytes) -> None:
    try:
        etype, body = codec.decode(data)
    except DecodeError:
        return
    assert etype in EVENTS and isinstance(body, dict)
    assert codec.decode(codec.encode(etype, body)) == (etype, body)


@FUZZ
@given(st.binary(max_size=64))
def test_random_bytes_never_raise_anything_but_decode_error(data: bytes) -> None:
    _decode_or_decode_error(default_codec(), data)


@FUZZ
@given(st.sampled_from(EVENTS), st.binary(max_size=96))
def test_random_bodies_behind_a_known_header_never_raise_anything_but_decode_error(
    event: str, body: bytes,
) -> None:
    codec = default_codec()
    header = codec.encode(event, sample(load(SCHEMA_DIR / f"{event}.v1.avsc")))[:10]
    _decode_or_decode_error(codec, header + body)


@FUZZ
@given(st.sampled_from(EVENTS), st.data())
def test_corrupted_records_never_raise_anything_but_decode_error(event: str,
                                                                 data: st.DataObject) -> None:
    codec = default_codec()
    record = bytearray(codec.encode(event, sample(load(SCHEMA_DIR / f"{event}.v1.avsc"))))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(10, len(record) - 1))
        record[at] = data.draw(st.integers(0, 255))
    _decode_or_decode_error(codec, bytes(record))
