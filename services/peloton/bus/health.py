"""The health server of a service process: /healthz, /readyz and /metrics over HTTP.

Contract (what Kubernetes probes and Prometheus read):
- `GET /healthz`: 200 `{"service", "alive": true}` while the process is alive and the
  event loop it watches (`Health.watch`) answers within `stall_after_s`; 503 with the
  reason otherwise (a loop stalled by a blocking call, a loop that has stopped). With no
  loop watched (the shell's start-up, however long its replay) it is alive: a long replay
  is not a reason to restart.
- `GET /readyz`: 200 only when alive and every readiness check declared with
  `Health.require` has passed (the shell's: "rebuilt", its snapshot restored and the log
  tail replayed; "consuming", its partitions assigned). Leader and standby are both
  ready; the body says which (`role`) and lists every check:
  `{"service", "ready", "role", "checks": {name: bool}, "alive"}`. 503 with the same body
  when not ready.
- `GET /metrics`: the process's Prometheus registry in the text exposition format 0.0.4
  (query parameters and Accept headers are ignored; the format never changes).
- Anything else: 404; another method on these paths: 405. Bodies are JSON, errors too.

Why a thread with its own aiohttp loop, not Faust's web server nor the service's loop:
the service's first loop (`ServiceShell.prepare`: snapshot and replay) ends before the
Faust worker's loop starts, and the probes must answer through both; a
server on a separate loop can tell a stalled service loop (503 after `stall_after_s`)
from a slow one, and scrapes do not wait behind a long cycle. Faust's web server runs
only inside the worker, serves Faust's own views too, and the agent already uses it for
its log server on another address. aiohttp is Faust's own HTTP dependency.

`HealthServer(health, host, port).start()` binds at once (a taken port raises OSError in
the caller) and returns the bound port (pass 0 for a free one); `stop()` ends it. The
server thread is a daemon: it never keeps the process alive.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

__all__ = ["Health", "HealthServer", "health_server", "METRICS_CONTENT_TYPE"]

log = logging.getLogger(__name__)

#: the classic text format every Prometheus version reads (our names are plain ASCII)
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Health:
    """What /healthz and /readyz say about one process. Thread-safe enough for its use:
    flags are set from the service's loop and read from the server's thread."""

    def __init__(self, service: str, role: Callable[[], str] | None = None,
                 stall_after_s: float = 5.0) -> None:
        self.service = service
        self.role = role or (lambda: "single")
        self.stall_after_s = stall_after_s
        self.checks: dict[str, bool] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def require(self, *names: str) -> None:
        """Declare readiness checks (not passed yet)."""
        for name in names:
            self.checks.setdefault(name, False)

    def passed(self, name: str, ok: bool = True) -> None:
        self.checks[name] = ok

    def watch(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """The event loop /healthz checks (None: none, e.g. during start-up)."""
        self._loop = loop

    async def alive(self) -> tuple[bool, str]:
        """(alive, reason): the watched loop runs a callback within `stall_after_s`."""
        loop = self._loop
        if loop is None:
            return True, "starting"
        if loop.is_closed():
            return False, "event loop closed"
        answered: concurrent.futures.Future[bool] = concurrent.futures.Future()

        def answer() -> None:
            if not answered.done():
                answered.set_result(True)

        try:
            loop.call_soon_threadsafe(answer)
        except RuntimeError:  # closed between the check and the call
            return False, "event loop closed"
        try:
            await asyncio.wait_for(asyncio.wrap_future(answered), self.stall_after_s)
        except TimeoutError:
            return False, f"event loop did not answer within {self.stall_after_s:g}s"
        return True, "ok"

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        alive, why = await self.alive()
        checks = dict(self.checks)
        ready = alive and all(checks.values())
        body = {"service": self.service, "ready": ready, "role": self.role(), "checks": checks,
                "alive": alive}
        if not alive:
            body["reason"] = why
        return ready, body


def _routes(health: Health, registry: CollectorRegistry) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        alive, why = await health.alive()
        body: dict[str, Any] = {"service": health.service, "alive": alive}
        if not alive:
            body["reason"] = why
        return web.json_response(body, status=200 if alive else 503)

    async def readyz(_: web.Request) -> web.Response:
        ready, body = await health.readiness()
        return web.json_response(body, status=200 if ready else 503)

    async def metrics(_: web.Request) -> web.Response:
        data = await asyncio.to_thread(generate_latest, registry)
        return web.Response(body=data, headers={"Content-Type": METRICS_CONTENT_TYPE})

    @web.middleware
    async def json_errors(request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            return await handler(request)  # type: ignore[no-any-return]
        except web.HTTPException as exc:  # 404, 405: JSON like every other error
            return web.json_response({"error": exc.reason, "details": []},
                                     status=exc.status, headers=_allow(exc))

    app = web.Application(middlewares=[json_errors])
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app


def _allow(exc: web.HTTPException) -> dict[str, str]:
    allow = exc.headers.get("Allow")
    return {"Allow": allow} if allow else {}


class HealthServer:
    def __init__(self, health: Health, host: str = "0.0.0.0", port: int = 0,
                 registry: CollectorRegistry = REGISTRY) -> None:
        self.health = health
        self.host = host
        self.port = port
        self.registry = registry
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    def start(self) -> int:
        """Bind, serve in a daemon thread, return the bound port once it answers."""
        sock = socket.create_server((self.host, self.port), reuse_port=False)
        self.port = sock.getsockname()[1]
        started = threading.Event()
        failed: list[BaseException] = []
        self._thread = threading.Thread(target=self._serve, args=(sock, started, failed),
                                        name=f"health-{self.health.service}", daemon=True)
        self._thread.start()
        started.wait()
        if failed:
            raise failed[0]
        log.info("%s: /healthz /readyz /metrics on http://%s:%d", self.health.service,
                 self.host, self.port)
        return self.port

    def _serve(self, sock: socket.socket, started: threading.Event,
               failed: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        runner = web.AppRunner(_routes(self.health, self.registry), access_log=None,
                               handle_signals=False)
        try:
            loop.run_until_complete(runner.setup())
            loop.run_until_complete(web.SockSite(runner, sock).start())
        except BaseException as exc:  # report to start(), which raises it
            failed.append(exc)
            started.set()
            sock.close()
            loop.close()
            return
        started.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(runner.cleanup())
            loop.close()
            self._stopped.set()

    def stop(self, timeout: float = 5.0) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)


def health_server(health: Health, port: int | None, host: str = "0.0.0.0",
                  ) -> HealthServer | None:
    """A started server on `port`, or None when no port is configured."""
    if port is None:
        return None
    server = HealthServer(health, host, port)
    server.start()
    return server
