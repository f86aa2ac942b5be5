"""Real dev servers for integration tests: one Tansu broker and one etcd per session.

``broker`` / ``etcd`` yield ``"127.0.0.1:PORT"``; ``broker_server`` / ``etcd_server`` yield
the :class:`ServerProcess` handles; ``etcd_factory`` starts extra, test-owned etcd
instances (for tests that freeze or kill the server) and stops them afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from peloton.minicluster.servers import (
    ServerProcess,
    free_port,
    free_ports,
    start_etcd,
    start_tansu,
)


@pytest.fixture(scope="session")
def broker_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("tansu")
    server = start_tansu(free_port(), base / "tansu.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def broker(broker_server: ServerProcess) -> str:
    return broker_server.address


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("etcd")
    client_port, peer_port = free_ports(2)
    server = start_etcd(client_port, peer_port, base / "data", base / "etcd.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def etcd(etcd_server: ServerProcess) -> str:
    return etcd_server.address


EtcdFactory = Callable[..., ServerProcess]


@pytest.fixture
def etcd_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdFactory]:
    started: list[ServerProcess] = []

    def make(client_port: int | None = None) -> ServerProcess:
        base = tmp_path_factory.mktemp("etcd-own")
        ports = free_ports(2)
        client_port, peer_port = client_port or ports[0], ports[1]
        server = start_etcd(client_port, peer_port, base / "data", base / "etcd.log")
        started.append(server)
        return server

    try:
        yield make
    finally:
        for server in started:
            server.stop()
