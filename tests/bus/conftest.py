"""Real dev servers for the shell tests (integration marker), and the root logger given back
as it was (`root`). The shared event-body
helpers (tests/model/event_bodies.py) are importable through pytest's `pythonpath`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from peloton.minicluster.servers import free_port, free_ports, start_etcd, start_tansu


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


@pytest.fixture
def root() -> Iterator[logging.Logger]:
    """The root logger, given back as it was (pytest's handlers included)."""
    logger = logging.getLogger()
    handlers, level = list(logger.handlers), logger.level
    try:
        yield logger
    finally:
        for h in list(logger.handlers):
            logger.removeHandler(h)
        for h in handlers:
            logger.addHandler(h)
        logger.setLevel(level)
