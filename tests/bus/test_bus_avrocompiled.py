"""Generated Avro code (peloton.bus.avrocompiled) gives what fastavro gives, or hands over:
on generated bodies of every schema version the compiled writer writes fastavro's bytes and
the compiled reader reads fastavro's values and stops where it stops; on odd values (bools
and floats in integer fields, integers past their range, tuples in unions, odd map keys)
and on damaged bytes, `BodyWriter` and `BodyReader` give exactly fastavro's result, bytes
or error (the compiled code refuses what it does not know, and fastavro decides)."""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import fastavro
import hypothesis.strategies as st
import pytest
from bus_samples import SCHEMA_DIR, load, sample
from fastavro.schema import parse_schema
from fastavro.utils import generate_many
from hypothesis import given, settings

from peloton.bus.avrocalls import BodyReader, BodyWriter
from peloton.bus.avrocompiled import Unfit, compile_reader, compile_writer
from peloton.bus.codec import DecodeError, default_codec

SCHEMA_FILES = sorted(SCHEMA_DIR.glob("*.avsc"))

#: every type the generated code covers, and unions of null with each
ALL_TYPES = {
    "type": "record", "name": "All", "namespace": "t", "fields": [
        {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"},
        {"name": "l", "type": "long"}, {"name": "d", "type": "double"},
        {"name": "s", "type": "string"}, {"name": "y", "type": "bytes"},
        {"name": "n", "type": "null"},
        {"name": "a", "type": {"type": "array", "items": "long"}},
        {"name": "m", "type": {"type": "map", "values": "string"}},
        {"name": "r", "type": {"type": "record", "name": "Inner", "fields": [
            {"name": "x", "type": "int", "default": 7}]}},
        {"name": "rs", "type": {"type": "array", "items": "t.Inner"}, "default": []},
        {"name": "os", "type": ["null", "string"], "default": None},
        {"name": "oi", "type": ["null", "int"], "default": None},
        {"name": "ol", "type": ["long", "null"], "default": 3},
        {"name": "od", "type": ["null", "double"], "default": None},
        {"name": "ob", "type": ["null", "boolean"], "default": None},
        {"name": "oy", "type": ["null", "bytes"], "default": None},
        {"name": "om", "type": ["null", {"type": "map", "values": "int"}], "default": None},
        {"name": "oa", "type": ["null", {"type": "array", "items": "string"}],
         "default": None}]}

GOOD = {"b": True, "i": -5, "l": 1 << 40, "d": 0.5, "s": "é-x", "y": b"\x00\xff",
        "n": None, "a": [1, -1, 1 << 62], "m": {"k": "v", "": ""}, "r": {"x": 1},
        "rs": [{"x": 2}, {}], "os": "s", "oi": 3, "ol": None, "od": 2, "ob": False,
        "oy": b"z", "om": {"a": 1}, "oa": ["p"]}


def public_write(schema: Any, body: Any) -> bytes | type[BaseException]:
    out = io.BytesIO()
    try:
        fastavro.schemaless_writer(out, schema, body)
    except Exception as exc:  # noqa: BLE001 (the error's type is the result)
        return type(exc)
    return out.getvalue()


def ours_write(writer: BodyWriter, body: Any) -> bytes | type[BaseException]:
    try:
        return writer.write(body)
    except Exception as exc:  # noqa: BLE001
        return type(exc)


def public_read(schema: Any, data: bytes) -> tuple[Any, int] | type[BaseException]:
    stream = io.BytesIO(data)
    try:
        body = fastavro.schemaless_reader(stream, schema, None)
    except Exception as exc:  # noqa: BLE001
        return type(exc)
    return body, stream.tell()


def ours_read(reader: BodyReader, data: bytes) -> tuple[Any, int] | type[BaseException]:
    try:
        return reader.read_at(data, 0)
    except Exception as exc:  # noqa: BLE001
        return type(exc)


def compiled(schema: Any) -> tuple[Any, Any]:
    named: dict[str, Any] = {}
    parsed = parse_schema(schema, named)
    return compile_writer(parsed, named), compile_reader(parsed, named)


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: p.name)
def test_every_schema_is_compiled_and_agrees_with_fastavro(path: Path) -> None:
    schema = load(path)
    write, read = compiled(schema)
    assert write is not None and read is not None  # every event takes the fast path
    random.seed(len(path.name))  # generate_many draws from the module's generator
    for body in [sample(schema, True), sample(schema, False), *generate_many(schema, 20)]:
        want = public_write(schema, body)
        assert isinstance(want, bytes)
        assert write(body) == want  # the compiled code itself, no fallback
        assert read(want + b"tail", 0) == (public_read(schema, want)[0], len(want))


def test_the_all_types_record_round_trips_through_the_compiled_code() -> None:
    write, read = compiled(ALL_TYPES)
    data = write(GOOD)
    assert data == public_write(ALL_TYPES, GOOD)
    assert read(data, 0) == public_read(ALL_TYPES, data)


