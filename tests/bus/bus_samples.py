"""Sample records generated from Avro schemas (raw JSON), for codec and evolution tests.

`sample(schema, full=True)` walks the schema and builds one valid value: with `full`,
unions take their non-null branch and arrays/maps get two entries; without, unions are
null where they can be and arrays/maps are empty. Values are exactly representable
(floats 2.5 and 0.5) so a round trip compares equal. `project(value, writer, reader)` is
an independent statement of Avro's record resolution for the evolutions we allow (fields
added with a default, fields removed, int/long/float promotions), used as the expectation
when a record written with an old schema is read with a new one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas"

Schema = Any


def load(path: Path) -> Schema:
    return json.loads(path.read_text())


def field_type(schema: Schema, path: str) -> object:
    """The Avro type of a key field path (`pool.path`; `tasks.0.job_id` names a field of
    a list's items); AssertionError naming what is missing."""
    t: object = schema
    for part in path.split("."):
        if part.isdigit():  # a list's item
            assert isinstance(t, dict) and t.get("type") == "array", (path, t)
            t = t["items"]
            continue
        assert isinstance(t, dict), (path, t)
        fields = {f["name"]: f["type"] for f in t["fields"]}
        assert part in fields, f"{schema['name']} has no field {path}"
        t = fields[part]
    return t


def fullname(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


class _Walker:
    def __init__(self, full: bool) -> None:
        self.full = full
        self.names: dict[str, tuple[Schema, str]] = {}

    def value(self, t: Schema, ns: str, hint: str) -> Any:
        if isinstance(t, str):
            if t in PRIMITIVES:
                return self.primitive(t, hint)
            definition, def_ns = self.names[fullname(t, ns)]
            return self.value(definition, def_ns, hint)
        if isinstance(t, list):
            branches = [b for b in t if b != "null"]
            if not self.full and "null" in t:
                return None
            return self.value(branches[0], ns, hint)
        kind = t["type"]
        if kind in PRIMITIVES:
            return self.primitive(kind, hint)
        if kind in ("record", "enum", "fixed"):
            name = fullname(t["name"], t.get("namespace", ns))
            inner_ns = name.rpartition(".")[0]
            self.names[name] = (t, inner_ns)
            if kind == "enum":
                return t["symbols"][-1 if self.full else 0]
            if kind == "fixed":
                return bytes(range(t["size"]))
            return {f["name"]: self.value(f["type"], inner_ns, f["name"]) for f in t["fields"]}
        if kind == "array":
            return [self.value(t["items"], ns, hint) for _ in range(2 if self.full else 0)]
        if kind == "map":
            return {f"{hint}-{i}": self.value(t["values"], ns, hint)
                    for i in range(2 if self.full else 0)}
        raise ValueError(f"unknown schema {t!r}")

    def primitive(self, kind: str, hint: str) -> Any:
        return {
            "null": None, "boolean": self.full, "int": 7 if self.full else -3,
            "long": 1_700_000_000_123 if self.full else 0, "float": 0.5, "double": 2.5,
            "bytes": b"\x00\xc3\x01" if self.full else b"", "string": f"{hint}-é" if self.full
            else "",
        }[kind]


def sample(schema: Schema, full: bool = True) -> Any:
    return _Walker(full).value(schema, "", "v")


def project(value: Any, writer: Schema, reader: Schema) -> Any:
    """What a reader with schema `reader` should see for `value` written with `writer`."""
    return _Projection().run(value, writer, reader, "", "")


class _Projection:
    def __init__(self) -> None:
        self.writer_names: dict[str, Schema] = {}
        self.reader_names: dict[str, Schema] = {}

    @staticmethod
    def _resolve(t: Schema, ns: str, names: dict[str, Schema]) -> tuple[Schema, str]:
        if isinstance(t, dict) and t.get("type") in ("record", "enum", "fixed"):
            name = fullname(t["name"], t.get("namespace", ns))
            names[name] = t
            return t, name.rpartition(".")[0]
        if isinstance(t, str) and t not in PRIMITIVES:
            name = fullname(t, ns)
            return names[name], name.rpartition(".")[0]
        return t, ns

    def run(self, value: Any, writer: Schema, reader: Schema, wns: str, rns: str) -> Any:
        writer, wns = self._resolve(writer, wns, self.writer_names)
        reader, rns = self._resolve(reader, rns, self.reader_names)
        if value is None:
            return None
        if isinstance(writer, list) or isinstance(reader, list):
            w = [b for b in (writer if isinstance(writer, list) else [writer]) if b != "null"]
            r = [b for b in (reader if isinstance(reader, list) else [reader]) if b != "null"]
            return self.run(value, w[0], r[0], wns, rns)
        wkind = writer if isinstance(writer, str) else writer["type"]
        rkind = reader if isinstance(reader, str) else reader["type"]
        if wkind == "record":
            wfields = {f["name"]: f for f in writer["fields"]}
            return {f["name"]: (self.run(value[f["name"]], wfields[f["name"]]["type"],
                                         f["type"], wns, rns)
                                if f["name"] in wfields else f["default"])
                    for f in reader["fields"]}
        if wkind == "array":
            return [self.run(v, writer["items"], reader["items"], wns, rns) for v in value]
        if wkind == "map":
            return {k: self.run(v, writer["values"], reader["values"], wns, rns)
                    for k, v in value.items()}
        if rkind in ("float", "double") and wkind in ("int", "long", "float"):
            return float(value)
        return value
