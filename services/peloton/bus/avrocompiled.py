"""Avro bodies written and read by Python code generated for each schema.

fastavro's compiled writer and reader walk the schema at run time for every value: a
field costs 0.15-0.2 us, a `["null", X]` union 0.85 us (its writer validates the value
against each branch), so a TaskStateChanged change of 12 fields costs about 9.5 us to
write and 9 us to read (measured on this project's machines). The job manager writes
seven of them per task, and every reader reads them. `compile_writer` and
`compile_reader` turn a schema into straight-line Python (one function per named record,
each field's code inline, small integers and repeated strings from tables): a change
writes in about 3 us.

Exact, or not at all. The generated code covers the types our schemas use (null,
boolean, int, long, double, string, bytes, array, map, record, named references, and
unions of null and one other type); a schema with anything else gets no compiled code
(`None`: the caller uses fastavro). The writer accepts only values whose bytes it knows
fastavro would write the same (a field of type int takes `int` within 32 bits, not a
bool; a union branch only what fastavro's validator would pick it for; a list, a dict),
and raises `Unfit` for anything else; the reader raises on anything but the plain
encoding our writers produce (a negative block count, a union index out of range, a
boolean byte other than 0 or 1, a short record). The caller then hands the same body or
bytes to fastavro, which writes or reads it, or raises its own error: a compiled call
never gives another result than fastavro's, only sooner. The suite checks both against
fastavro on generated bodies of every schema (tests/bus/test_bus_avrocompiled.py).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

__all__ = ["Unfit", "compile_writer", "compile_reader"]

Writer = Callable[[Any], bytes]
Reader = Callable[[bytes, int], tuple[Any, int]]

_INT = (-(1 << 31), (1 << 31) - 1)
_LONG = (-(1 << 63), (1 << 63) - 1)
_TABLE = 4096  # integers 0..4095 and -1..-4095 written from tables
_STRINGS = 20_000  # encoded strings remembered (then forgotten at once)


class Unfit(ValueError):
    """A value (or bytes) the compiled code does not take: fastavro decides."""


def _zigzag(n: int) -> bytes:
    if not _LONG[0] <= n <= _LONG[1]:
        raise Unfit("beyond 64 bits")
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_POS = tuple(_zigzag(i) for i in range(_TABLE))
_NEG = tuple(_zigzag(-i) for i in range(_TABLE))


def _long_bytes(n: int) -> bytes:
    if 0 <= n < _TABLE:
        return _POS[n]
    if -_TABLE < n < 0:
        return _NEG[-n]
    return _zigzag(n)


_strings: dict[str, bytes] = {}


def _string_bytes(s: str) -> bytes:
    """A string's length and UTF-8 bytes, remembered (the generated code calls it for a
    str not in `_strings`)."""
    e = s.encode()
    b = _long_bytes(len(e)) + e
    if len(_strings) >= _STRINGS:
        _strings.clear()
    _strings[s] = b
    return b


def _read_long(data: bytes, pos: int) -> tuple[int, int]:
    """A varint of more than one byte from `pos` (the inline code reads the one-byte ones)."""
    n = shift = 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            if n >> 64:
                raise Unfit("varint beyond 64 bits")
            return (n >> 1) ^ -(n & 1), pos
        shift += 7
        if shift > 63:
            raise Unfit("varint beyond 64 bits")


_ONE_BYTE = tuple((b >> 1) ^ -(b & 1) for b in range(128))  # one-byte varints' values
_DOUBLE = struct.Struct("<d")
_PRIMITIVES = ("null", "boolean", "int", "long", "double", "string", "bytes")


class _Unsupported(Exception):
    """The schema uses something the generated code does not cover."""


def _union_branch(schema: list[Any]) -> tuple[int, Any]:
    """(index of null, the other branch) of a union of null and one other type."""
    if len(schema) != 2 or "null" not in schema:
        raise _Unsupported(f"union {schema}")
    null = schema.index("null")
    other = schema[1 - null]
    if isinstance(other, list):
        raise _Unsupported("nested union")
    return null, other


class _Gen:
    """Generated source: one function per named record, the code of every other value
    inline (`emit` dispatches on the type to the subclass's method of that name)."""

    prefix = ""

    def __init__(self, named: dict[str, Any]) -> None:
        self.named = named
        self.functions: dict[str, str] = {}  # record full name -> function name
        self.sources: list[str] = []
        self.consts: dict[str, Any] = {}
        self._n = 0

    def var(self) -> str:
        self._n += 1
        return f"v{self._n}"

    def const(self, value: Any) -> str:
        name = f"C{len(self.consts)}"
        self.consts[name] = value
        return name

    def record_of(self, schema: Any) -> dict[str, Any] | None:
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return None
            if schema not in self.named:
                raise _Unsupported(f"unknown type {schema}")
            schema = self.named[schema]
        if isinstance(schema, dict) and schema.get("type") == "record":
            return schema
        return None

    def function(self, record: dict[str, Any]) -> str:
        """The generated function of a named record (generated at its first use)."""
        name = record["name"]
        full = name if "." in name else f"{record.get('namespace', '')}.{name}"
        fn = self.functions.get(full)
        if fn is None:
            fn = self.functions[full] = f"{self.prefix}_{len(self.functions)}"
            self.sources.append("\n".join(self.record(record, fn)))
        return fn

    def emit(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        """Lines for a value `v` of `schema`, indented by `ind`, appended to `out`."""
        record = self.record_of(schema)
        if record is not None:
            self.call(self.function(record), v, out, ind)
            return
        if isinstance(schema, str):
            kind = schema
        elif isinstance(schema, list):
            kind = "union"
        elif logical := schema.get("logicalType"):
            raise _Unsupported(f"logical type {logical}")
        else:
            kind = str(schema["type"])
        if kind not in _KINDS:
            raise _Unsupported(kind)
        getattr(self, f"k_{kind}")(schema, v, out, ind)

    def call(self, fn: str, v: str, out: list[str], ind: str) -> None:
        raise NotImplementedError

    def record(self, record: dict[str, Any], fn: str) -> list[str]:
        raise NotImplementedError

    def build(self, schema: Any, entry: Callable[[str], str],
              space: dict[str, Any]) -> Callable[..., Any] | None:
        """The entry function (`entry(top record's function)` is its source) compiled with
        the generated functions in `space`; None if the schema is not covered."""
        try:
            record = self.record_of(schema)
            if record is None:
                return None
            top = self.function(record)
        except _Unsupported:
            return None
        self.sources.append(entry(top))
        space = {"Unfit": Unfit, **space, **self.consts}
        label = f"<avro {self.prefix} {record['name']}>"
        exec(compile("\n\n".join(self.sources), label, "exec"), space)
        return space["entry"]  # type: ignore[no-any-return]


_KINDS = (*_PRIMITIVES, "array", "map", "union")


# ---- writing ----------------------------------------------------------------------------

class _WriterGen(_Gen):
    """Lines appending the encoding of local `v` with `a` (`parts.append`)."""

    prefix = "write"

    def call(self, fn: str, v: str, out: list[str], ind: str) -> None:
        out.append(f"{ind}{fn}({v}, a)")

    def k_null(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        out.append(f"{ind}if {v} is not None: raise Unfit({v})")

    def k_boolean(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        out.append(f"{ind}if type({v}) is not bool: raise Unfit({v})")
        out.append(f"{ind}a(TRUE if {v} else B0)")

    def k_int(self, schema: Any, v: str, out: list[str], ind: str, bounds: tuple[int, int]
              = _INT) -> None:
        out.append(f"{ind}if type({v}) is not int or not {bounds[0]} <= {v} <= {bounds[1]}: "
                   f"raise Unfit({v})")
        out.append(f"{ind}a(POS[{v}] if 0 <= {v} < {_TABLE} else long_bytes({v}))")

    def k_long(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        self.k_int(schema, v, out, ind, _LONG)

    def k_double(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        out.append(f"{ind}if type({v}) is not float and type({v}) is not int: "
                   f"raise Unfit({v})")
        out.append(f"{ind}a(pack_double({v}))")

    def k_string(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        out.append(f"{ind}if type({v}) is not str: raise Unfit({v})")
        out.append(f"{ind}a(strings.get({v}) or string_bytes({v}))")

    def k_bytes(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        out.append(f"{ind}if type({v}) is not bytes: raise Unfit({v})")
        out.append(f"{ind}a(long_bytes(len({v}))); a({v})")

    def k_array(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        item = self.var()
        out.append(f"{ind}if type({v}) is not list: raise Unfit({v})")
        out.append(f"{ind}if {v}:")
        out.append(f"{ind}    a(long_bytes(len({v})))")
        out.append(f"{ind}    for {item} in {v}:")
        self.emit(schema["items"], item, out, ind + "        ")
        out.append(f"{ind}a(B0)")

    def k_map(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        key, item = self.var(), self.var()
        out.append(f"{ind}if type({v}) is not dict: raise Unfit({v})")
        out.append(f"{ind}if {v}:")
        out.append(f"{ind}    a(long_bytes(len({v})))")
        out.append(f"{ind}    for {key}, {item} in {v}.items():")
        self.emit("string", key, out, ind + "        ")
        self.emit(schema["values"], item, out, ind + "        ")
        out.append(f"{ind}a(B0)")

    def k_union(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        null, other = _union_branch(schema)
        if self.record_of(other) is not None:
            raise _Unsupported("a record in a union")
        out.append(f"{ind}if {v} is None:")
        out.append(f"{ind}    a({'B0' if null == 0 else 'B1'})")
        out.append(f"{ind}else:")
        out.append(f"{ind}    a({'B1' if null == 0 else 'B0'})")
        self.emit(other, v, out, ind + "    ")

    def record(self, record: dict[str, Any], fn: str) -> list[str]:
        lines = [f"def {fn}(d, a):", "    if type(d) is not dict: raise Unfit(d)"]
        for field in record["fields"]:
            v = self.var()
            name = field["name"]
            if "default" in field:
                lines.append(f"    {v} = d.get({name!r}, {self.const(field['default'])})")
            else:
                lines.append(f"    {v} = d[{name!r}]")
            self.emit(field["type"], v, lines, "    ")
        return lines


def compile_writer(schema: Any, named: dict[str, Any], header: bytes = b"") -> Writer | None:
    """`body -> header + its bytes` for a record schema parsed by fastavro (`named`: its
    named types), or None if the schema uses something not covered (module doc)."""
    return _WriterGen(named).build(
        schema, lambda top: (f"def entry(d):\n    parts = [HEADER]\n    {top}(d, parts.append)"
                             f"\n    return b''.join(parts)"),
        {"POS": _POS, "long_bytes": _long_bytes, "B0": b"\x00", "B1": b"\x02",
         "TRUE": b"\x01", "pack_double": _DOUBLE.pack, "strings": _strings,
         "string_bytes": _string_bytes, "HEADER": header})


# ---- reading ----------------------------------------------------------------------------

class _ReaderGen(_Gen):
    """Lines setting local `v` to the value at `pos` of `data` (advancing `pos`)."""

    prefix = "read"

    def call(self, fn: str, v: str, out: list[str], ind: str) -> None:
        out.append(f"{ind}{v}, pos = {fn}(data, pos)")

    def k_null(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        out.append(f"{ind}{v} = None")

    def k_boolean(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        out.append(f"{ind}b = data[pos]; pos += 1")
        out.append(f"{ind}if b > 1: raise Unfit(b)")
        out.append(f"{ind}{v} = b == 1")

    def k_int(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        out.append(f"{ind}b = data[pos]; pos += 1")
        out.append(f"{ind}if b < 128: {v} = ONE_BYTE[b]")
        out.append(f"{ind}else: {v}, pos = read_long(data, pos - 1)")

    k_long = k_int

    def k_double(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        out.append(f"{ind}{v}, = unpack_double(data, pos); pos += 8")

    def k_string(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        n = self.var()  # a short record: the end is past the data (the entry checks)
        self.k_int("long", n, out, ind)
        out.append(f"{ind}if {n} < 0: raise Unfit({n})")
        value = f"str(data[pos:pos + {n}], 'utf-8')" if schema == "string" else \
            f"data[pos:pos + {n}]"
        out.append(f"{ind}{v} = {value}; pos += {n}")

    k_bytes = k_string

    def k_array(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        self._blocks(schema["items"], None, v, "[]", out, ind)

    def k_map(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        self._blocks(schema["values"], "string", v, "{}", out, ind)

    def _blocks(self, items: Any, keys: str | None, v: str, empty: str, out: list[str],
                ind: str) -> None:
        n, item = self.var(), self.var()
        out.append(f"{ind}{v} = {empty}")
        self.k_int("long", n, out, ind)
        out.append(f"{ind}while {n}:")
        out.append(f"{ind}    if {n} < 0: raise Unfit({n})")
        out.append(f"{ind}    for _ in range({n}):")
        inner = ind + "        "
        if keys is None:
            self.emit(items, item, out, inner)
            out.append(f"{inner}{v}.append({item})")
        else:
            key = self.var()
            self.emit(keys, key, out, inner)
            self.emit(items, item, out, inner)
            out.append(f"{inner}{v}[{key}] = {item}")
        self.k_int("long", n, out, ind + "    ")

    def k_union(self, schema: Any, v: str, out: list[str], ind: str) -> None:
        null, other = _union_branch(schema)  # index 0 is the byte 0, 1 is 2
        out.append(f"{ind}b = data[pos]; pos += 1")
        out.append(f"{ind}if b == {2 * null}: {v} = None")
        out.append(f"{ind}elif b == {2 * (1 - null)}:")
        self.emit(other, v, out, ind + "    ")
        out.append(f"{ind}else: raise Unfit(b)")

    def record(self, record: dict[str, Any], fn: str) -> list[str]:
        lines = [f"def {fn}(data, pos):"]
        names = []
        for field in record["fields"]:
            v = self.var()
            names.append((field["name"], v))
            self.emit(field["type"], v, lines, "    ")
        items = ", ".join(f"{name!r}: {v}" for name, v in names)
        lines.append(f"    return {{{items}}}, pos")
        return lines


def compile_reader(schema: Any, named: dict[str, Any]) -> Reader | None:
    """`(data, pos) -> (body, end)` reading a body of a record schema parsed by fastavro
    (as written: no schema resolution), or None if not covered (module doc)."""
    return _ReaderGen(named).build(
        schema, lambda top: (f"def entry(data, pos):\n    body, pos = {top}(data, pos)\n"
                             f"    if pos > len(data): raise Unfit(pos)\n    return body, pos"),
        {"read_long": _read_long, "ONE_BYTE": _ONE_BYTE, "unpack_double": _DOUBLE.unpack_from})
