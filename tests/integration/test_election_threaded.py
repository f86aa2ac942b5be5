"""The election on its own thread (ha/threaded.py) against a real etcd: a leader whose event
loop is busy for longer than the lease TTL keeps the lease (the plain election loses it:
the resource manager under a huge burst was deposed again and again), and a leader whose
loop stalls past `max_stall_s` steps down so a standby takes over."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from test_election import RemoteCandidate, lease_of, until

from peloton.ha.election import LeaderElection
from peloton.ha.threaded import ThreadedElection

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

TTL = 2.0
MAX_STALL_S = 5.0
BUSY_S = 2 * TTL  # longer than the lease, shorter than a stall


async def test_a_busy_leader_keeps_its_lease_and_a_stalled_one_hands_over(etcd: str) -> None:
    key = f"/peloton/test/leader/{uuid.uuid4().hex}"
    plain = LeaderElection(etcd, f"{key}-plain", "plain", ttl=TTL)
    threaded = ThreadedElection(etcd, key, "threaded", ttl=TTL, max_stall_s=MAX_STALL_S)
    await plain.start()
    await threaded.start()
    standby: RemoteCandidate | None = None
    try:
        await until(lambda: plain.is_leader() and threaded.is_leader(), timeout=10)
        standby = await RemoteCandidate.start(etcd, key, "standby", ttl=TTL)
        lease = await lease_of(etcd, key)
        time.sleep(BUSY_S)  # the service's loop decides for longer than the TTL
        assert not plain.still_leader()  # its refresh could not run: deposed
        assert threaded.still_leader()  # its thread refreshed the lease meanwhile
        assert await lease_of(etcd, key) == lease  # the standby never got the key
        await asyncio.sleep(TTL)
        assert threaded.is_leader()

        time.sleep(MAX_STALL_S + 2 * TTL)  # hung, not busy: the thread lets the lease go
        assert not threaded.still_leader()
        await standby.expect("ELECTED", timeout=10)
    finally:
        await plain.stop()
        await threaded.stop()
        if standby is not None:
            await standby.close()
