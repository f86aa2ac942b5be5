"""Leader election over etcd: at most one lease-holding leader per key.

Protocol (one candidate):

1. Read the key. If someone holds it, remember the holder and watch the key from its
   ``mod_revision + 1`` until a DELETE (or until ``recheck_interval`` passes, a safety
   net for missed events), then start over.
2. Otherwise grant a lease of ``ceil(ttl)`` seconds and run one transaction:
   ``create_revision(key) == 0  ->  put(key, identity, lease)``, else read the key.
   Losing the race goes back to step 1 with the winner's revision.
3. The winner leads. It refreshes the lease every ``ttl / 3`` and steps down as soon as a
   refresh fails, is answered "lease gone", or a full ``ttl`` passes without a successful
   one. It also watches its own key and steps down if the key is deleted or overwritten.
   After stepping down it revokes the lease (best effort) so a successor need not wait
   for the TTL, then campaigns again.
4. ``stop()`` revokes the lease, so a standby takes over within a watch round trip.
5. A restart of the same candidate after a crash (kill -9) need not wait for its old
   lease to expire: the winner also writes ``<key>/holder`` (under the same lease) with a
   token of its process (:mod:`peloton.ha.liveness`). A candidate that finds the key held
   under its own identity, by a process the token proves dead (same machine, boot and pid
   namespace, pid gone), revokes that lease and campaigns at once. A holder that may be
   alive (another machine, a frozen process) is waited for as in step 1.

Guarantees: :meth:`LeaderElection.is_leader` is computed from the monotonic clock: it
turns false no later than ``ttl`` after the *send time* of the last successful refresh.
Since etcd counts a lease's TTL from when it *receives* the refresh, a leader stops
believing it leads before etcd can hand the key to anyone else (as long as the two clocks
tick at the same rate). That is why leaders must call :meth:`LeaderElection.still_leader`
right before publishing and skip the publish when it answers False.

etcd raises any TTL below its minimum (2 s with default settings) to that minimum; the
local check still uses ``ttl``, which is only more conservative.

Errors from etcd are logged and retried with exponential backoff; the election task
never dies of them. ``identity`` must be unique per candidate process.

TLS to etcd (CA, client certificate) is an option read from the environment: see
:mod:`peloton.ha.etcdtls`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any

import aetcd
import grpc

from peloton.ha.etcdtls import from_env as tls_from_env
from peloton.ha.etcdtls import make_client
from peloton.ha.liveness import certainly_gone, process_token

__all__ = ["LeaderElection", "parse_endpoint"]

log = logging.getLogger(__name__)

Callback = Callable[[], None]

# Everything etcd or the gRPC transport may raise on a failed call. aetcd wraps most RPC
# errors in ClientError; the watch stream can surface raw grpc errors and timeouts.
_ETCD_ERRORS: tuple[type[BaseException], ...] = (
    aetcd.ClientError,
    grpc.RpcError,
    TimeoutError,
    ConnectionError,
)


class _Lease:
    """A lease known only by its id (enough to revoke it)."""

    def __init__(self, lease_id: int) -> None:
        self.id = lease_id


def parse_endpoint(endpoint: str) -> tuple[str, int]:
    """``"host:port"`` or ``"http://host:port"`` -> ``(host, port)`` (port default 2379)."""
    rest = endpoint.split("://", 1)[-1].rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep:
        return rest, 2379
    return host.strip("[]"), int(port)


class LeaderElection:
    """One candidate for leadership of ``key``; see the module docstring for the protocol.

    ``on_elected`` / ``on_deposed`` are plain callables run on the event loop at each
    transition (exceptions they raise are logged, never propagated). ``on_deposed`` also
    runs on :meth:`stop` when leading.
    """

    def __init__(
        self,
        endpoint: str,
        key: str,
        identity: str,
        ttl: float = 2.0,
        *,
        on_elected: Callback | None = None,
        on_deposed: Callback | None = None,
        recheck_interval: float | None = None,
        min_backoff: float = 0.1,
        max_backoff: float | None = None,
        healthy: Callable[[], bool] | None = None,
    ) -> None:
        if ttl <= 0:
            raise ValueError(f"ttl must be positive, got {ttl}")
        if not key or not identity:
            raise ValueError("key and identity must be non-empty")
        self.endpoint = endpoint
        self.key = key
        self.identity = identity
        self.ttl = float(ttl)
        self.on_elected = on_elected
        self.on_deposed = on_deposed
        #: asked before each refresh and each campaign: a candidate whose service is not
        #: healthy (peloton.ha.threaded: its event loop stalled) neither keeps nor takes
        #: the lease
        self.healthy = healthy
        self.recheck_interval = recheck_interval if recheck_interval is not None else 2 * ttl
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff if max_backoff is not None else max(ttl, min_backoff)
        self._host, self._port = parse_endpoint(endpoint)
        self._tls = tls_from_env(endpoint)  # PELOTON_ETCD_CA_FILE etc.: peloton.ha.etcdtls
        self._key = key.encode()
        self._holder_key = self._key.rstrip(b"/") + b"/holder"
        self._value = identity.encode()
        self._lease_seconds = max(1, math.ceil(self.ttl))
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._lease: Any = None
        self._leading = False
        self._valid_until = 0.0
        self._holder: str | None = None
        self._transition = asyncio.Event()

    # ------------------------------------------------------------------ public API

    async def start(self) -> None:
        """Start campaigning in a background task. Returns at once."""
        if self._task is not None:
            raise RuntimeError("election already started")
        # gRPC's default reconnect backoff grows to minutes; cap it well below the TTL so
        # that a candidate notices a recovered etcd within one campaign round.
        reconnect_ms = max(100, int(self.ttl * 250))
        self._client = make_client(
            self._host,
            self._port,
            self._tls,
            timeout=self._lease_seconds,
            options={
                "grpc.initial_reconnect_backoff_ms": 100,
                "grpc.min_reconnect_backoff_ms": 100,
                "grpc.max_reconnect_backoff_ms": reconnect_ms,
            },
        )
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"leader-election:{self.key}:{self.identity}"
        )

    async def stop(self) -> None:
        """Stop campaigning; if leading, step down and revoke the lease. Idempotent."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        client, self._client = self._client, None
        if client is None:
            return
        lease, self._lease = self._lease, None
        if lease is not None:
            await self._revoke_quietly(client, lease)
        with contextlib.suppress(*_ETCD_ERRORS):
            async with asyncio.timeout(self.ttl):
                await client.close()

    def is_leader(self) -> bool:
        """True only while this candidate holds the lease by its own conservative clock."""
        return self._leading and time.monotonic() < self._valid_until

    def still_leader(self, margin: float = 0.0) -> bool:
        """Publish-time check: True if leadership is certain for ``margin`` more seconds.

        Call right before each publish, with ``margin`` an upper bound of how long the
        publish may take; skip the publish when this returns False.
        """
        return self._leading and time.monotonic() + margin < self._valid_until

    def leader(self) -> str | None:
        """Identity of the current holder as last read or watched (None if vacant/unknown)."""
        if self.is_leader():
            return self.identity
        return self._holder

    async def wait_until_leader(self, timeout: float | None = None) -> None:
        """Return once this candidate leads; raise ``TimeoutError`` after ``timeout`` s."""
        async with asyncio.timeout(timeout):
            while not self.is_leader():
                await self._transition.wait()

    # ------------------------------------------------------------------ campaign loop

    async def _run(self) -> None:
        backoff = self.min_backoff
        while True:
            try:
                await self._campaign_once()
                backoff = self.min_backoff
                continue
            except _ETCD_ERRORS as exc:
                log.warning(
                    "election %s (%s): etcd error %r; retrying in %.2fs",
                    self.key, self.identity, exc, backoff,
                )
            except Exception:
                # Last-resort supervisor: a bug in one round must not end candidacy for
                # the life of the process. Leadership is already dropped by _lead.
                log.exception(
                    "election %s (%s): unexpected error; retrying in %.2fs",
                    self.key, self.identity, backoff,
                )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff)

    async def _campaign_once(self) -> None:
        client = self._client
        if self.healthy is not None and not self.healthy():
            await asyncio.sleep(self.min_backoff)  # no campaign for a stalled service
            return
        current = await client.get(self._key)
        if current is not None:
            self._holder = current.value.decode(errors="replace")
            if current.value == self._value and await self._left_by_dead_self(current):
                return
            await self._watch_for_vacancy(current.mod_revision + 1)
            return
        sent = time.monotonic()
        lease = await client.lease(self._lease_seconds)
        self._lease = lease
        answered = False
        try:
            won, responses = await client.transaction(
                compare=[client.transactions.create(self._key) == 0],
                success=[client.transactions.put(self._key, self._value, lease=lease.id),
                         client.transactions.put(self._holder_key,
                                                 json.dumps(process_token()).encode(),
                                                 lease=lease.id)],
                failure=[client.transactions.get(self._key)],
            )
            answered = True
        finally:
            if not answered:
                # The put may have been applied although the answer was lost: revoking
                # deletes our key at once instead of making everyone wait for the TTL.
                self._lease = None
                await self._revoke_quietly(client, lease)
        if not won:
            self._lease = None
            await self._revoke_quietly(client, lease)
            await self._follow_winner(responses)
            return
        put_revision = int(responses[0].response_put.header.revision)
        await self._lead(lease, sent, put_revision)

    async def _left_by_dead_self(self, current: Any) -> bool:
        """`current` holds our identity: if its holder token proves the process that
        wrote it dead (a crashed earlier run of this candidate), revoke its lease and
        return True (campaign again at once); else False."""
        holder = await self._client.get(self._holder_key)
        if holder is None or holder.lease != current.lease:
            return False
        try:
            token = json.loads(holder.value)
        except ValueError:
            return False
        if not certainly_gone(token):
            return False
        log.info("election %s (%s): the previous holder (pid %s) is gone; revoking its "
                 "lease", self.key, self.identity, token.get("pid"))
        await self._revoke_quietly(self._client, _Lease(current.lease))
        return True

    async def _follow_winner(self, responses: list[Any]) -> None:
        kvs = responses[0] if responses else []
        if not kvs:
            return  # the holder vanished between compare and read: campaign again
        _value, kv = kvs[0]
        self._holder = kv.value.decode(errors="replace")
        await self._watch_for_vacancy(kv.mod_revision + 1)

    async def _watch_for_vacancy(self, from_revision: int) -> None:
        """Return when the key is deleted, or after ``recheck_interval`` as a safety net."""
        watch = await self._client.watch(self._key, start_revision=from_revision)
        try:
            async with asyncio.timeout(self.recheck_interval):
                async for event in watch:
                    if event.kind == aetcd.EventKind.DELETE:
                        self._holder = None
                        return
                    self._holder = event.kv.value.decode(errors="replace")
        except TimeoutError:
            return
        finally:
            await self._close_watch(watch)

    # ------------------------------------------------------------------ leading

    async def _lead(self, lease: Any, granted_at: float, put_revision: int) -> None:
        self._valid_until = granted_at + self.ttl
        self._set_leading(True)
        keepalive = asyncio.create_task(self._keep_alive(lease))
        guard = asyncio.create_task(self._guard_key(lease, put_revision + 1))
        reason = "stopped"
        try:
            done, _ = await asyncio.wait({keepalive, guard}, return_when=asyncio.FIRST_COMPLETED)
            reason = next(iter(done)).result()
        finally:
            for task in (keepalive, guard):
                task.cancel()
            await asyncio.gather(keepalive, guard, return_exceptions=True)
            log.info("election %s (%s): stepping down: %s", self.key, self.identity, reason)
            self._set_leading(False)
        # Not reached when cancelled by stop(), which revokes the lease itself.
        self._lease = None
        await self._revoke_quietly(self._client, lease)

    async def _keep_alive(self, lease: Any) -> str:
        """Refresh every ttl/3; return the reason as soon as leadership may be lost."""
        interval = self.ttl / 3
        last_sent = time.monotonic()
        while True:
            await asyncio.sleep(max(0.0, last_sent + interval - time.monotonic()))
            sent = time.monotonic()
            remaining = self._valid_until - sent
            if remaining <= 0:
                return "a full ttl passed without a successful refresh"
            if self.healthy is not None and not self.healthy():
                return "the service stopped making progress (its event loop stalled)"
            try:
                async with asyncio.timeout(remaining):
                    reply = await self._client.refresh_lease(lease.id)
            except TimeoutError:
                return "lease refresh timed out"
            except _ETCD_ERRORS as exc:
                return f"lease refresh failed: {exc!r}"
            if reply is None or reply.TTL <= 0:
                return "lease expired or was revoked"
            self._valid_until = sent + self.ttl
            last_sent = sent

    async def _guard_key(self, lease: Any, from_revision: int) -> str:
        """Return the reason once our key is deleted or overwritten; survive watch errors."""
        backoff = self.min_backoff
        while True:
            try:
                watch = await self._client.watch(self._key, start_revision=from_revision)
                try:
                    async for event in watch:
                        if event.kind == aetcd.EventKind.DELETE:
                            return "leader key deleted"
                        if event.kv.value != self._value or event.kv.lease != lease.id:
                            return "leader key overwritten"
                        from_revision = event.kv.mod_revision + 1
                finally:
                    await self._close_watch(watch)
            except _ETCD_ERRORS as exc:
                log.debug("election %s: guard watch error %r", self.key, exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff)
            try:
                current = await self._client.get(self._key)
            except _ETCD_ERRORS:
                continue
            if current is None:
                return "leader key deleted"
            if current.value != self._value or current.lease != lease.id:
                return "leader key overwritten"
            from_revision = current.mod_revision + 1

    # ------------------------------------------------------------------ helpers

    def _set_leading(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        if leading:
            self._holder = self.identity
        else:
            self._valid_until = 0.0
            if self._holder == self.identity:
                self._holder = None
        transition, self._transition = self._transition, asyncio.Event()
        transition.set()
        callback = self.on_elected if leading else self.on_deposed
        log.info("election %s: %s %s", self.key, self.identity,
                 "elected" if leading else "deposed")
        if callback is not None:
            try:
                callback()
            except Exception:
                # A faulty callback must not break the election state machine.
                log.exception("election %s: callback %r failed", self.key, callback)

    async def _revoke_quietly(self, client: Any, lease: Any) -> None:
        try:
            async with asyncio.timeout(self.ttl):
                await client.revoke_lease(lease.id)
        except _ETCD_ERRORS as exc:
            log.debug("election %s: revoking lease failed: %r", self.key, exc)

    async def _close_watch(self, watch: Any) -> None:
        with contextlib.suppress(*_ETCD_ERRORS):
            async with asyncio.timeout(1.0):
                await watch.cancel()
