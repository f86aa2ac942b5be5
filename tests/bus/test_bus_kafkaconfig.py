"""Kafka client settings (peloton.bus.kafkaconfig): the environment mapped onto Faust,
aiokafka and confluent-kafka arguments, and the real client constructors accepting them
(no broker is dialed: constructors validate their arguments)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from faust.auth import SASLCredentials, SSLCredentials
from faust.types.auth import AuthProtocol, SASLMechanism
from hypothesis import given
from hypothesis import strategies as st
from tls_certs import OPENSSL, make_certs

from peloton.bus import kafkaconfig as kc

# Apache Kafka's stock group.min.session.timeout.ms / group.max.session.timeout.ms
KAFKA_MIN_SESSION_S, KAFKA_MAX_SESSION_S = 6.0, 1800.0
SCRAM = {"PELOTON_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
         "PELOTON_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
         "PELOTON_KAFKA_SASL_USERNAME": "peloton",
         "PELOTON_KAFKA_SASL_PASSWORD": "s3cret",
         "PELOTON_KAFKA_SSL_CA_FILE": "/etc/kafka-tls/ca.crt"}


def no_files(path: str) -> str:
    raise AssertionError(f"read {path}")


def cfg(env: dict[str, str], dev: bool = False, **kw: Any) -> kc.KafkaClientConfig:
    return kc.from_env(env, dev_broker=dev, **kw)


# ---- session timeout -------------------------------------------------------------------
def test_default_session_timeout_is_valid_for_apache_kafka_and_fast_on_the_dev_broker(
) -> None:
    prod = cfg({})
    assert KAFKA_MIN_SESSION_S <= prod.session_timeout_s <= KAFKA_MAX_SESSION_S
    assert prod.heartbeat_interval_s < prod.session_timeout_s / 3
    assert cfg({}, dev=True).session_timeout_s == kc.DEV_SESSION_TIMEOUT_S == 2.0
    assert cfg({"PELOTON_KAFKA_SESSION_TIMEOUT_S": "30"}).session_timeout_s == 30.0
    assert cfg({"PELOTON_KAFKA_SESSION_TIMEOUT_S": "7.5"}, dev=True).session_timeout_s == 7.5


def test_default_follows_the_broker_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PELOTON_BROKER_KIND", "kafka")
    assert kc.from_env({}).session_timeout_s == kc.KAFKA_SESSION_TIMEOUT_S
    monkeypatch.delenv("PELOTON_BROKER_KIND")
    assert kc.from_env({}).session_timeout_s == kc.DEV_SESSION_TIMEOUT_S


@pytest.mark.parametrize("raw", ["abc", "0", "-1", "1801"])
def test_bad_session_timeout(raw: str) -> None:
    with pytest.raises(kc.KafkaConfigError, match="PELOTON_KAFKA_SESSION_TIMEOUT_S"):
        cfg({"PELOTON_KAFKA_SESSION_TIMEOUT_S": raw})


@given(st.floats(min_value=0.01, max_value=1800, allow_nan=False))
def test_group_timeouts_are_consistent_in_every_client(session: float) -> None:
    c = cfg({"PELOTON_KAFKA_SESSION_TIMEOUT_S": repr(session)})
    assert c.session_timeout_s == session
    faust = kc.faust_settings(c)
    group = kc.group_settings(c)
    conf = kc.confluent_settings(c)
    assert faust["broker_session_timeout"] == session
    assert faust["broker_heartbeat_interval"] < session / 3 < session
    assert faust["broker_rebalance_timeout"] >= session
    assert group["session_timeout_ms"] == conf["session.timeout.ms"] == round(session * 1000)
    assert group["heartbeat_interval_ms"] == conf["heartbeat.interval.ms"]
    assert group["heartbeat_interval_ms"] <= group["session_timeout_ms"]
    assert group["rebalance_timeout_ms"] >= group["session_timeout_ms"]


# ---- security --------------------------------------------------------------------------
def test_plaintext_adds_nothing() -> None:
    c = cfg({})
    assert c.security_protocol == "PLAINTEXT"
    assert kc.aiokafka_settings(c) == {}
    assert "broker_credentials" not in kc.faust_settings(c)
    assert kc.ssl_context(c) is None
    assert kc.confluent_settings(c)["security.protocol"] == "plaintext"


def test_sasl_ssl_scram_in_every_client() -> None:
    c = cfg(SCRAM, read_text=no_files)
    ctx = object()
    assert kc.aiokafka_settings(c, ctx) == {
        "security_protocol": "SASL_SSL", "ssl_context": ctx,
        "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "peloton",
        "sasl_plain_password": "s3cret"}
    creds = kc.faust_settings(c, ctx)["broker_credentials"]
    assert isinstance(creds, SASLCredentials)
    assert (creds.protocol, creds.mechanism, creds.username, creds.password,
            creds.ssl_context) == (AuthProtocol.SASL_SSL, SASLMechanism.SCRAM_SHA_256,
                                   "peloton", "s3cret", ctx)
    conf = kc.confluent_settings(c)
    assert {k: v for k, v in conf.items() if not k.endswith(".ms")} == {
        "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "peloton", "sasl.password": "s3cret",
        "ssl.ca.location": "/etc/kafka-tls/ca.crt"}


def test_sasl_plaintext_has_no_tls() -> None:
    c = cfg({**{k: v for k, v in SCRAM.items() if "SSL_" not in k},
             "PELOTON_KAFKA_SECURITY_PROTOCOL": "sasl_plaintext"})
    assert c.security_protocol == "SASL_PLAINTEXT" and c.sasl_mechanism == "SCRAM-SHA-256"
    assert "ssl_context" not in kc.aiokafka_settings(c, object())
    creds = kc.faust_settings(c, None)["broker_credentials"]
    assert creds.protocol == AuthProtocol.SASL_PLAINTEXT and creds.ssl_context is None
    assert kc.ssl_context(c) is None


def test_mutual_tls() -> None:
    c = cfg({"PELOTON_KAFKA_SECURITY_PROTOCOL": "SSL",
             "PELOTON_KAFKA_SSL_CERT_FILE": "/t/tls.crt",
             "PELOTON_KAFKA_SSL_KEY_FILE": "/t/tls.key"})
    ctx = object()
    assert kc.aiokafka_settings(c, ctx) == {"security_protocol": "SSL", "ssl_context": ctx}
    creds = kc.faust_settings(c, ctx)["broker_credentials"]
    assert isinstance(creds, SSLCredentials) and creds.context is ctx
    conf = kc.confluent_settings(c)
    assert (conf["security.protocol"], conf["ssl.certificate.location"],
            conf["ssl.key.location"]) == ("ssl", "/t/tls.crt", "/t/tls.key")
    assert "ssl.ca.location" not in conf and "sasl.username" not in conf


def test_password_from_file_wins() -> None:
    files = {"/run/secrets/kafka/password": "from-file\n"}
    c = cfg({**SCRAM, "PELOTON_KAFKA_SASL_PASSWORD_FILE": "/run/secrets/kafka/password"},
            read_text=files.__getitem__)
    assert c.sasl_password == "from-file"
    with pytest.raises(kc.KafkaConfigError, match="is empty"):
        cfg({**SCRAM, "PELOTON_KAFKA_SASL_PASSWORD_FILE": "/p"},
            read_text={"/p": "\n"}.__getitem__)


@pytest.mark.parametrize(("change", "message"), [
    ({"PELOTON_KAFKA_SECURITY_PROTOCOL": "TLS"}, "SECURITY_PROTOCOL: 'TLS' is not one of"),
    ({"PELOTON_KAFKA_SASL_MECHANISM": "GSSAPI"}, "SASL_MECHANISM: 'GSSAPI' is not one of"),
    ({"PELOTON_KAFKA_SASL_USERNAME": ""}, "SASL_USERNAME is required with SASL_SSL"),
    ({"PELOTON_KAFKA_SASL_PASSWORD": ""}, "SASL_PASSWORD or PELOTON_KAFKA_SASL_PASSWORD_FILE"),
    ({"PELOTON_KAFKA_SECURITY_PROTOCOL": "SSL"}, "SASL credentials are set but"),
    ({"PELOTON_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"}, "TLS files are set but"),
    ({"PELOTON_KAFKA_SSL_CERT_FILE": "/c"}, "SSL_CERT_FILE and PELOTON_KAFKA_SSL_KEY_FILE"),
])
def test_bad_security_settings_are_named(change: dict[str, str], message: str) -> None:
    with pytest.raises(kc.KafkaConfigError, match=message):
        cfg({**SCRAM, **change}, read_text=no_files)


# ---- the real clients take the settings --------------------------------------------------
def test_ssl_context_verifies_the_broker() -> None:
    ctx = kc.ssl_context(cfg({"PELOTON_KAFKA_SECURITY_PROTOCOL": "SSL"}))
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    with pytest.raises(OSError):  # the files are really read
        kc.ssl_context(cfg({"PELOTON_KAFKA_SECURITY_PROTOCOL": "SSL",
                            "PELOTON_KAFKA_SSL_CA_FILE": "/nonexistent/ca.crt"}))


async def test_aiokafka_clients_accept_the_settings() -> None:
    c = cfg(SCRAM, read_text=no_files)
    ctx = kc.ssl_context(kc.KafkaClientConfig(security_protocol="SSL"))
    producer = AIOKafkaProducer(bootstrap_servers="127.0.0.1:1",
                                **kc.aiokafka_settings(c, ctx))
    assert producer.client._security_protocol == "SASL_SSL"
    consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1", group_id="g",
                                **kc.aiokafka_settings(c, ctx), **kc.group_settings(c))
    assert consumer._client._sasl_mechanism == "SCRAM-SHA-256"
    await producer.stop()
    await consumer.stop()


@pytest.mark.skipif(OPENSSL is None, reason="needs the openssl command for a test CA")
def test_real_tls_files_load_in_every_client(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    c = cfg({**SCRAM, "PELOTON_KAFKA_SSL_CA_FILE": str(certs.ca),
             "PELOTON_KAFKA_SSL_CERT_FILE": str(certs.client_cert),
             "PELOTON_KAFKA_SSL_KEY_FILE": str(certs.client_key)}, read_text=no_files)
    ctx = kc.ssl_context(c)
    assert ctx.get_ca_certs()[0]["subject"] == ((("commonName", "peloton-test-ca"),),)
    conf = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
            **kc.confluent_settings(c)}
    consumer = confluent_kafka.Consumer(conf)  # raises KafkaException on a bad property
    consumer.close()
    bad = {**conf, "ssl.key.location": str(certs.ca)}  # librdkafka really reads the files
    with pytest.raises(confluent_kafka.KafkaException):
        confluent_kafka.Consumer(bad)


def test_make_app_uses_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from peloton.bus.faustapp import make_app

    monkeypatch.setenv("PELOTON_BROKER_KIND", "kafka")
    monkeypatch.delenv("PELOTON_KAFKA_SESSION_TIMEOUT_S", raising=False)
    for k, v in SCRAM.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("PELOTON_KAFKA_SSL_CA_FILE")  # the system's CAs
    app = make_app("peloton-test-kafkaconfig", "127.0.0.1:1")
    assert KAFKA_MIN_SESSION_S <= app.conf.broker_session_timeout <= KAFKA_MAX_SESSION_S
    creds = app.conf.broker_credentials
    assert isinstance(creds, SASLCredentials)
    assert creds.protocol == AuthProtocol.SASL_SSL
    assert creds.mechanism == SASLMechanism.SCRAM_SHA_256
    assert isinstance(creds.ssl_context, ssl.SSLContext)
