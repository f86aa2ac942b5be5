"""The agent's shell: an agent core (one host, or a fleet of simulated hosts) over the bus,
reading only what is routed to its hosts.

The same contract as every service (`peloton.bus.driver.CoreDriver`: decide, publish, then
commit; the core's `discard_unpublished` undoes a call whose events did not reach the
log), but not the Faust worker of `peloton.bus.service`: an agent needs no consumer group
(it owns no partitions, it is assigned those of its hosts) and no replay. So:
1. create missing catalog topics; start a `HostRoutedConsumer` (`peloton.bus.hostrouted`)
   on the core's inputs (task-launch-requested, task-kill-requested) and on
   host-registered (its hosts' HostRegistered records only: how an agent learns that
   another agent registered one of its hosts after it, `peloton.agent.app`), positioned at
   their log ends;
2. only then publish the registrations (`after_replay`), so every launch for these
   incarnations lies after the read position;
3. live: fetched records of its hosts go to the driver in batches; the core ticks every
   `core.tick_interval` seconds.
Health (/healthz, /readyz, /metrics: `peloton.bus.health`) with a `health_port`; ready
("rebuilt" and "consuming") once the registrations are published, when PELOTON_READY_FILE
(the minicluster's) is written too. A `web_port` serves the task logs of a core with
`read_log` at /logs/{run_id}/{stream}?tail=N. SIGTERM or SIGINT stops it cleanly.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Collection
from pathlib import Path
from typing import Any

from peloton.bus import eventloop, gcpolicy
from peloton.bus.catalog import topic
from peloton.bus.codec import Codec, default_codec
from peloton.bus.driver import CoreDriver, Record
from peloton.bus.faustapp import ensure_topics
from peloton.bus.health import Health, health_server
from peloton.bus.hostrouted import HostRoute, HostRoutedConsumer

__all__ = ["AgentShell", "REGISTRATIONS"]

log = logging.getLogger(__name__)

REGISTRATIONS = "host-registered"
"""The topic where an agent watches its hosts' registrations (HostRegistered only)."""


class AgentShell:
    def __init__(self, name: str, core: Any, bootstrap: str, hosts: Collection[str],
                 codec: Codec | None = None, health_port: int | None = None,
                 health_bind: str = "0.0.0.0", web_port: int | None = None,
                 web_bind: str = "127.0.0.1", batch_max: int = 500) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.codec = codec or default_codec()
        self.health_port, self.health_bind = health_port, health_bind
        self.web_port, self.web_bind = web_port, web_bind
        self.driver = CoreDriver(name, core, bootstrap, self.codec, snapshots=False)
        self.route = HostRoute(frozenset(hosts), {REGISTRATIONS: ("HostRegistered",)})
        topics = (*core.inputs, REGISTRATIONS)
        self.expected: dict[str, Collection[str]] = {t: topic(t).events for t in core.inputs}
        self.expected[REGISTRATIONS] = ("HostRegistered",)
        self.consumer = HostRoutedConsumer(bootstrap, topics, self.route, self.codec,
                                           self._records, max_records=batch_max)
        self.health = Health(name)
        self.health.require("rebuilt", "consuming")
        self.started = asyncio.Event()  # made here; used in the loop of `serve`
        self.gc_policy: gcpolicy.GcPolicy | None = None  # `run` sets it (a process's own)

    @property
    def core(self) -> Any:
        return self.driver.core

    async def _records(self, records: list[Record]) -> None:
        await self.driver.on_records(records, self.expected)

    async def start(self) -> None:
        """Topics, routed consumer at the log ends, then the registrations (module doc)."""
        await ensure_topics(self.bootstrap)
        await self.consumer.start()
        await self.driver.rebuild()  # no replay: the backlog is the registrations
        await self.driver.start_live()
        self.health.passed("rebuilt")
        self.health.passed("consuming")
        marker = os.environ.get("PELOTON_READY_FILE")
        if marker:
            Path(marker).parent.mkdir(parents=True, exist_ok=True)
            Path(marker).write_text(str(os.getpid()))
        log.info("%s: registered %d host(s), consuming", self.name, len(self.route.hosts))

    async def _ticks(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            await self.driver.tick()

    async def serve(self, stop: asyncio.Event | None = None) -> None:
        """Start, then consume and tick until `stop` is set (or SIGTERM/SIGINT when no
        event is given); always stops the consumer and the producer."""
        loop = asyncio.get_running_loop()
        if stop is None:
            stop = asyncio.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
        self.health.watch(loop)
        log.info("%s", eventloop.running_on(self.name, loop))
        web = None
        tasks: list[asyncio.Task[Any]] = []
        try:
            if self.web_port is not None and callable(getattr(self.core, "read_log", None)):
                web = await _log_server(self.core, self.web_bind, self.web_port)
            await self.start()
            self.started.set()
            # every task runs until cancelled: the first to end (an error) ends the shell
            tasks = [asyncio.ensure_future(self.consumer.run())]
            if self.core.tick_interval:  # a core without ticks has no task for them
                tasks.append(asyncio.ensure_future(self._ticks(self.core.tick_interval)))
            if self.gc_policy is not None:  # its first step after the start: a quiet moment
                tasks.append(asyncio.ensure_future(gcpolicy.keep(self.gc_policy)))
            waiter = asyncio.ensure_future(stop.wait())
            done, _ = await asyncio.wait([*tasks, waiter], return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            for task in done:
                if task is not waiter and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        finally:
            self.health.passed("consuming", False)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.consumer.stop()
            await self.driver.stop()
            if web is not None:
                await web.cleanup()

    def run(self) -> None:
        """Blocking: health server (if a port is set), then `serve` until a signal, on
        uvloop where installed (`peloton.bus.eventloop`), with the services' garbage
        collection (`peloton.bus.gcpolicy`)."""
        eventloop.install()
        self.gc_policy = gcpolicy.configure()
        server = health_server(self.health, self.health_port, self.health_bind)
        try:
            asyncio.run(self.serve())
        finally:
            if server is not None:
                server.stop()


async def _log_server(core: Any, bind: str, port: int) -> Any:
    """Serve `core.read_log` at /logs/{rid}/{stream}?tail=N (404 with the error)."""
    from aiohttp import web

    from peloton.agent.errors import AgentError

    async def logs(request: web.Request) -> web.StreamResponse:
        tail = request.query.get("tail")
        try:
            data = core.read_log(request.match_info["rid"], request.match_info["stream"],
                                 int(tail) if tail else None)
        except (AgentError, OSError, ValueError) as exc:
            return web.json_response({"error": str(exc)}, status=404)
        return web.Response(body=data, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/logs/{rid}/{stream}", logs)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, bind, port).start()
    return runner
