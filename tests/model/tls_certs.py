"""Throwaway TLS files for tests: a CA, a server certificate for 127.0.0.1/localhost and a
client certificate, all signed by the CA, made with the `openssl` command (Debian's).
`make_certs(directory)` writes them; tests skip when `OPENSSL` is None."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OPENSSL", "Certs", "make_certs"]

OPENSSL = shutil.which("openssl")


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _run(*args: str, cwd: Path) -> None:
    assert OPENSSL is not None, "openssl is not installed"
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    _run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
         "-out", "ca.crt", "-days", "2", "-subj", "/CN=peloton-test-ca", cwd=directory)
    (directory / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for who, ext in (("server", ["-extfile", "server.ext"]), ("client", [])):
        _run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{who}.key",
             "-out", f"{who}.csr", "-subj", f"/CN=peloton-test-{who}", cwd=directory)
        _run("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{who}.crt", "-days", "2", *ext, cwd=directory)
    return Certs(*(directory / n for n in ("ca.crt", "server.crt", "server.key",
                                           "client.crt", "client.key")))
