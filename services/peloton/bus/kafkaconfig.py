"""Kafka client settings from the environment, in one place, for every client we make.

`from_env(env)` reads the settings once into a `KafkaClientConfig` (and rejects a bad
combination with `KafkaConfigError`, naming the variable); pure mapping functions turn it
into the keyword arguments of each client library:

- `faust_settings`: the Faust app (`broker_session_timeout`, heartbeat, rebalance timeout,
  `broker_credentials`);
- `aiokafka_settings`: any aiokafka producer, consumer or admin client (security only);
  `group_settings` adds the group timeouts for a consumer that joins a group;
- `confluent_settings`: a confluent-kafka (librdkafka) config dict, for external tools.

The TLS context is the only I/O (it loads the CA/cert/key files): `ssl_context(config)`
builds it, and the mapping functions take it as an argument. `client_settings()` is the
shortcut the shells use: the environment's aiokafka settings, context included.

Environment (all optional):

- PELOTON_KAFKA_SESSION_TIMEOUT_S: the consumer group session timeout. Default 10 s
  against Apache Kafka (PELOTON_BROKER_KIND=kafka; stock brokers accept 6 s
  `group.min.session.timeout.ms` to 30 min), 2 s against the dev broker (fast restarts).
  Heartbeat interval = session / 4, rebalance timeout = 2 x session.
- PELOTON_KAFKA_SECURITY_PROTOCOL: PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL.
- PELOTON_KAFKA_SASL_MECHANISM: SCRAM-SHA-512 (default), SCRAM-SHA-256, PLAIN.
- PELOTON_KAFKA_SASL_USERNAME, and PELOTON_KAFKA_SASL_PASSWORD_FILE (wins; trailing
  newlines stripped) or PELOTON_KAFKA_SASL_PASSWORD: required with SASL_*.
- PELOTON_KAFKA_SSL_CA_FILE: the CA bundle (PEM) of the brokers' certificates; default:
  the system's CAs.
- PELOTON_KAFKA_SSL_CERT_FILE and PELOTON_KAFKA_SSL_KEY_FILE: client certificate and key
  (PEM) for mutual TLS; both or neither.

The TLS files and the password are only meaningful with a protocol that uses them; setting
one without it is an error (a forgotten protocol would otherwise connect in plaintext,
silently ignoring the credentials).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from peloton.bus.devbroker import is_dev_broker

__all__ = ["KafkaClientConfig", "KafkaConfigError", "from_env", "faust_settings",
           "aiokafka_settings", "group_settings", "confluent_settings", "ssl_context",
           "client_settings", "PROTOCOLS", "MECHANISMS", "DEV_SESSION_TIMEOUT_S",
           "KAFKA_SESSION_TIMEOUT_S"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
DEV_SESSION_TIMEOUT_S = 2.0     # the dev broker: a group join takes about half of it
KAFKA_SESSION_TIMEOUT_S = 10.0  # Apache Kafka: stock bounds are 6 s .. 30 min

_P = "PELOTON_KAFKA_"


class KafkaConfigError(ValueError):
    """A Kafka client setting in the environment is invalid (the message names it)."""


@dataclass(frozen=True, slots=True)
class KafkaClientConfig:
    session_timeout_s: float = KAFKA_SESSION_TIMEOUT_S
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "SCRAM-SHA-512"
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_ca_file: str | None = None
    ssl_cert_file: str | None = None
    ssl_key_file: str | None = None

    @property
    def heartbeat_interval_s(self) -> float:
        return self.session_timeout_s / 4

    @property
    def rebalance_timeout_s(self) -> float:
        return self.session_timeout_s * 2

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")


def _read_text(path: str) -> str:
    return Path(path).read_text()


def from_env(env: Mapping[str, str] | None = None,
             read_text: Callable[[str], str] = _read_text,
             dev_broker: bool | None = None) -> KafkaClientConfig:
    """The settings in `env` (default: os.environ). `read_text` reads the password file;
    `dev_broker` defaults to `is_dev_broker()` (it picks the session timeout default)."""
    env = os.environ if env is None else env

    def get(name: str) -> str | None:
        return env.get(name, "").strip() or None

    dev = is_dev_broker() if dev_broker is None else dev_broker
    raw_timeout = get("PELOTON_KAFKA_SESSION_TIMEOUT_S")
    try:
        timeout = float(raw_timeout) if raw_timeout else (
            DEV_SESSION_TIMEOUT_S if dev else KAFKA_SESSION_TIMEOUT_S)
    except ValueError:
        raise KafkaConfigError(
            f"{_P}SESSION_TIMEOUT_S: not a number: {raw_timeout!r}") from None
    if not 0 < timeout <= 1800:
        raise KafkaConfigError(f"{_P}SESSION_TIMEOUT_S: {timeout} is outside (0, 1800] s")

    protocol = (get("PELOTON_KAFKA_SECURITY_PROTOCOL") or "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise KafkaConfigError(f"{_P}SECURITY_PROTOCOL: {protocol!r} is not one of "
                               f"{', '.join(PROTOCOLS)}")
    mechanism = (get("PELOTON_KAFKA_SASL_MECHANISM") or "SCRAM-SHA-512").upper()
    if mechanism not in MECHANISMS:
        raise KafkaConfigError(f"{_P}SASL_MECHANISM: {mechanism!r} is not one of "
                               f"{', '.join(MECHANISMS)}")
    password_file = get("PELOTON_KAFKA_SASL_PASSWORD_FILE")
    password = (read_text(password_file).rstrip("\r\n") if password_file
                else get("PELOTON_KAFKA_SASL_PASSWORD"))
    config = KafkaClientConfig(
        session_timeout_s=timeout, security_protocol=protocol, sasl_mechanism=mechanism,
        sasl_username=get("PELOTON_KAFKA_SASL_USERNAME"), sasl_password=password,
        ssl_ca_file=get("PELOTON_KAFKA_SSL_CA_FILE"),
        ssl_cert_file=get("PELOTON_KAFKA_SSL_CERT_FILE"),
        ssl_key_file=get("PELOTON_KAFKA_SSL_KEY_FILE"))
    _check(config, password_file)
    return config


def _check(c: KafkaClientConfig, password_file: str | None) -> None:
    if c.uses_sasl:
        if not c.sasl_username:
            raise KafkaConfigError(f"{_P}SASL_USERNAME is required with {c.security_protocol}")
        if not c.sasl_password:
            raise KafkaConfigError(
                f"{_P}SASL_PASSWORD or {_P}SASL_PASSWORD_FILE is required with "
                f"{c.security_protocol}" + (f" ({password_file} is empty)"
                                            if password_file else ""))
    elif c.sasl_username or c.sasl_password:
        raise KafkaConfigError(f"SASL credentials are set but {_P}SECURITY_PROTOCOL is "
                               f"{c.security_protocol} (SASL_SSL or SASL_PLAINTEXT uses them)")
    if not c.uses_ssl and (c.ssl_ca_file or c.ssl_cert_file or c.ssl_key_file):
        raise KafkaConfigError(f"TLS files are set but {_P}SECURITY_PROTOCOL is "
                               f"{c.security_protocol} (SSL or SASL_SSL uses them)")
    if bool(c.ssl_cert_file) != bool(c.ssl_key_file):
        raise KafkaConfigError(f"{_P}SSL_CERT_FILE and {_P}SSL_KEY_FILE go together")


def ssl_context(config: KafkaClientConfig) -> Any:
    """The TLS context of `config` (loads its files), or None without TLS."""
    if not config.uses_ssl:
        return None
    from aiokafka.helpers import create_ssl_context

    return create_ssl_context(cafile=config.ssl_ca_file, certfile=config.ssl_cert_file,
                              keyfile=config.ssl_key_file)


def faust_settings(config: KafkaClientConfig, context: Any = None) -> dict[str, Any]:
    """Faust app settings: group timeouts and, with security, `broker_credentials`."""
    settings: dict[str, Any] = {
        "broker_session_timeout": config.session_timeout_s,
        "broker_heartbeat_interval": config.heartbeat_interval_s,
        "broker_rebalance_timeout": config.rebalance_timeout_s,
    }
    if config.uses_sasl:
        from faust.auth import SASLCredentials

        creds = SASLCredentials(username=config.sasl_username, password=config.sasl_password,
                                mechanism=config.sasl_mechanism,
                                ssl_context=context if config.uses_ssl else None)
        settings["broker_credentials"] = creds
    elif config.uses_ssl:
        from faust.auth import SSLCredentials

        settings["broker_credentials"] = SSLCredentials(context)
    return settings


def aiokafka_settings(config: KafkaClientConfig, context: Any = None) -> dict[str, Any]:
    """Security keyword arguments of an aiokafka client ({} for PLAINTEXT)."""
    if config.security_protocol == "PLAINTEXT":
        return {}
    settings: dict[str, Any] = {"security_protocol": config.security_protocol}
    if config.uses_ssl:
        settings["ssl_context"] = context
    if config.uses_sasl:
        settings |= {"sasl_mechanism": config.sasl_mechanism,
                     "sasl_plain_username": config.sasl_username,
                     "sasl_plain_password": config.sasl_password}
    return settings


def group_settings(config: KafkaClientConfig) -> dict[str, Any]:
    """Group timeouts of an aiokafka consumer that joins a consumer group."""
    return {"session_timeout_ms": round(config.session_timeout_s * 1000),
            "heartbeat_interval_ms": round(config.heartbeat_interval_s * 1000),
            "rebalance_timeout_ms": round(config.rebalance_timeout_s * 1000)}


def confluent_settings(config: KafkaClientConfig) -> dict[str, Any]:
    """A confluent-kafka (librdkafka) config dict: security and group timeouts (a
    producer ignores the group ones, with a warning from librdkafka: drop them there)."""
    settings: dict[str, Any] = {
        "security.protocol": config.security_protocol.lower(),
        "session.timeout.ms": round(config.session_timeout_s * 1000),
        "heartbeat.interval.ms": round(config.heartbeat_interval_s * 1000),
    }
    if config.uses_sasl:
        settings |= {"sasl.mechanism": config.sasl_mechanism,
                     "sasl.username": config.sasl_username,
                     "sasl.password": config.sasl_password}
    if config.uses_ssl:
        files = {"ssl.ca.location": config.ssl_ca_file,
                 "ssl.certificate.location": config.ssl_cert_file,
                 "ssl.key.location": config.ssl_key_file}
        settings |= {k: v for k, v in files.items() if v}
    return settings


def client_settings(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The aiokafka security settings of the environment, TLS context loaded."""
    config = from_env(env)
    return aiokafka_settings(config, ssl_context(config))
