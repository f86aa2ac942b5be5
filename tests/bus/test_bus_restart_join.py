"""Restart fast paths: `peloton.ha.liveness` (is a record's writer certainly dead?) and
`MemberMemory` (a restarted service instance rejoins its consumer group as its dead
predecessor's member, so it gets every partition at once instead of sharing them with a
member that will never consume)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from broker_topics import create_topic

from peloton.bus.devbroker import MemberMemory
from peloton.ha.liveness import certainly_gone, process_token


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_dead_process_on_this_machine_is_certainly_gone() -> None:
    assert certainly_gone({**process_token(), "pid": _dead_pid()})


def test_a_killed_process_not_yet_reaped_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        child.kill()
        stat = Path(f"/proc/{child.pid}/stat")
        deadline = time.monotonic() + 10
        while stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z":  # a zombie now
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert certainly_gone({**process_token(), "pid": child.pid})
    finally:
        child.wait()


def test_live_processes_and_foreign_or_bad_tokens_are_not_gone() -> None:
    assert not certainly_gone(process_token())  # this process
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not certainly_gone({**process_token(), "pid": alive.pid})
    finally:
        alive.kill()
        alive.wait()
    dead = {**process_token(), "pid": _dead_pid()}
    for other in ({"host": "elsewhere"}, {"boot": "another-boot"}, {"pidns": 1}):
        assert not certainly_gone({**dead, **other})
    for bad in (None, "x", {}, {"pid": "nan"}, {k: v for k, v in dead.items() if k != "boot"}):
        assert not certainly_gone(bad)


def test_member_memory_recalls_only_a_dead_holders_member_id(tmp_path: Path) -> None:
    memory = MemberMemory("peloton-jobmgr-1", tmp_path)
    assert memory.recall() is None  # nothing remembered
    memory.remember("member-a")
    assert memory.recall() is None  # its holder (this process) is alive
    data = json.loads(memory.path.read_text())
    data["holder"]["pid"] = _dead_pid()
    memory.path.write_text(json.dumps(data))
    assert memory.recall() == "member-a"
    assert MemberMemory("peloton-jobmgr-2", tmp_path).recall() is None  # another group
    memory.path.write_text("{not json")
    assert memory.recall() is None


MEMBER_SCRIPT = """
import asyncio, sys, time
from aiokafka import AIOKafkaConsumer
from peloton.bus.devbroker import MemberMemory

async def main() -> None:
    MemberMemory.install(sys.argv[2])
    started = time.monotonic()
    consumer = AIOKafkaConsumer("restart-join", bootstrap_servers=sys.argv[1],
                                group_id=sys.argv[2], session_timeout_ms=2000,
                                heartbeat_interval_ms=500, rebalance_timeout_ms=4000,
                                enable_auto_commit=False)
    await consumer.start()
    while True:
        await consumer.getmany(timeout_ms=20)
        parts = sorted(tp.partition for tp in consumer.assignment())
        if len(parts) == 4:
            print(f"ASSIGNED {time.monotonic() - started:.2f}", flush=True)
            break
    await asyncio.Event().wait()

asyncio.run(main())
"""


def _member(broker: str, group: str, state: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PELOTON_STATE_DIR": str(state)}
    return subprocess.Popen([sys.executable, "-c", MEMBER_SCRIPT, broker, group], env=env,
                            stdout=subprocess.PIPE, text=True)


def _assigned_after(member: subprocess.Popen[str], timeout: float) -> float:
    assert member.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = member.stdout.readline()
        if line.startswith("ASSIGNED"):
            return float(line.split()[1])
        assert line, "member exited"
    raise AssertionError("no full assignment")


@pytest.mark.integration
@pytest.mark.timeout(60)
async def test_a_killed_members_restart_gets_every_partition_at_once(
        fresh_broker: str, tmp_path: Path) -> None:
    """Without the memory the dev broker keeps the killed member: the restart would get
    2 of the 4 partitions (or wait out the rebalance timeout for the dead leader)."""
    await create_topic(fresh_broker, "restart-join", 4)
    first = _member(fresh_broker, "peloton-test-1", tmp_path)
    try:
        _assigned_after(first, 20)
    finally:
        first.kill()
        first.wait()
    restarted = _member(fresh_broker, "peloton-test-1", tmp_path)
    try:
        took = _assigned_after(restarted, 20)
        print(f"\nrestarted member has all partitions after {took:.2f} s")
        assert took < 3.0
        kept = json.loads((tmp_path / "peloton-test-1.member.json").read_text())
        assert kept["holder"]["pid"] == restarted.pid  # the id now names the live process
    finally:
        restarted.kill()
        restarted.wait()
