"""Partitioned services on the in-memory runner: N instances of one consumer group.

`add_group(runner, name, members, shards)` adds a service that runs as `members` instances
(`<name>-1` .. `<name>-N`) of one consumer group. Its work is cut into shards, each a
`Shard(node, factory, sharded, index, count)`: a core that reads only partitions p with
p % count == index of the topics in `sharded` (all partitions of its other inputs), with
its own positions, committed offsets and snapshot, as the Kafka shell keeps them per
partition. A shard runs in the instance the group assigns it to; the runner holds it as a
process (`runner.nodes[node]`), so the usual rules hold (ordering, commits every
`commit_interval_ms`, snapshots, `after_replay` at start).

Assignment is sticky round robin: shards of each kind by index over the live instances
sorted by name, and a rebalance moves only the shards whose owner changes:
- `kill_member`: kill -9 of an instance: its shards die with it (uncommitted work is
  delivered again); the group notices after `session_timeout_ms` of simulated time and
  then starts them on the live instances (restore the shard's snapshot, fold the tail,
  `after_replay`, consume from the shard's committed offsets);
- `start_member`: an instance (re)joins: the shards the new assignment gives it are
  handed over at once: the old owner commits its offsets and writes the shard's snapshot
  (a clean revoke), then the shard starts on the new owner;
- `stop_member`: a clean leave: its shards are handed over the same way, at once.
`notes` records each move, as the shell logs it. A group with no live instance keeps its
shards stopped until one starts.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from peloton.bus.service import ServiceCore
from peloton.runner.memory import MemoryRunner

__all__ = ["Shard", "Group", "add_group"]


@dataclass(frozen=True, slots=True)
class Shard:
    node: str  # the runner's process name of this shard
    factory: Callable[[], ServiceCore]
    sharded: tuple[str, ...]
    index: int
    count: int


@dataclass(eq=False)
class Group:
    runner: MemoryRunner
    name: str
    members: list[str]
    shards: list[Shard]
    session_timeout_ms: int
    alive: dict[str, bool] = field(default_factory=dict)
    died_at: dict[str, int] = field(default_factory=dict)  # killed, not yet noticed
    owner: dict[str, str | None] = field(default_factory=dict)  # shard node -> member
    moves: int = 0

    # ---- what tests do -----------------------------------------------------------------
    def kill_member(self, member: str) -> None:
        """kill -9 of one instance: its shards die now; the group notices later."""
        self._check(member)
        if not self.alive[member]:
            return
        self.alive[member] = False
        self.died_at[member] = self.runner.now
        for node, owner in self.owner.items():
            if owner == member:
                self.runner.kill(node)
                self.owner[node] = None
        self.runner.notes.append(f"{self.name}: {member} killed at {self.runner.now}")

    def start_member(self, member: str) -> None:
        """The instance starts and joins: a rebalance at once."""
        self._check(member)
        if self.alive[member]:
            raise ValueError(f"{member} is running")
        self.alive[member] = True
        self.died_at.pop(member, None)
        self._now(self._rebalance(f"{member} joined"))

    def stop_member(self, member: str) -> None:
        """A clean stop: the instance leaves the group and hands its shards over."""
        self._check(member)
        if not self.alive[member]:
            return
        self.alive[member] = False
        self._now(self._rebalance(f"{member} left"))

    def owned(self, member: str) -> list[str]:
        """The shard processes the instance runs now."""
        return sorted(n for n, m in self.owner.items() if m == member)

    # ---- the group's side ----------------------------------------------------------------
    def assignment(self) -> dict[str, str | None]:
        live = sorted(m for m in self.members if self.alive[m] and m not in self.died_at)
        return {s.node: live[s.index % len(live)] if live else None for s in self.shards}

    async def on_step(self) -> None:
        due = [m for m, at in self.died_at.items()
               if self.runner.now - at >= self.session_timeout_ms]
        if due:
            for m in due:
                del self.died_at[m]
            await self._rebalance(f"session of {', '.join(sorted(due))} expired")

    async def _rebalance(self, why: str) -> None:
        runner = self.runner
        target = self.assignment()
        for node, new in target.items():
            old = self.owner.get(node)
            if old == new:
                continue
            if old is not None and runner.nodes[node].alive:  # a clean revoke
                shard = runner.nodes[node]
                shard.committed.update(shard.fetch)
                runner.take_snapshot(node)
                runner.kill(node)
            self.owner[node] = new
            if new is not None:
                await runner.start_async(node)
                self.moves += 1
            runner.notes.append(f"{self.name}: {node} {old or '-'} -> {new or '-'} ({why})")

    def _now(self, rebalance: Coroutine[Any, Any, None]) -> None:
        self.runner.run_now(rebalance)

    def _check(self, member: str) -> None:
        if member not in self.alive:
            raise KeyError(f"{member} is not an instance of {self.name}")


def add_group(runner: MemoryRunner, name: str, members: int, shards: Sequence[Shard],
              session_timeout_ms: int = 3_000) -> Group:
    """Add the group's shards to the runner and start them on `members` instances."""
    if members < 1:
        raise ValueError("a group needs at least one instance")
    group = Group(runner, name, [f"{name}-{i}" for i in range(1, members + 1)],
                  list(shards), session_timeout_ms)
    for shard in group.shards:
        runner.add_service(shard.node, shard.factory, start=False)
        node = runner.nodes[shard.node]
        node.shard = (shard.index, shard.count)
        node.sharded = frozenset(shard.sharded)
    group.alive = {m: True for m in group.members}
    group.owner = {s.node: None for s in group.shards}
    group._now(group._rebalance("started"))
    runner.on_step.append(group.on_step)
    return group
