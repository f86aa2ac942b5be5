"""A dev broker of one test's own for the minicluster tests that need a real one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from peloton.minicluster.servers import free_port, start_tansu


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[str]:
    """A Tansu broker of this test alone (topics are catalog names, so tests must not
    share one): its address."""
    server = start_tansu(free_port(), tmp_path / "tansu.log")
    try:
        yield server.address
    finally:
        server.stop()
