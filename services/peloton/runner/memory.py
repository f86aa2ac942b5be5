"""`MemoryRunner`: the real service cores on an in-memory log, under simulated time.

See the package docstring (`peloton.runner`) for the contract and an example.
"""

from __future__ import annotations

import json
import random
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from peloton.agent.app import AgentConfig, AgentCore
from peloton.bus import catalog
from peloton.bus.catalog import DEAD_LETTER, INTERNAL_TOPICS, TOPICS, topic
from peloton.bus.coalesce import coalesce, joiner_for
from peloton.bus.codec import Codec, DecodeError, default_codec
from peloton.bus.deadletter import dead_letter
from peloton.bus.keys import record_target
from peloton.bus.publisher import encode_events
from peloton.bus.routing import partition_for
from peloton.bus.service import ServiceCore
from peloton.model.event import Event
from peloton.model.resources import Resources
from peloton.runner.vclock import VirtualClockLoop, settle
from peloton.runner.watch import Watch

__all__ = ["MemoryRunner", "Record", "Delivery", "HandlerFailed", "partition_for", "record_key"]

TP = tuple[str, int]
CoreFactory = Callable[[], ServiceCore]


class HandlerFailed(RuntimeError):
    """A core raised while handling a record, or a record was dead-lettered (strict mode)."""


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes
    at_ms: int
    producer: str


@dataclass(frozen=True, slots=True)
class Delivery:
    """One record handed to one service (kept when `trace=True`)."""

    at_ms: int
    service: str
    topic: str
    partition: int
    offset: int
    etype: str


def record_key(ev: Event) -> bytes:
    """The record key the shell writes (`peloton.bus.keys.record_target`)."""
    return record_target(ev)[1]


def _snapshot_services() -> frozenset[str]:
    """Services the catalog gives a snapshot topic (none on a catalog without them)."""
    names = {t.name for t in getattr(catalog, "SNAPSHOT_TOPICS", ())}
    return frozenset(n.removesuffix("-snapshots") for n in names)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    state: str  # the core's snapshot() as JSON text, as the shell stores it
    positions: dict[TP, int]
    version: int


@dataclass(eq=False)
class _Node:
    """One service process: its core while it lives, and what outlives it (the consumer
    group's committed offsets, the newest snapshot)."""

    name: str
    factory: CoreFactory
    budget: int
    host: str | None = None  # set for agents
    #: an agent reads only the records of its inputs keyed by its host (`_log`)
    keyed: bytes | None = None
    #: a shard of a partitioned service (`peloton.runner.groups`): (k, n) = it reads
    #: partition p of a topic in `sharded` only if p % n == k (all partitions of others)
    shard: tuple[int, int] | None = None
    sharded: frozenset[str] = frozenset()
    core: Any = None
    inputs: list[TP] = field(default_factory=list)
    own: frozenset[str] = frozenset()  # replay topics only this service writes
    expected: dict[str, frozenset[str]] = field(default_factory=dict)
    positions: dict[TP, int] = field(default_factory=dict)  # the shell's skip map
    fetch: dict[TP, int] = field(default_factory=dict)  # the consumer's next offsets
    committed: dict[TP, int] = field(default_factory=dict)  # survives a kill
    snapshot: _Snapshot | None = None  # survives a kill (the snapshot topic)
    next_tick_ms: int | None = None
    tick_ms: int | None = None
    last_commit_ms: int = 0
    last_snapshot_ms: int = 0
    starts: int = 0
    handled: int = 0
    restored: int = 0  # starts that restored a snapshot

    @property
    def alive(self) -> bool:
        return self.core is not None

    def takes(self, topic_name: str, partition: int) -> bool:
        """Whether this process reads that partition (its inputs and its replay)."""
        if self.shard is None or topic_name not in self.sharded:
            return True
        k, n = self.shard
        return partition % n == k


