"""Leader election against a real etcd: takeover on stop, crash, freeze and lost lease.

Failover times are measured and printed (run with ``-s`` to see them).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import aetcd
import pytest

from peloton.ha.election import LeaderElection, parse_endpoint
from peloton.minicluster.servers import ServerProcess, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

TTL = 2.0
LONG_TTL = 6.0  # long enough that a handover by lease expiry is told apart from a revoke
SERVICES = Path(__file__).resolve().parents[2] / "services"

# A candidate in its own process, so it can be killed -9 or frozen with SIGSTOP.
CANDIDATE_SCRIPT = """
import asyncio, sys
from peloton.ha.election import LeaderElection

async def main() -> None:
    election = LeaderElection(
        sys.argv[1], sys.argv[2], sys.argv[3], ttl=float(sys.argv[4]),
        on_elected=lambda: print("ELECTED", flush=True),
        on_deposed=lambda: print("DEPOSED", flush=True),
    )
    await election.start()
    await asyncio.Event().wait()

asyncio.run(main())
"""


class RemoteCandidate:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, etcd: str, key: str, identity: str, ttl: float = TTL
                    ) -> RemoteCandidate:
        env = {**os.environ, "PYTHONPATH": str(SERVICES)}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CANDIDATE_SCRIPT, etcd, key, identity, str(ttl),
            stdout=asyncio.subprocess.PIPE, env=env,
        )
        return cls(process)

    async def expect(self, line: str, timeout: float) -> None:
        assert self.process.stdout is not None
        async with asyncio.timeout(timeout):
            while True:
                got = (await self.process.stdout.readline()).decode().strip()
                if got == line:
                    return
                assert got, f"candidate exited before printing {line!r}"

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    async def close(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
        await self.process.wait()


@pytest.fixture
def key() -> str:
    return f"/peloton/test/leader/{uuid.uuid4().hex}"


@asynccontextmanager
async def candidate(
    etcd: str,
    key: str,
    identity: str,
    on_elected: Callable[[], None] | None = None,
    on_deposed: Callable[[], None] | None = None,
    ttl: float = TTL,
) -> AsyncIterator[LeaderElection]:
    election = LeaderElection(
        etcd, key, identity, ttl=ttl, on_elected=on_elected, on_deposed=on_deposed
    )
    await election.start()
    try:
        yield election
    finally:
        await election.stop()


async def until(predicate: Callable[[], bool], timeout: float) -> float:
    """Poll ``predicate`` every 10 ms; return the seconds it took, fail after ``timeout``."""
    start = time.monotonic()
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)
    return time.monotonic() - start


async def lease_of(etcd: str, key: str) -> int:
    host, port = parse_endpoint(etcd)
    async with aetcd.Client(host=host, port=port) as client:
        kv = await client.get(key.encode())
    assert kv is not None
    return int(kv.lease)


def test_parse_endpoint() -> None:
    assert parse_endpoint("127.0.0.1:2379") == ("127.0.0.1", 2379)
    assert parse_endpoint("http://localhost:12379/") == ("localhost", 12379)
    assert parse_endpoint("etcd") == ("etcd", 2379)


async def test_one_of_two_candidates_wins(etcd: str, key: str) -> None:
    async with candidate(etcd, key, "a") as a, candidate(etcd, key, "b") as b:
        await until(lambda: a.is_leader() or b.is_leader(), timeout=5)
        winner = "a" if a.is_leader() else "b"
        await until(lambda: a.leader() == b.leader() == winner, timeout=2)
        # Across several keepalive rounds: the same single leader, and both agree on it.
        for _ in range(10):
            assert a.is_leader() != b.is_leader()
            assert a.leader() == b.leader() == winner
            await asyncio.sleep(TTL / 10)


async def test_clean_stop_hands_over_at_once(etcd: str, key: str) -> None:
    """A clean stop revokes the lease: the standby takes over well before a lease of
    LONG_TTL could expire (the bound leaves room for a loaded machine)."""
    deposed: list[str] = []
    a = LeaderElection(etcd, key, "a", ttl=LONG_TTL, on_deposed=lambda: deposed.append("a"))
    await a.start()
    await a.wait_until_leader(timeout=5)
    async with candidate(etcd, key, "b", ttl=LONG_TTL) as b:
        await until(lambda: b.leader() == "a", timeout=5)
        start = time.monotonic()
        await a.stop()
        assert not a.is_leader() and deposed == ["a"]
        await b.wait_until_leader(timeout=LONG_TTL)
        handover = time.monotonic() - start
        print(f"\nclean-stop handover: {handover * 1000:.0f} ms")
        assert handover < LONG_TTL / 2
        await a.stop()  # idempotent


async def test_killed_leader_is_replaced_within_ttl(etcd: str, key: str) -> None:
    crasher = await RemoteCandidate.start(etcd, key, "crasher")
    try:
        await crasher.expect("ELECTED", timeout=10)
        async with candidate(etcd, key, "standby") as standby:
            await until(lambda: standby.leader() == "crasher", timeout=5)
            # Kill mid-way between keepalives (they run at ttl/3), not right after the grant.
            await asyncio.sleep(TTL / 2)
            assert standby.leader() == "crasher" and not standby.is_leader()
            start = time.monotonic()
            crasher.signal(signal.SIGKILL)
            await standby.wait_until_leader(timeout=TTL * 2 + 1)
            takeover = time.monotonic() - start
            print(f"\nkill -9 takeover at ttl {TTL}s: {takeover:.2f} s")
            assert TTL / 2 < takeover < TTL * 2 + 1  # never before the lease could expire
            assert standby.leader() == "standby"
    finally:
        await crasher.close()


async def test_restart_of_a_crashed_leader_takes_its_key_over_at_once(
    etcd: str, key: str
) -> None:
    """kill -9 of a leader and a restart under the same identity on this machine: the new
    process sees that the key's holder is dead and does not wait out the old lease."""
    crashed = await RemoteCandidate.start(etcd, key, "resmgr-1", ttl=LONG_TTL)
    try:
        await crashed.expect("ELECTED", timeout=10)
        old_lease = await lease_of(etcd, key)
        crashed.signal(signal.SIGKILL)
        await crashed.process.wait()
        start = time.monotonic()
        async with candidate(etcd, key, "resmgr-1", ttl=LONG_TTL) as restarted:
            await restarted.wait_until_leader(timeout=LONG_TTL * 2)
            takeover = time.monotonic() - start
            print(f"\nsame-identity restart takeover: {takeover * 1000:.0f} ms")
            assert takeover < LONG_TTL / 2  # a lease expiry would take about LONG_TTL
            assert await lease_of(etcd, key) != old_lease
    finally:
        await crashed.close()


