"""etcd client TLS (peloton.ha.etcdtls): the environment's settings, and a leader election
over TLS with client certificates against a real etcd that accepts nothing else."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator

import aetcd
import pytest
from tls_certs import OPENSSL, Certs, make_certs

from peloton.ha import etcdtls
from peloton.ha.election import LeaderElection
from peloton.minicluster.servers import etcd_binary, free_ports


def test_plaintext_by_default() -> None:
    assert etcdtls.from_env("etcd:2379", {}) is None
    assert etcdtls.from_env("http://etcd:2379", {"PELOTON_ETCD_CA_FILE": " "}) is None


def test_tls_from_files_or_an_https_endpoint() -> None:
    assert etcdtls.from_env("HTTPS://etcd:2379", {}) == etcdtls.EtcdTls()
    assert etcdtls.from_env("etcd:2379", {"PELOTON_ETCD_CA_FILE": "/t/ca.crt"}) == \
        etcdtls.EtcdTls(ca_file="/t/ca.crt")
    env = {"PELOTON_ETCD_CERT_FILE": "/t/tls.crt", "PELOTON_ETCD_KEY_FILE": "/t/tls.key"}
    assert etcdtls.from_env("etcd:2379", env) == etcdtls.EtcdTls(None, "/t/tls.crt",
                                                                 "/t/tls.key")


@pytest.mark.parametrize("only", ["PELOTON_ETCD_CERT_FILE", "PELOTON_ETCD_KEY_FILE"])
def test_cert_and_key_go_together(only: str) -> None:
    with pytest.raises(etcdtls.EtcdTlsError, match="go together"):
        etcdtls.from_env("etcd:2379", {only: "/t/x"})


def test_election_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PELOTON_ETCD_CERT_FILE", "/t/tls.crt")
    monkeypatch.delenv("PELOTON_ETCD_KEY_FILE", raising=False)
    with pytest.raises(etcdtls.EtcdTlsError):  # a bad setting fails at start-up
        LeaderElection("etcd:2379", "/k", "me")


def test_plain_client_options_are_untouched() -> None:
    client = etcdtls.make_client("127.0.0.1", 2379, None, options={"grpc.x": 1})
    assert client._options == {"grpc.x": 1}


# ---- against a real etcd that requires TLS and client certificates ----------------------
@pytest.fixture(scope="module")
def tls_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Certs]]:
    if OPENSSL is None:
        pytest.skip("needs the openssl command for test certificates")
    base = tmp_path_factory.mktemp("etcd-tls")
    certs = make_certs(base / "certs")
    client_port, peer_port = free_ports(2)
    client_url = f"https://127.0.0.1:{client_port}"
    peer_url = f"http://127.0.0.1:{peer_port}"
    with (base / "etcd.log").open("wb") as log:
        proc = subprocess.Popen(
            [str(etcd_binary()), "--name", "tls", "--data-dir", str(base / "data"),
             "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
             "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
             "--initial-cluster", f"tls={peer_url}",
             "--cert-file", str(certs.server_cert), "--key-file", str(certs.server_key),
             "--trusted-ca-file", str(certs.ca), "--client-cert-auth"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"https://127.0.0.1:{client_port}", certs
    finally:
        proc.terminate()
        proc.wait(10)


async def _put_get(client: aetcd.Client) -> bytes:
    async with asyncio.timeout(10):
        while True:  # etcd may still be starting
            try:
                await client.put(b"/tls-test", b"ok")
                got = await client.get(b"/tls-test")
                assert got is not None
                return bytes(got.value)
            except aetcd.ConnectionFailedError:
                await asyncio.sleep(0.2)


@pytest.mark.integration
@pytest.mark.timeout(60)
async def test_election_over_tls_with_client_certificates(
        tls_etcd: tuple[str, Certs], monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint, certs = tls_etcd
    host, port = endpoint.removeprefix("https://").split(":")
    tls = etcdtls.EtcdTls(str(certs.ca), str(certs.client_cert), str(certs.client_key))
    async with etcdtls.make_client(host, int(port), tls, timeout=2) as client:
        assert await _put_get(client) == b"ok"
    # without the client certificate the server refuses (TLS is really in use)
    no_cert = etcdtls.EtcdTls(str(certs.ca))
    async with etcdtls.make_client(host, int(port), no_cert, timeout=2) as client:
        with pytest.raises(aetcd.ClientError):
            await client.get(b"/tls-test")
    # the election takes its TLS settings from the environment
    monkeypatch.setenv("PELOTON_ETCD_CA_FILE", str(certs.ca))
    monkeypatch.setenv("PELOTON_ETCD_CERT_FILE", str(certs.client_cert))
    monkeypatch.setenv("PELOTON_ETCD_KEY_FILE", str(certs.client_key))
    elected = asyncio.Event()
    election = LeaderElection(endpoint, "/peloton/test/tls", "me", ttl=2.0,
                              on_elected=elected.set)
    await election.start()
    try:
        await asyncio.wait_for(elected.wait(), 15)
        assert election.is_leader()
    finally:
        await election.stop()
