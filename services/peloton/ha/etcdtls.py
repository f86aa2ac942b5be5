"""etcd client TLS as an option: the settings from the environment, and a client that uses
them.

`from_env(endpoint, env)` reads:

- PELOTON_ETCD_CA_FILE: the CA bundle (PEM) of etcd's server certificate;
- PELOTON_ETCD_CERT_FILE and PELOTON_ETCD_KEY_FILE: a client certificate and key (PEM),
  for etcd's `--client-cert-auth`; both or neither.

TLS is on when any of them is set or the endpoint says `https://` (the system's CAs then
verify the server); otherwise the client dials plaintext, as before. A file set without
TLS cannot happen (a file turns it on); cert without key is an `EtcdTlsError`.

`make_client(host, port, tls, **kwargs)` returns an `aetcd.Client` that dials TLS when
`tls` is given. aetcd 1.0 opens only plaintext channels (`rpc.insecure_channel`), so the
TLS credentials travel to the channel factory as a private channel option: aetcd's `rpc`
module is wrapped once, and the wrapper opens a `secure_channel` for a client whose options
carry them and a plain one for any other (unchanged behaviour). The credentials are built
from the files when the client is made (`grpc.ssl_channel_credentials`).
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aetcd
import aetcd.client
import grpc

__all__ = ["EtcdTls", "EtcdTlsError", "from_env", "make_client", "TLS_OPTION"]

TLS_OPTION = "peloton.etcd_tls_credentials"  # private: never reaches gRPC


class EtcdTlsError(ValueError):
    """The etcd TLS settings in the environment are invalid."""


@dataclass(frozen=True, slots=True)
class EtcdTls:
    """TLS on; each file None means: the system's CAs / no client certificate."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None


def from_env(endpoint: str, env: Mapping[str, str] | None = None) -> EtcdTls | None:
    """The TLS settings for `endpoint` in `env` (default os.environ); None: plaintext."""
    env = os.environ if env is None else env

    def get(name: str) -> str | None:
        return env.get(name, "").strip() or None

    ca = get("PELOTON_ETCD_CA_FILE")
    cert, key = get("PELOTON_ETCD_CERT_FILE"), get("PELOTON_ETCD_KEY_FILE")
    if bool(cert) != bool(key):
        raise EtcdTlsError("PELOTON_ETCD_CERT_FILE and PELOTON_ETCD_KEY_FILE go together")
    if not (ca or cert or endpoint.strip().lower().startswith("https://")):
        return None
    return EtcdTls(ca, cert, key)


def credentials(tls: EtcdTls,
                read_bytes: Callable[[str], bytes] = lambda p: Path(p).read_bytes(),
                ) -> grpc.ChannelCredentials:
    """gRPC channel credentials of `tls` (reads its files)."""
    def load(path: str | None) -> bytes | None:
        return read_bytes(path) if path else None

    return grpc.ssl_channel_credentials(root_certificates=load(tls.ca_file),
                                        private_key=load(tls.key_file),
                                        certificate_chain=load(tls.cert_file))


def make_client(host: str, port: int, tls: EtcdTls | None, *,
                options: Mapping[str, Any] | None = None, **kwargs: Any) -> aetcd.Client:
    """An aetcd client of host:port, over TLS when `tls` is given."""
    opts = dict(options or {})
    if tls is not None:
        _wrap_aetcd_channels()
        opts[TLS_OPTION] = credentials(tls)
    return aetcd.Client(host=host, port=port, options=opts, **kwargs)


def _channel(target: str, options: Iterable[tuple[str, Any]] = (), **kwargs: Any) -> Any:
    opts = list(options)
    creds = [value for name, value in opts if name == TLS_OPTION]
    rest = [(name, value) for name, value in opts if name != TLS_OPTION]
    if creds:
        return grpc.aio.secure_channel(target, creds[0], options=rest, **kwargs)
    return grpc.aio.insecure_channel(target, options=rest, **kwargs)


def _wrap_aetcd_channels() -> None:
    """Route aetcd's channel creation through `_channel` (idempotent)."""
    rpc = aetcd.client.rpc
    if getattr(rpc, "_peloton_tls", False):
        return
    shim = types.SimpleNamespace(**vars(rpc))
    shim.insecure_channel = _channel
    shim._peloton_tls = True
    aetcd.client.rpc = shim  # type: ignore[assignment]
