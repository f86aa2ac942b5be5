"""Read-model fixtures: a real chdb store in a temporary directory.

chdb lets one process open one data directory at a time, so every store is closed at
teardown before the next test opens its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from peloton.readmodel.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"chdb://{tmp_path / 'chdb'}")
    try:
        yield s
    finally:
        s.close()
