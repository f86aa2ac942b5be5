"""Schema evolution: a record written with any older version of an event decodes under the
newest version (Avro schema resolution).

The first test covers every event that has several versions in schemas/ (none may have
yet; it then reports itself skipped). The toy-event tests write their own schema dirs, so
the mechanism is tested before any real evolution exists: an added field with a default,
a removed field, a nested record that gained a field, an int widened to long, and an
incompatible change (a field added without a default), which must be a DecodeError.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bus_samples import SCHEMA_DIR, load, project, sample

from peloton.bus.codec import Codec, DecodeError, default_codec


def _versions(schema_dir: Path = SCHEMA_DIR) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for path in schema_dir.glob("*.avsc"):
        name, version = path.name.split(".")[:2]
        found.setdefault(name, []).append(int(version[1:]))
    return {name: sorted(v) for name, v in found.items()}


def _older(schema_dir: Path) -> list[tuple[str, int, int]]:
    return [(name, old, versions[-1]) for name, versions in sorted(_versions(schema_dir).items())
            for old in versions[:-1]]


def check_old_records_decode(codec: Codec, schema_dir: Path, event: str, old: int,
                             new: int) -> None:
    writer = load(schema_dir / f"{event}.v{old}.avsc")
    reader = load(schema_dir / f"{event}.v{new}.avsc")
    for full in (True, False):
        body = sample(writer, full)
        data = codec.encode(event, body, version=old)
        expected = project(body, writer, reader)
        assert data[2:10] != codec.encode(event, expected)[2:10]  # written as the old version
        assert codec.decode(data) == (event, expected)


OLDER = _older(SCHEMA_DIR)


@pytest.mark.parametrize(
    ("event", "old", "new"),
    OLDER or [pytest.param("-", 0, 0, marks=pytest.mark.skip(
        reason="no event has more than one version in schemas/ yet"))],
    ids=[f"{n}.v{o}->v{w}" for n, o, w in OLDER] or ["none"],
)
def test_old_records_decode_under_the_newest_schema(event: str, old: int, new: int) -> None:
    check_old_records_decode(default_codec(), SCHEMA_DIR, event, old, new)


def test_the_check_above_on_a_simulated_next_job_kill_requested(tmp_path: Path) -> None:
    """One more JobKillRequested version (a field added with a default), simulated on a
    copy of schemas/: the generic check works for several hops, whatever is on disk."""
    for path in SCHEMA_DIR.glob("*.avsc"):
        (tmp_path / path.name).write_text(path.read_text())
    versions = _versions(tmp_path)["JobKillRequested"]
    newest = load(tmp_path / f"JobKillRequested.v{versions[-1]}.avsc")
    newest["fields"].append({"name": "simulated_note", "type": "string", "default": "unknown"})
    (tmp_path / f"JobKillRequested.v{versions[-1] + 1}.avsc").write_text(json.dumps(newest))
    codec = Codec(tmp_path)
    older = [row for row in _older(tmp_path) if row[0] == "JobKillRequested"]
    assert [old for _, old, _ in older] == versions
    for event, old, new in older:
        check_old_records_decode(codec, tmp_path, event, old, new)
    _, body = codec.decode(codec.encode("JobKillRequested", {"job_id": "j1", "at": 1},
                                        version=versions[-1]))
    assert body["simulated_note"] == "unknown"


def test_every_version_on_disk_is_loaded() -> None:
    codec = default_codec()
    for name, versions in _versions().items():
        assert codec.versions(name) == versions


# --------------------------------------------------------------------- toy event

TOY_V1 = {
    "type": "record", "name": "ToyHappened", "namespace": "peloton.events",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "count", "type": "int"},
        {"name": "legacy", "type": "string", "doc": "removed in v2"},
        {"name": "where", "type": {"type": "record", "name": "Place", "fields": [
            {"name": "host", "type": "string"}]}},
        {"name": "tags", "type": {"type": "array", "items": "Place"}},
    ],
}
TOY_V2 = {
    "type": "record", "name": "ToyHappened", "namespace": "peloton.events",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "count", "type": "long", "doc": "widened"},
        {"name": "where", "type": {"type": "record", "name": "Place", "fields": [
            {"name": "host", "type": "string"},
            {"name": "zone", "type": "string", "default": "unknown"}]}},
        {"name": "tags", "type": {"type": "array", "items": "Place"}},
        {"name": "reason", "type": "string", "default": ""},
        {"name": "grace_s", "type": ["null", "double"], "default": None},
    ],
}
V1_RECORD = {"id": "t1", "count": 3, "legacy": "old", "where": {"host": "h1"},
             "tags": [{"host": "h2"}]}


def toy_dir(tmp_path: Path, *schemas: dict[str, Any]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    for version, schema in enumerate(schemas, start=1):
        (tmp_path / f"ToyHappened.v{version}.avsc").write_text(json.dumps(schema))
    return tmp_path


def test_a_v1_record_reads_as_v2(tmp_path: Path) -> None:
    v1_only = Codec(toy_dir(tmp_path / "old", TOY_V1))
    old_bytes = v1_only.encode("ToyHappened", V1_RECORD)  # an old producer
    both = Codec(toy_dir(tmp_path / "new", TOY_V1, TOY_V2))
    assert both.versions("ToyHappened") == [1, 2]
    expected = {"id": "t1", "count": 3, "where": {"host": "h1", "zone": "unknown"},
                "tags": [{"host": "h2", "zone": "unknown"}], "reason": "", "grace_s": None}
    assert both.decode(old_bytes) == ("ToyHappened", expected)
    assert project(V1_RECORD, TOY_V1, TOY_V2) == expected  # the helper agrees with Avro
    assert both.encode("ToyHappened", V1_RECORD, version=1) == old_bytes


def test_new_records_are_written_with_the_newest_version(tmp_path: Path) -> None:
    codec = Codec(toy_dir(tmp_path, TOY_V1, TOY_V2))
    body = sample(TOY_V2)
    data = codec.encode("ToyHappened", body)
    assert data[2:10] != codec.encode("ToyHappened", V1_RECORD, version=1)[2:10]
    assert codec.decode(data) == ("ToyHappened", body)
    assert codec.schema("ToyHappened") == codec.schema("ToyHappened", 2)
    with pytest.raises(KeyError):
        codec.schema("ToyHappened", 3)


def test_every_older_version_resolves_to_the_newest(tmp_path: Path) -> None:
    v3 = json.loads(json.dumps(TOY_V2))
    v3["fields"].append({"name": "attempt", "type": "int", "default": 1})
    codec = Codec(toy_dir(tmp_path, TOY_V1, TOY_V2, v3))
    for version, schema in ((1, TOY_V1), (2, TOY_V2)):
        for full in (True, False):
            body = sample(schema, full)
            data = codec.encode("ToyHappened", body, version=version)
            assert codec.decode(data) == ("ToyHappened", project(body, schema, v3))


def test_an_incompatible_evolution_is_a_decode_error(tmp_path: Path) -> None:
    broken = json.loads(json.dumps(TOY_V2))
    broken["fields"].append({"name": "required_now", "type": "string"})  # no default
    codec = Codec(toy_dir(tmp_path, TOY_V1, broken))
    with pytest.raises(DecodeError, match="ToyHappened"):
        codec.decode(codec.encode("ToyHappened", V1_RECORD, version=1))