async def test_same_identity_does_not_take_over_from_a_live_holder(
    etcd: str, key: str
) -> None:
    """A holder that is alive (here frozen) keeps its key until its lease expires, even
    against a candidate of the same identity."""
    frozen = await RemoteCandidate.start(etcd, key, "resmgr-1", ttl=LONG_TTL)
    try:
        await frozen.expect("ELECTED", timeout=10)
        frozen.signal(signal.SIGSTOP)
        start = time.monotonic()
        async with candidate(etcd, key, "resmgr-1", ttl=LONG_TTL) as other:
            await asyncio.sleep(LONG_TTL / 2)
            assert not other.is_leader()
            await other.wait_until_leader(timeout=LONG_TTL * 2)
            assert time.monotonic() - start > LONG_TTL / 2
    finally:
        await frozen.close()


async def test_frozen_leader_is_replaced_and_steps_down_when_it_wakes(
    etcd: str, key: str
) -> None:
    frozen = await RemoteCandidate.start(etcd, key, "frozen")
    try:
        await frozen.expect("ELECTED", timeout=10)
        async with candidate(etcd, key, "standby") as standby:
            await until(lambda: standby.leader() == "frozen", timeout=5)
            await asyncio.sleep(TTL / 2)
            start = time.monotonic()
            frozen.signal(signal.SIGSTOP)
            await standby.wait_until_leader(timeout=TTL * 2 + 1)
            print(f"\nSIGSTOP takeover at ttl {TTL}s: {time.monotonic() - start:.2f} s")
            frozen.signal(signal.SIGCONT)
            # The woken leader must notice at once that its lease time is over.
            await frozen.expect("DEPOSED", timeout=1.0)
            await asyncio.sleep(TTL / 2)
            assert standby.is_leader()
    finally:
        await frozen.close()


