"""Makes the shared event-body helpers (tests/model/event_bodies.py) importable."""

from __future__ import annotations

import sys
from pathlib import Path

_MODEL_TESTS = str(Path(__file__).resolve().parents[1] / "model")
if _MODEL_TESTS not in sys.path:
    sys.path.insert(0, _MODEL_TESTS)


# ---- real dev servers for the shell tests (integration marker) ----------------------
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from peloton.minicluster.servers import free_port, free_ports, start_etcd, start_tansu  # noqa: E402


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[str]:
    """A Tansu broker of this test alone (topics are catalog names, so tests must not
    share one); it starts in about 0.1 s."""
    server = start_tansu(free_port(), tmp_path / "tansu.log")
    try:
        yield server.address
    finally:
        server.stop()


@pytest.fixture(scope="session")
def etcd_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("etcd-bus")
    client_port, peer_port = free_ports(2)
    server = start_etcd(client_port, peer_port, base / "data", base / "etcd.log")
    try:
        yield server.address
    finally:
        server.stop()