@pytest.mark.parametrize("field, value", [
    ("i", True), ("i", 2.0), ("i", 1 << 31), ("i", -(1 << 31)), ("i", (1 << 31) - 1),
    ("l", 1 << 63), ("l", -(1 << 63)), ("l", (1 << 63) - 1), ("l", "1"), ("d", True),
    ("d", 1 << 2000), ("d", float("nan")), ("d", "0.5"), ("s", b"x"), ("s", 5),
    ("s", "\ud800"), ("y", bytearray(b"x")), ("y", "x"), ("b", 0), ("b", "yes"),
    ("n", 0), ("a", (1, 2)), ("a", [True]), ("a", {"k": 1}), ("m", {1: "v"}),
    ("m", [("k", "v")]), ("r", {"x": None}), ("r", None), ("rs", [None]),
    ("os", ("string", "s")), ("os", ("null", None)), ("os", 5), ("oi", 1 << 31),
    ("oi", True), ("ol", 1 << 63), ("od", True), ("od", 3), ("ob", 1), ("oy", bytearray(b"z")),
    ("om", {"a": True}), ("om", {"a": 1 << 31}), ("om", {}), ("oa", ("p",)), ("oa", [5]),
])
def test_odd_values_give_exactly_what_fastavro_gives(field: str, value: Any) -> None:
    writer = BodyWriter(ALL_TYPES)
    assert writer._compiled is not None
    body = {**GOOD, field: value}
    assert ours_write(writer, body) == public_write(ALL_TYPES, body)


def test_a_missing_field_takes_its_default_or_fails_as_in_fastavro() -> None:
    writer = BodyWriter(ALL_TYPES)
    for name in GOOD:
        body = {k: v for k, v in GOOD.items() if k != name}
        assert ours_write(writer, body) == public_write(ALL_TYPES, body), name


def test_the_writer_refuses_what_it_does_not_know_rather_than_guess() -> None:
    write, _ = compiled(ALL_TYPES)
    for odd in ({**GOOD, "i": True}, {**GOOD, "os": ("string", "s")}, [GOOD]):
        with pytest.raises(Unfit):
            write(odd)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_bytes_read_exactly_as_fastavro_reads_them(data: st.DataObject) -> None:
    good = public_write(ALL_TYPES, GOOD)
    assert isinstance(good, bytes)
    damaged = bytearray(good)
    for _ in range(data.draw(st.integers(1, 4))):
        how = data.draw(st.sampled_from(["set", "cut", "insert"]))
        at = data.draw(st.integers(0, len(damaged)))
        if how == "set" and at < len(damaged):
            damaged[at] = data.draw(st.integers(0, 255))
        elif how == "cut":
            del damaged[at:]
        else:
            damaged[at:at] = bytes(data.draw(st.lists(st.integers(0, 255), max_size=3)))
    raw = bytes(damaged)
    assert ours_read(BodyReader(ALL_TYPES), raw) == public_read(ALL_TYPES, raw)


@settings(max_examples=200, deadline=None)
@given(st.integers(-(1 << 70), 1 << 70), st.integers(1, 11))
def test_long_varints_read_as_fastavro_reads_them(n: int, width: int) -> None:
    schema = {"type": "record", "name": "L", "fields": [{"name": "l", "type": "long"}]}
    raw = public_write(schema, {"l": n})
    if not isinstance(raw, bytes):  # past 64 bits: also an overlong encoding of 0
        raw = b"\x80" * (width - 1) + b"\x00"
    assert ours_read(BodyReader(schema), raw) == public_read(schema, raw)


def test_the_codec_reads_a_memoryview_and_reports_a_short_record() -> None:
    codec = default_codec()
    body = {"job_id": "j", "at": 1, "changes": [], "more": []}
    data = codec.encode("TaskStateChanged", body)
    assert codec.decode(memoryview(data)) == ("TaskStateChanged", body)
    with pytest.raises(DecodeError, match="corrupt body"):
        codec.decode(data[:-2])
    with pytest.raises(DecodeError, match="1 trailing bytes"):
        codec.decode(data + b"\x00")


SMALL = {"type": "record", "name": "S", "fields": [
    {"name": "s", "type": "string"}, {"name": "l", "type": "long"},
    {"name": "a", "type": {"type": "array", "items": "int"}},
    {"name": "o", "type": ["null", "boolean"]}]}


@pytest.mark.parametrize("raw", [
    b"\x00\x02\x00\x00", b"\x01\x02\x00\x00", b"\x01\x00\x00", b"\x01\x00\x00\x00",
    b"\x03abc\x02\x00\x00", b"\x04ab\x02\x00\x00",
    b"\x00\x02\x01\x04\x02\x00\x00", b"\x00\x02\x03\x02\x02\x04\x00\x00",
    b"\x00\x02\x00\x04", b"\x00\x02\x00\x02\x02", b"\x00\x02\x00\x02\x01", b"\x00\x02\x00\x01",
    b"\x00\x80\x00\x00\x00", b"\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00\x00",
])
def test_odd_encodings_read_exactly_as_fastavro_reads_them(raw: bytes) -> None:
    """Negative string lengths and block counts, union indexes and boolean bytes out of
    range, overlong and oversized varints."""
    assert ours_read(BodyReader(SMALL), raw) == public_read(SMALL, raw)
