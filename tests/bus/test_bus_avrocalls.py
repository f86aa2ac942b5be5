"""Prepared Avro calls (peloton.bus.avrocalls) give exactly what fastavro's public calls
give: the same bytes when writing, the same values when reading (same schema, and an old
version resolved to the newest), on sample and generated bodies of every schema version;
the public fallback gives the same; bad bodies fail as the public writer fails."""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import fastavro
import pytest
from bus_samples import SCHEMA_DIR, load, sample
from fastavro.utils import generate_many

from peloton.bus.avrocalls import BodyReader, BodyWriter, prepared_calls_work

SCHEMA_FILES = sorted(SCHEMA_DIR.glob("*.avsc"))


def _newest(path: Path) -> Any:
    event = path.name.split(".")[0]
    versions = sorted(int(p.name.split(".")[1][1:]) for p in SCHEMA_DIR.glob(f"{event}.v*.avsc"))
    return load(SCHEMA_DIR / f"{event}.v{versions[-1]}.avsc")


def _bodies(schema: Any, seed: int) -> list[Any]:
    random.seed(seed)  # generate_many draws from the module's generator
    return [sample(schema, True), sample(schema, False), *generate_many(schema, 5)]


def test_the_installed_fastavro_takes_the_prepared_calls() -> None:
    assert prepared_calls_work()


@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "public"])
@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: p.name)
def test_prepared_calls_agree_with_the_public_api(path: Path, prepared: bool) -> None:
    schema, newest = load(path), _newest(path)
    writer = BodyWriter(schema, b"\xc3\x01head", prepared=prepared, compiled=False)
    same = BodyReader(schema, prepared=prepared, compiled=False)
    evolved = BodyReader(schema, None if newest == schema else newest, prepared=prepared,
                         compiled=False)
    for body in _bodies(schema, seed=len(path.name)):
        public = io.BytesIO()
        fastavro.schemaless_writer(public, schema, body)
        data = writer.write(body)
        assert data == b"\xc3\x01head" + public.getvalue()
        for reader, target in ((same, None), (evolved, None if newest == schema else newest)):
            stream = io.BytesIO(data)
            stream.seek(6)
            got = reader.read(stream)
            assert stream.tell() == len(data)
            assert got == fastavro.schemaless_reader(io.BytesIO(public.getvalue()), schema,
                                                     target)


@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "public"])
def test_a_body_that_does_not_fit_fails_as_the_public_writer_does(prepared: bool) -> None:
    schema = load(SCHEMA_DIR / "JobStateChanged.v1.avsc")
    body = sample(schema)
    for bad in ({**body, "at": "soon"}, {k: v for k, v in body.items() if k != "job_id"}):
        with pytest.raises((ValueError, TypeError, KeyError, AttributeError)) as public:
            fastavro.schemaless_writer(io.BytesIO(), schema, bad)
        with pytest.raises(public.type):
            BodyWriter(schema, prepared=prepared, compiled=False).write(bad)
