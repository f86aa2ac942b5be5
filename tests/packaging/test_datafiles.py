"""peloton.datafiles in a source checkout: the repository's schemas/ and examples/, the
PELOTON_SCHEMAS override, and a clear refusal of anything not shipped. (From an installed
wheel and an editable install: test_wheel.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from peloton import datafiles
from peloton.datafiles import SHIPPED, examples_dir, packaged_dir, schemas_dir

REPO = Path(__file__).resolve().parents[2]


def test_a_source_checkout_reads_the_repository_directories(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PELOTON_SCHEMAS", raising=False)
    assert schemas_dir() == REPO / "schemas"
    assert examples_dir() == REPO / "examples"
    assert [packaged_dir(name) for name in SHIPPED] == [REPO / name for name in SHIPPED]


def test_peloton_schemas_overrides_the_schema_directory(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PELOTON_SCHEMAS", str(tmp_path))
    assert schemas_dir() == tmp_path


def test_a_directory_that_is_not_shipped_is_refused() -> None:
    with pytest.raises(ValueError, match="not shipped"):
        packaged_dir("tests")


def test_a_broken_install_names_both_places_it_looked(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    module_dir = tmp_path / "site" / "peloton"
    module_dir.mkdir(parents=True)
    monkeypatch.setattr(datafiles, "_HERE", module_dir)
    with pytest.raises(FileNotFoundError) as err:
        packaged_dir("schemas")
    assert str(module_dir / "_data" / "schemas") in str(err.value)
    assert str(tmp_path / "schemas") in str(err.value)