async def test_leader_whose_lease_is_revoked_steps_down(etcd: str, key: str) -> None:
    events: list[str] = []
    async with candidate(
        etcd, key, "a",
        on_elected=lambda: events.append("elected"),
        on_deposed=lambda: events.append("deposed"),
    ) as a:
        await a.wait_until_leader(timeout=5)
        host, port = parse_endpoint(etcd)
        async with aetcd.Client(host=host, port=port) as client:
            await client.revoke_lease(await lease_of(etcd, key))
        took = await until(lambda: "deposed" in events, timeout=TTL)
        print(f"\nrevoked lease noticed after {took * 1000:.0f} ms")
        # With the key gone the same candidate campaigns again and wins.
        await a.wait_until_leader(timeout=5)
        assert events[:3] == ["elected", "deposed", "elected"]


async def test_leader_steps_down_when_etcd_stops_answering(
    etcd_factory: Callable[..., ServerProcess], key: str
) -> None:
    server = etcd_factory()
    deposed: list[float] = []
    async with candidate(
        server.address, key, "a", on_deposed=lambda: deposed.append(time.monotonic())
    ) as a:
        await a.wait_until_leader(timeout=5)
        frozen_at = time.monotonic()
        os.kill(server.pid, signal.SIGSTOP)  # keepalives now hang unanswered
        try:
            took = await until(lambda: not a.still_leader(), timeout=TTL + 0.5)
            await until(lambda: bool(deposed), timeout=0.5)
            print(f"\nfrozen etcd: leadership dropped after {took:.2f} s, "
                  f"on_deposed after {deposed[0] - frozen_at:.2f} s")
            assert took <= TTL + 0.1
            assert not a.is_leader()
        finally:
            os.kill(server.pid, signal.SIGCONT)
        # The election loop survived the outage and leads again once etcd answers.
        recovered = await until(a.is_leader, timeout=TTL * 4)
        print(f"re-elected {recovered:.2f} s after etcd resumed")


async def test_still_leader_margin_is_bounded_by_the_ttl(etcd: str, key: str) -> None:
    async with candidate(etcd, key, "a") as a:
        await a.wait_until_leader(timeout=5)
        assert a.still_leader()
        assert a.still_leader(margin=TTL / 3)
        assert not a.still_leader(margin=TTL)


async def test_failing_callback_does_not_break_the_election(etcd: str, key: str) -> None:
    def explode() -> None:
        raise RuntimeError("callback bug")

    async with candidate(etcd, key, "a", on_elected=explode) as a:
        await a.wait_until_leader(timeout=5)
        await asyncio.sleep(TTL / 2)
        assert a.is_leader()


async def test_wait_until_leader_times_out_while_another_leads(etcd: str, key: str) -> None:
    async with candidate(etcd, key, "a") as a:
        await a.wait_until_leader(timeout=5)
        async with candidate(etcd, key, "b") as b:
            with pytest.raises(TimeoutError):
                await b.wait_until_leader(timeout=0.3)
            assert b.leader() == "a"


async def test_candidate_survives_etcd_being_down_and_wins_once_it_is_up(
    etcd_factory: Callable[..., ServerProcess], key: str
) -> None:
    port = free_port()
    async with candidate(f"127.0.0.1:{port}", key, "a") as a:
        await asyncio.sleep(1.0)  # several failed rounds, retried with backoff
        assert not a.is_leader() and a.leader() is None
        etcd_factory(client_port=port)
        start = time.monotonic()
        await a.wait_until_leader(timeout=TTL * 3)
        print(f"\nelected {time.monotonic() - start:.2f} s after etcd came up")


async def test_stop_returns_promptly_while_etcd_is_frozen(
    etcd_factory: Callable[..., ServerProcess], key: str
) -> None:
    server = etcd_factory()
    a = LeaderElection(server.address, key, "a", ttl=TTL)
    await a.start()
    await a.wait_until_leader(timeout=5)
    os.kill(server.pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        await a.stop()
        took = time.monotonic() - start
        print(f"\nstop() with frozen etcd took {took:.2f} s")
        assert not a.is_leader()
        assert took < TTL * 2 + 0.5
    finally:
        os.kill(server.pid, signal.SIGCONT)