class MemoryRunner:
    def __init__(
        self, seed: int = 0, *, step_ms: int = 10, start_ms: int = 1_700_000_000_000,
        rate_per_s: int = 2000, batch_max: int = 16, commit_interval_ms: int = 500,
        snapshot_interval_ms: int | None = 10_000, redeliver: float = 0.0,
        strict: bool = True, trace: bool = False, codec: Codec | None = None,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.step_ms = step_ms
        self.rate_per_s = rate_per_s
        self.batch_max = max(1, batch_max)
        self.commit_interval_ms = commit_interval_ms
        self.snapshot_interval_ms = snapshot_interval_ms
        self.redeliver = redeliver
        self.strict = strict
        self.codec = codec or default_codec()
        self._joiner = joiner_for(self.codec)
        self.now = start_ms
        self.logs: dict[TP, list[Record]] = {
            (t.name, p): [] for t in (*TOPICS, *INTERNAL_TOPICS) for p in range(t.partitions)}
        self.nodes: dict[str, _Node] = {}
        self.watch = Watch()
        self.errors: list[str] = []
        self.notes: list[str] = []  # what the shell would log as warnings
        self.trace: list[Delivery] | None = [] if trace else None
        self._loop = VirtualClockLoop(start_ms)
        self._watched = frozenset(Watch.TOPICS)
        self._snapshotting = _snapshot_services()
        #: called after every step (`peloton.runner.groups`: rebalances of consumer groups)
        self.on_step: list[Callable[[], Awaitable[None]]] = []
        self.groups: dict[str, Any] = {}  # name -> peloton.runner.groups.Group
        #: agents' inputs (keyed by host): each record also goes to its key's sub-log, so
        #: a launch or kill reaches the agent of its host only, and an agent with nothing
        #: keyed to it costs nothing per step (`_inbox`: agents that may have records)
        self._keyed_topics = frozenset(t for t in AgentCore.inputs if topic(t).key == "host")
        self._by_key: dict[tuple[TP, bytes], list[Record]] = {}
        self._agent_of: dict[bytes, str] = {}
        self._inbox: set[str] = set()

    # ---- building the cluster ----------------------------------------------------------
    def add_service(self, name: str, factory: CoreFactory, *, rate_per_s: int | None = None,
                    start: bool = True) -> None:
        """Add a service process whose core `factory` builds (again at every start)."""
        if name in self.nodes:
            raise ValueError(f"service {name} exists")
        rate = rate_per_s or self.rate_per_s
        self.nodes[name] = _Node(name, factory, max(1, rate * self.step_ms // 1000))
        if start:
            self.start(name)

    def add_agent(self, host: str, cpu: float = 64.0, memory: float = 65536.0,
                  disk: float = 1 << 20, gpu: float = 0.0, labels: Mapping[str, str] | None = None,
                  heartbeat_s: float = 1.0, start: bool = True,
                  retention_s: float | None = None) -> None:
        """Add a simulated agent (`AgentCore` in simulated mode, as `peloton serve agent
        --simulated` builds it). Each start is a new incarnation, as a new process is.
        `retention_s`: how long a reported run stays known (default: the agent's)."""
        name = f"agent-{host}"

        def build() -> ServiceCore:
            node = self.nodes[name]
            config = AgentConfig(
                host=host, incarnation=f"{host}-{self.seed}-{node.starts}",
                capacity=Resources(cpu, memory, disk, gpu), labels=dict(labels or {}),
                simulated=True, heartbeat_s=heartbeat_s)
            if retention_s is not None:
                config = replace(config, retention_s=retention_s)
            return AgentCore(config)

        self.add_service(name, build, start=False)
        self.nodes[name].host = host
        self.nodes[name].keyed = host.encode()
        self._agent_of[host.encode()] = name
        if start:
            self.start(name)

    # ---- the log -----------------------------------------------------------------------
    def publish(self, events: Sequence[Event], producer: str = "client") -> None:
        """Append events to their catalog topics, encoded by the codec (a body that does not
        match its schema raises EncodeError here), each in the partition its record key
        hashes to."""
        node = self.nodes.get(producer)
        encoded = encode_events(self.codec, events)
        for name, key, value, partition in coalesce(encoded, self._joiner,
                                                    lambda t: topic(t).partitions):
            spec = topic(name)
            tp = (spec.name, partition_for(key, spec.partitions) if partition is None
                  else partition)
            offset = self._append(tp, key, value, producer)
            if node is not None and spec.name in node.own:
                node.positions[tp] = offset + 1
            if spec.name in self._watched:
                for etype, body in self.codec.decode_each(value):
                    self.watch.observe(etype, body, self.now)

    def append_raw(self, topic_name: str, partition: int, key: bytes, value: bytes) -> None:
        """Append bytes as they are (bad input for tests: not an event, or misplaced)."""
        self._append((topic_name, partition), key, value, "raw")

    def _append(self, tp: TP, key: bytes, value: bytes, producer: str) -> int:
        log = self.logs[tp]
        rec = Record(tp[0], tp[1], len(log), key, value, self.now, producer)
        log.append(rec)
        if tp[0] in self._keyed_topics:
            self._by_key.setdefault((tp, key), []).append(rec)
            agent = self._agent_of.get(key)
            if agent is not None:
                self._inbox.add(agent)
            else:
                self.notes.append(f"{tp[0]}[{tp[1]}]@{rec.offset}: no agent serves host "
                                  f"{key!r} (yet)")
        return len(log) - 1

    def _log(self, node: _Node, tp: TP) -> list[Record]:
        """What the node reads of a partition: all of it, or (an agent) the sub-log of the
        records keyed by its host, in their order; `fetch` and `positions` index it."""
        if node.keyed is None or tp[0] not in self._keyed_topics:
            return self.logs[tp]
        return self._by_key.get((tp, node.keyed), [])

    def submit(self, bodies: Sequence[dict[str, Any]]) -> None:
        """Publish JobSubmitted bodies (a client producing to job-submitted)."""
        self.publish([Event("JobSubmitted", b["job_id"], b) for b in bodies])

    def records(self, topic_name: str) -> Iterator[tuple[Record, str, dict[str, Any]]]:
        """Every record of a topic, decoded, partition by partition: each fact it holds
        (a joined TaskStateChanged holds several jobs'), with its record."""
        for p in range(topic(topic_name).partitions):
            for rec in self.logs[(topic_name, p)]:
                for etype, body in self.codec.decode_each(rec.value):
                    yield rec, etype, body

    def backlog(self) -> dict[str, int]:
        """Records each live service has not consumed yet."""
        return {n.name: sum(len(self._log(n, tp)) - n.fetch[tp] for tp in n.inputs)
                for n in self.nodes.values() if n.alive}

    def dead_letters(self) -> int:
        return sum(len(self.logs[(DEAD_LETTER, p)]) for p in range(topic(DEAD_LETTER).partitions))

    # ---- processes ---------------------------------------------------------------------
    def core(self, name: str) -> Any:
        node = self.nodes[name]
        if node.core is None:
            raise KeyError(f"{name} is not running")
        return node.core

    def cores(self, agents: bool = False) -> dict[str, Any]:
        """Live cores by service name (agents only if asked)."""
        return {n.name: n.core for n in self.nodes.values()
                if n.alive and (agents or n.host is None)}

    def services(self, agents: bool = True) -> list[str]:
        return [n.name for n in self.nodes.values() if agents or n.host is None]

    def kill(self, name: str) -> None:
        """kill -9: the core is gone, with the shell's positions; the consumer group's
        committed offsets and the newest snapshot remain. A dead agent's runs die."""
        node = self.nodes[name]
        if node.core is None:
            return
        if node.host is not None:
            self._loop.run_until_complete(node.core.runner.close())
            self.watch.host_died(node.host)
        node.core = None
        node.positions = {}
        node.fetch = dict(node.committed)

    def start(self, name: str, use_snapshot: bool = True) -> None:
        """Start the process as the shell does: a new core restores the newest snapshot (if
        the core and the catalog have snapshots) and folds its `replay` topics from the
        snapshot's positions (else from the start) to their end, partitions interleaved at
        random; `after_replay`'s events are published; then it consumes its inputs from the
        group's committed offsets, skipping what the rebuild folded."""
        self._loop.run_until_complete(self.start_async(name, use_snapshot))

    async def start_async(self, name: str, use_snapshot: bool = True) -> None:
        """`start` from within the runner's loop (a consumer group's rebalance)."""
        node = self.nodes[name]
        if node.core is not None:
            raise ValueError(f"{name} is running")
        node.starts += 1
        core = node.factory()
        node.inputs = [(t, p) for t in core.inputs for p in range(topic(t).partitions)
                       if node.takes(t, p)]
        node.own = frozenset(core.replay) - frozenset(core.inputs)
        node.expected = {t: frozenset(topic(t).events) for t in core.inputs}
        core, node.positions = self._rebuild(node, core, use_snapshot)
        node.fetch = {tp: node.committed.get(tp, 0) for tp in node.inputs}
        node.core = core
        node.tick_ms = round(core.tick_interval * 1000) if core.tick_interval else None
        node.next_tick_ms = self.now + node.tick_ms if node.tick_ms else None
        node.last_commit_ms = node.last_snapshot_ms = self.now
        if node.keyed is not None:
            self._inbox.add(name)
        await self._after_replay(node)

    def run_now(self, work: Coroutine[Any, Any, None]) -> None:
        """Run a coroutine on the runner's loop now (outside a step)."""
        self._loop.run_until_complete(work)

    def restart(self, name: str, use_snapshot: bool = True) -> None:
        self.kill(name)
        self.start(name, use_snapshot)

    def reload(self, name: str) -> None:
        """`restore(snapshot())` in place: a new core built by the factory restores the
        JSON round trip of the live core's snapshot and takes its place; the shell's
        positions, offsets and tick schedule stay. A core whose restore is exact behaves
        as the old one would have: the log is the same as without the reload. Raises
        TypeError if the core takes no snapshots."""
        node = self.nodes[name]
        old = self.core(name)
        if not callable(getattr(old, "snapshot", None)):
            raise TypeError(f"{name} takes no snapshots")
        state = json.loads(json.dumps(old.snapshot(), separators=(",", ":")))
        core: Any = node.factory()
        core.restore(state)
        node.core = core

    def _rebuild(self, node: _Node, core: Any, use_snapshot: bool) -> tuple[Any, dict[TP, int]]:
        """The rebuilt core (`core`, or a new one if a snapshot could not be restored into
        it) and the positions its rebuild folded up to."""
        if not core.replay:
            return core, {}
        start: dict[TP, int] = {}
        snap = node.snapshot if use_snapshot else None
        if snap is not None:
            if snap.version != getattr(core, "snapshot_version", 0):
                self.notes.append(f"{node.name}: snapshot of version {snap.version}, core "
                                  f"wants {getattr(core, 'snapshot_version', 0)}: full replay")
            else:
                try:
                    core.restore(json.loads(snap.state))
                    start = dict(snap.positions)
                    node.restored += 1
                except (ValueError, KeyError, TypeError) as exc:
                    self.notes.append(f"{node.name}: snapshot unusable ({exc!r}): full replay")
                    core = node.factory()
        return core, self._replay(core, start, node)

    def _replay(self, core: Any, start: Mapping[TP, int], node: _Node) -> dict[TP, int]:
        ends = {(t, p): len(self.logs[(t, p)]) for t in core.replay
                for p in range(topic(t).partitions) if node.takes(t, p)}
        at = {tp: start.get(tp, 0) for tp in ends}
        todo = [tp for tp in ends if at[tp] < ends[tp]]
        while todo:
            i = self.rng.randrange(len(todo))
            tp = todo[i]
            stop = min(ends[tp], at[tp] + self.rng.randint(1, 64))
            for rec in self.logs[tp][at[tp]:stop]:
                try:
                    facts = self.codec.decode_each(rec.value)
                except DecodeError:
                    continue
                for etype, body in facts:
                    core.fold(etype, body)
            at[tp] = stop
            if stop >= ends[tp]:
                todo[i] = todo[-1]
                todo.pop()
        return ends

    async def _after_replay(self, node: _Node) -> None:
        self.publish(node.core.after_replay(self.now), node.name)
        await settle()

    def take_snapshot(self, name: str) -> bool:
        """Snapshot the service's core with the positions of its replay topics, as the
        shell does every `snapshot_interval_ms`; False if it takes no snapshots."""
        node = self.nodes[name]
        core = node.core
        if (core is None or not core.replay or name not in self._snapshotting
                or not callable(getattr(core, "snapshot", None))):
            return False
        replay = set(core.replay)
        node.snapshot = _Snapshot(
            json.dumps(core.snapshot(), separators=(",", ":")),
            {tp: o for tp, o in node.positions.items() if tp[0] in replay},
            getattr(core, "snapshot_version", 0))
        node.last_snapshot_ms = self.now
        return True

    # ---- time --------------------------------------------------------------------------
    def run_for(self, ms: int) -> None:
        """Advance simulated time by `ms` (whole steps)."""
        self.run_until(lambda: False, ms)

    def run_until(self, predicate: Callable[[], bool], max_ms: int) -> bool:
        """Step until `predicate()` holds (checked after every step) or `max_ms` of
        simulated time passed; True if the predicate held."""
        return self._loop.run_until_complete(self._run(predicate, max_ms))

    async def _run(self, predicate: Callable[[], bool], max_ms: int) -> bool:
        deadline = self.now + max_ms
        while self.now < deadline:
            await self._step()
            if predicate():
                return True
        return False

    async def _step(self) -> None:
        self.now += self.step_ms
        self._loop.set_time_ms(self.now)
        await settle()  # simulated runs due by now end; launches spawned last step start
        self._ticks()
        self._deliveries()
        self._commits()
        for hook in self.on_step:
            await hook()

    def _ticks(self) -> None:
        due = [n for n in self.nodes.values()
               if n.core is not None and n.next_tick_ms is not None
               and n.next_tick_ms <= self.now]
        self.rng.shuffle(due)
        for node in due:
            assert node.tick_ms is not None and node.next_tick_ms is not None
            while node.next_tick_ms <= self.now:
                node.next_tick_ms += node.tick_ms
            self._call(node, "tick", lambda core: core.tick(self.now))

    def _commits(self) -> None:
        for node in self.nodes.values():
            if node.core is None:
                continue
            if self.now - node.last_commit_ms >= self.commit_interval_ms:
                node.committed.update(node.fetch)
                node.last_commit_ms = self.now
            if (self.snapshot_interval_ms is not None
                    and self.now - node.last_snapshot_ms >= self.snapshot_interval_ms):
                self.take_snapshot(node.name)
                node.last_snapshot_ms = self.now

    def _deliveries(self) -> None:
        """Spend each live service's budget for this step: pick a service at random, then
        one of its partitions with records waiting, and deliver a fetch batch (1 to
        `batch_max` records, in order) from it; repeat until budgets or backlogs run out."""
        nodes = self.nodes
        active = [n for n in nodes.values() if n.core is not None and n.keyed is None]
        active += [nodes[a] for a in sorted(self._inbox) if nodes[a].core is not None]
        budget = {n.name: n.budget for n in active}
        rng = self.rng
        log = self._log
        while active:
            i = rng.randrange(len(active))
            node = active[i]
            ready = [tp for tp in node.inputs if node.fetch[tp] < len(log(node, tp))]
            if ready:
                tp = ready[rng.randrange(len(ready))]
                batch = min(budget[node.name], rng.randint(1, self.batch_max))
                for _ in range(batch):
                    if node.core is None or node.fetch[tp] >= len(log(node, tp)):
                        break
                    if self._deliver(node, tp):
                        budget[node.name] -= 1
                if budget[node.name] > 0 and node.core is not None:
                    continue
            active[i] = active[-1]
            active.pop()
        self._inbox = {a for a in self._inbox if nodes[a].core is not None and any(
            nodes[a].fetch[tp] < len(log(nodes[a], tp)) for tp in nodes[a].inputs)}

    def _deliver(self, node: _Node, tp: TP) -> bool:
        """Hand the next record of `tp` to the service; False if the shell skipped it."""
        offset = node.fetch[tp]
        folded = node.positions.get(tp, 0)
        log = self._log(node, tp)
        if offset < folded:  # the rebuild folded these: the shell skips them unhandled
            node.fetch[tp] = min(folded, len(log))
            return False
        node.fetch[tp] = offset + 1
        rec = log[offset]
        node.positions[tp] = offset + 1
        if self.redeliver and self.rng.random() < self.redeliver:
            node.fetch[tp] = node.positions[tp] = offset  # delivered again later
        try:
            facts = self.codec.decode_each(rec.value)
        except DecodeError as exc:
            self._dead_letter(node, rec, str(exc))
            return True
        etype = facts[0][0]
        if etype not in node.expected[tp[0]]:
            self._dead_letter(node, rec, f"{etype} does not belong on topic {tp[0]}")
            return True
        if self.trace is not None:
            self.trace.append(Delivery(self.now, node.name, tp[0], tp[1], rec.offset, etype))
        node.handled += 1
        for _, body in facts:  # a joined TaskStateChanged: one call per job, in order
            if not self._call(node, f"handling {etype} {tp[0]}[{tp[1]}]@{rec.offset}",
                              partial(_handle, etype=etype, body=body, now=self.now)):
                self._dead_letter(node, rec, f"handler failed: {self.errors[-1]}")
                break
        return True

    def _call(self, node: _Node, what: str, call: Callable[[Any], list[Event]]) -> bool:
        """Call the core and publish what it returns; False if it raised. A core that
        raised is brought back to what the log says, as the shell does:
        `discard_unpublished()` if it has it, else a rebuild (snapshot or full replay)."""
        try:
            out = call(node.core)
        except Exception as exc:  # the shell keeps going; strict mode stops the test
            self.errors.append(f"{self.now} {node.name}: {what}: {exc!r}")
            if self.strict:
                raise HandlerFailed(self.errors[-1]) from exc
            discard = getattr(node.core, "discard_unpublished", None)
            if callable(discard):
                discard()
            else:
                core, folded = self._rebuild(node, node.factory(), True)
                node.positions.update(folded)
                node.core = core
                self.publish(core.after_replay(self.now), node.name)
            return False
        if out:
            self.publish(out, node.name)
        return True

    def _dead_letter(self, node: _Node, rec: Record, reason: str) -> None:
        if not reason.startswith("handler failed"):
            self.errors.append(f"{self.now} {node.name}: {rec.topic}[{rec.partition}]"
                               f"@{rec.offset}: {reason}")
        self.publish([dead_letter(node.name, rec.topic, rec.partition, rec.offset, reason,
                                  rec.key, rec.value, self.now)], node.name)
        if self.strict:
            raise HandlerFailed(self.errors[-1])

    def close(self) -> None:
        self._loop.close()


def _handle(core: Any, etype: str, body: dict[str, Any], now: int) -> list[Event]:
    """One fact handed to a core (`_deliver`: a record may hold several)."""
    out: list[Event] = core.handle(etype, body, now)
    return out
