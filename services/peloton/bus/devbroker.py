"""Client shims for the dev/test broker (Tansu), in one place, used only against it.

Measured gaps (README, "The dev broker and production"):
- ListOffsets "latest" answers the first offset of the last batch + 1, not the log end.
  `log_end_offsets` instead fetches and reads the high watermark from the fetch response,
  which Tansu reports correctly. Against Apache Kafka `consumer.end_offsets` is exact.
- A fetch's wait is polled: a record that arrives while a fetch waits is answered late,
  the later the longer the wait (measured: a Faust hop took 250-750 ms with Faust's fixed
  1500 ms; one record, 7 ms median with a 25 ms wait, 18 ms with 100), and the broker
  burns CPU while it waits (an empty fetch cost it 1.2-2.6 ms with 25 ms, 1 to 32
  partitions; 0.5-0.9 ms with 1 ms; with no wait it answers no records at all). Against
  the dev broker every consumer here asks for `FETCH_MAX_WAIT_MS`, and
  `patch_faust_fetch_wait` makes Faust's consumer do the same (or use the wait its app
  asked for: the read model waits longer, `peloton.api.service.READ_MODEL_FETCH_WAIT_MS`).
  A consumer whose last `IDLE_AFTER_FETCHES` fetches brought no record asks for
  `IDLE_FETCH_WAIT_MS` instead until one brings records (`FetchWait`; every aiokafka
  consumer of the process, `_patch_fetcher`): an idle consumer then costs the broker a
  third as much (measured: an empty fetch of 1-32 partitions 0.05-0.1 core per consumer
  with 25 ms, 0.016-0.04 with 100), and the first record after a quiet spell is answered
  in 17 ms (median) instead of 7. Every fetch still names every partition the consumer
  reads, so records of its partitions are not held back behind one another.
- A fetch may return a record before an earlier one of its partition is readable: with
  several producers writing to one partition, a consumer tailing it was handed offset N+1
  while N, written by another producer, was not there yet (measured: 7 in 9,000 records,
  6 producers, 2 partitions, 3 tailing consumers; read again later the log has every
  offset). aiokafka takes such a jump for a compacted record and moves on, and N is never
  read: the scale benchmark lost a placement of 72 runs that way (the host manager's
  consumer skipped it and committed past it, so they stayed PLACED). Against the dev
  broker no topic is compacted or transactional, so every consumer here stops at a jump
  and fetches again from the missing offset (`_Contiguous`, installed with the fetch
  wait below), and takes the jump only once it has lasted `GAP_ACCEPT_S` (with a
  warning). Apache Kafka serves a consumer only offsets below the partition's high
  watermark, every one of them readable.
- Its memory storage keeps every batch as an object, never deleted (no retention; its
  DeleteRecords is unimplemented), and a fetch that returns records lists every batch its
  partition holds (read from Tansu's source, `tansu-storage/src/dynostore.rs`): about 0.8
  ms of its CPU per 1,000 batches the partition holds, whether the fetch returns one batch
  or fifty (measured: 8.0-8.5 ms at 10,000 held). A fetch at the log end, a produce, and
  batches held in partitions nobody fetches cost little more as the store grows (`peloton
  bench devbroker`, `peloton.bus.brokerbench`: 300 one-record batches a second, 3 readers,
  two runs: 0.29-0.30 core fresh, 0.33-0.36 with 40,000 batches held in a topic nobody
  reads, 1.7 cores and the load slowed to 52-57 batches/s with them held in the load's own
  partitions). So in `bench scale` the broker gets dearer through a run as the partitions
  its services read fill up, by every reader's fetches of them, each reader a small part
  (session 34's toggled reader, about 0.05 core by these figures, showed none of it: not
  explained). The host manager's shards read job-events whole, and here read a partition
  of it at most every 100 ms (`whole_read_pace`, `peloton.bus.fetchpace`): fewer, larger
  reads, measured side by side to cost the host manager a tenth less CPU per task and the
  broker a twentieth. Nothing is paced against Apache Kafka (not measured there).
- InitProducerId v0 is rejected, so idempotent producers are off on the dev broker
  (`producer_settings`). Transactions are not real there (aborted records stay visible),
  so nothing here relies on them.
- A member of a consumer group killed -9 is never evicted, whatever the session timeout:
  the restarted process then gets half the partitions, or waits on the dead leader's
  assignment for the rebalance timeout (measured 8 s). `rejoin_as_dead_member` keeps the
  member id a process joins with in a small file (`MemberMemory`), and a restart of the
  same instance on the same machine rejoins as that member, replacing it at once. It does
  so only when the process that held the id is certainly gone (`peloton.ha.liveness`:
  same machine, boot and pid namespace, its pid not alive), never while it may consume.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Generator, Iterable
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from peloton.ha.liveness import certainly_gone, process_token

__all__ = ["is_dev_broker", "log_end_offsets", "producer_settings", "consumer_settings",
           "patch_faust_fetch_wait", "FETCH_MAX_WAIT_MS", "IDLE_FETCH_WAIT_MS",
           "IDLE_AFTER_FETCHES", "FetchWait", "WHOLE_READ_PACE_MS", "whole_read_pace",
           "rejoin_as_dead_member", "MemberMemory", "GAP_ACCEPT_S", "Gaps", "GAPS"]

log = logging.getLogger(__name__)

FETCH_MAX_WAIT_MS = 25
#: the wait an idle consumer asks for (module doc): after this many fetches in a row
#: brought no record
IDLE_FETCH_WAIT_MS = 100
IDLE_AFTER_FETCHES = 4
#: how long a consumer waits for a missing offset before it takes the jump (module doc)
GAP_ACCEPT_S = 5.0


#: topic -> how often at most (ms) a partitioned service's shards read a partition of it
#: when they read it whole (module doc; `peloton.bus.fetchpace`)
WHOLE_READ_PACE_MS = {"job-events": 100}


def whole_read_pace() -> dict[str, int]:
    """`WHOLE_READ_PACE_MS` against the dev broker, nothing against Apache Kafka."""
    return dict(WHOLE_READ_PACE_MS) if is_dev_broker() else {}


def is_dev_broker() -> bool:
    """True unless PELOTON_BROKER_KIND=kafka (production sets it)."""
    return os.environ.get("PELOTON_BROKER_KIND", "tansu") != "kafka"


def producer_settings() -> dict[str, object]:
    if is_dev_broker():
        return {"enable_idempotence": False, "acks": 1}
    return {"enable_idempotence": True, "acks": "all"}


def consumer_settings() -> dict[str, object]:
    if not is_dev_broker():
        return {}
    _patch_fetcher()
    return {"fetch_max_wait_ms": FETCH_MAX_WAIT_MS}


#: app id (the consumer's group id) -> its fetch wait, for the apps that set their own
_FETCH_WAIT_BY_APP: dict[str, int] = {}


def patch_faust_fetch_wait(app_id: str | None = None, wait_ms: int | None = None) -> None:
    """Make Faust's aiokafka consumer use FETCH_MAX_WAIT_MS, or `wait_ms` for the app
    `app_id` (dev broker only; idempotent). The dev broker polls while a fetch waits and
    charges each fetch by the partitions it names, so a consumer that can wait longer
    (the read model, over every partition) should: it fetches less often."""
    if not is_dev_broker():
        return
    if app_id is not None and wait_ms is not None:
        _FETCH_WAIT_BY_APP[app_id] = wait_ms
    import types

    import aiokafka
    from faust.transport.drivers import aiokafka as driver

    _patch_fetcher()
    if getattr(driver.aiokafka, "_peloton_patched", False):
        return

    class _Consumer(aiokafka.AIOKafkaConsumer):  # type: ignore[misc]
        def __init__(self, *args: object, **kwargs: object) -> None:
            kwargs["fetch_max_wait_ms"] = _FETCH_WAIT_BY_APP.get(
                str(kwargs.get("group_id")), FETCH_MAX_WAIT_MS)
            super().__init__(*args, **kwargs)

    shim = types.SimpleNamespace(**vars(aiokafka))
    shim.AIOKafkaConsumer = _Consumer
    shim._peloton_patched = True
    driver.aiokafka = shim  # type: ignore[assignment]


async def log_end_offsets(
    consumer: AIOKafkaConsumer, partitions: list[TopicPartition]
) -> dict[TopicPartition, int]:
    """The true end offset of each partition (the next offset to be written)."""
    if not is_dev_broker():
        return dict(await consumer.end_offsets(partitions))
    ends: dict[TopicPartition, int] = {}
    for tp in partitions:
        consumer.seek(tp, 0)
    pending = set(partitions)
    deadline = asyncio.get_running_loop().time() + 10.0
    while pending and asyncio.get_running_loop().time() < deadline:
        await consumer.getmany(*pending, timeout_ms=200, max_records=1)
        for tp in list(pending):
            hw = consumer.highwater(tp)
            if hw is not None:
                ends[tp] = hw
                pending.discard(tp)
    for tp in pending:  # an empty partition whose fetch never answered
        ends[tp] = 0
    return ends


def rejoin_as_dead_member(group_id: str, member: str | None = None) -> None:
    """Against the dev broker, let a restart of `group_id`'s instance rejoin as its dead
    member (module docstring); against Apache Kafka nothing (it evicts dead members).
    `member` names the instance when several share the group (a partitioned service):
    each remembers its own member id."""
    if is_dev_broker():
        MemberMemory.install(group_id, member)


class MemberMemory:
    """The consumer-group member id of one group, kept in a file across restarts (module
    docstring). The file lives in PELOTON_STATE_DIR, else next to PELOTON_READY_FILE,
    else in the temporary directory."""

    _groups: dict[str, MemberMemory] = {}

    def __init__(self, group_id: str, directory: Path | None = None,
                 member: str | None = None) -> None:
        self.group_id = group_id
        name = group_id if member is None else f"{group_id}@{member}"
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        self.path = (directory or _state_dir()) / f"{safe}.member.json"

    def recall(self) -> str | None:
        """The remembered member id, if the process that held it is certainly gone."""
        try:
            data = json.loads(self.path.read_text())
            member = data["member_id"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not isinstance(member, str) or not member:
            return None
        if certainly_gone(data.get("holder")):
            return member
        log.info("%s: not rejoining as member %s: its process may be alive (%s)",
                 self.group_id, member, data.get("holder"))
        return None

    def remember(self, member_id: str) -> None:
        """Keep `member_id` as this process's (best effort: a failure costs only speed)."""
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"member_id": member_id, "holder": process_token()}))
            tmp.replace(self.path)

    @classmethod
    def install(cls, group_id: str, member: str | None = None) -> None:
        """Make aiokafka's group coordinator for `group_id` start from the remembered
        member id and remember the ids it is given (idempotent)."""
        cls._groups.setdefault(group_id, cls(group_id, member=member))
        _patch_coordinator()


def _state_dir() -> Path:
    if os.environ.get("PELOTON_STATE_DIR"):
        return Path(os.environ["PELOTON_STATE_DIR"])
    if os.environ.get("PELOTON_READY_FILE"):
        return Path(os.environ["PELOTON_READY_FILE"]).parent
    return Path(tempfile.gettempdir()) / "peloton-members"


def _patch_coordinator() -> None:
    from aiokafka.consumer import consumer as consumer_module
    from aiokafka.consumer.group_coordinator import GroupCoordinator

    if getattr(consumer_module.GroupCoordinator, "_peloton_members", False):
        return

    class _Coordinator(GroupCoordinator):  # type: ignore[misc]
        _peloton_members = True

        @property
        def member_id(self) -> str:
            return str(self.__dict__.get("_member_id", ""))

        @member_id.setter
        def member_id(self, value: str) -> None:
            changed = value != self.__dict__.get("_member_id")
            self.__dict__["_member_id"] = value
            memory = self.__dict__.get("_memory")
            if changed and value and memory is not None:
                memory.remember(value)

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._memory: MemberMemory | None = None
            super().__init__(*args, **kwargs)  # sets member_id (unknown) first
            memory = MemberMemory._groups.get(self.group_id)
            if memory is not None:
                self._memory = memory
                remembered = memory.recall()
                if remembered:
                    log.info("%s: rejoining as member %s (its process is gone)",
                             self.group_id, remembered)
                    self.member_id = remembered  # and the file now names this process

    consumer_module.GroupCoordinator = _Coordinator  # type: ignore[misc]


class FetchWait:
    """The wait a consumer asks the dev broker for, by what its fetches brought (module
    doc): its own (`busy_ms`) while records come; `idle_ms`, if longer, once `idle_after`
    fetches in a row brought none; its own again from the first fetch that brings any.
    Pure."""

    def __init__(self, busy_ms: int, idle_ms: int = IDLE_FETCH_WAIT_MS,
                 idle_after: int = IDLE_AFTER_FETCHES) -> None:
        self.busy_ms = busy_ms
        self.idle_ms = max(busy_ms, idle_ms)
        self.idle_after = idle_after
        self.empty = 0  # fetches in a row that brought no record

    @property
    def wait_ms(self) -> int:
        return self.idle_ms if self.empty >= self.idle_after else self.busy_ms

    def fetched(self, got_records: bool) -> int:
        """Note what a fetch brought; the wait of the next one."""
        self.empty = 0 if got_records else self.empty + 1
        return self.wait_ms


class Gaps:
    """The offset jumps consumers of this process met (module doc): whether to wait for a
    missing offset, how many fetches waited, how many jumps were taken. Keyed by
    (partition, first missing offset): consumers waiting on one jump share its clock."""

    def __init__(self, accept_s: float = GAP_ACCEPT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.accept_s = accept_s
        self.clock = clock
        self.first_seen: dict[tuple[Any, int], float] = {}
        self.waited = 0  # fetches that stopped at a jump
        self.taken = 0  # jumps taken after `accept_s`

    def wait(self, tp: Any, missing: int, found: int) -> bool:
        """A fetch of `tp` found `found` where `missing` was due: True to stop there and
        fetch again, False (once it has lasted `accept_s`) to take the jump."""
        now = self.clock()
        key = (tp, missing)
        first = self.first_seen.get(key)
        if first is None:
            first = self.first_seen[key] = now
            log.info("%s: the fetch found offset %d where %d was due: fetching %d again",
                     tp, found, missing, missing)
        if now - first < self.accept_s:
            self.waited += 1
            return True
        del self.first_seen[key]
        self.taken += 1
        log.warning("%s: offset %d still missing after %.1f s (the fetch found %d): "
                    "taking the jump", tp, missing, now - first, found)
        return False

    def seen(self, tp: Any, missing: int) -> None:
        """`missing` was read at last: forget its jump (and any older than a minute)."""
        if self.first_seen.pop((tp, missing), None) is not None and len(self.first_seen) > 64:
            now = self.clock()
            for key in [k for k, at in self.first_seen.items() if now - at > 60.0]:
                del self.first_seen[key]


#: the process's jumps (every patched consumer's)
GAPS = Gaps()


def contiguous(records: Iterable[Any], fetch_offset: int, tp: Any,
               gaps: Gaps) -> Generator[Any, None, tuple[int, bool]]:
    """Yield the fetched `records` of `tp` (fetched from `fetch_offset`) up to the first
    offset jump that `gaps` says to wait on; return the next offset due and whether it
    stopped at a jump. Records below the fetch offset (a batch that began before it) are
    passed on as they come (the client skips them)."""
    expected = fetch_offset
    for record in records:
        offset = record.offset
        if offset > expected:
            if gaps.wait(tp, expected, offset):
                return expected, True
        elif offset == expected and gaps.first_seen:
            gaps.seen(tp, expected)
        if offset >= expected:
            expected = offset + 1
        yield record
    return expected, False


def _patch_fetcher() -> None:
    """Make every aiokafka consumer of this process pace its fetch wait by `FetchWait`
    and stop at offset jumps (`_Contiguous`) (module doc; idempotent)."""
    from aiokafka.consumer import consumer as consumer_module
    from aiokafka.consumer import fetcher as fetcher_module
    from aiokafka.consumer.fetcher import Fetcher, PartitionRecords

    if getattr(consumer_module.Fetcher, "_peloton_paced", False):
        return

    class _Fetcher(Fetcher):  # type: ignore[misc]
        _peloton_paced = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.peloton_wait = FetchWait(int(self._fetch_max_wait_ms))  # type: ignore[has-type]

        async def _proc_fetch_request(self, assignment: Any, node_id: Any,
                                      request: Any) -> bool:
            # aiokafka's answer: True when the fetch put records (or an error) out for
            # the consumer; the next fetch request is built with this wait
            got = bool(await super()._proc_fetch_request(assignment, node_id, request))
            self._fetch_max_wait_ms = self.peloton_wait.fetched(got)
            return got

    consumer_module.Fetcher = _Fetcher  # type: ignore[misc]
    if not hasattr(PartitionRecords, "_unpack_records"):  # another aiokafka: say so
        log.warning("aiokafka's PartitionRecords has no _unpack_records: consumers of the "
                    "dev broker take offset jumps as they come")
        return

    class _Contiguous(PartitionRecords):  # type: ignore[misc]
        """A partition's fetched records that end at an offset jump (`contiguous`); the
        position then stays at the missing offset, so the next fetch asks for it."""

        next_fetch_offset: int
        _tp: Any

        def _unpack_records(self) -> Generator[Any, None, None]:
            due, stopped = yield from contiguous(
                super()._unpack_records(), self.next_fetch_offset, self._tp, GAPS)
            # the client moved on past `due` (to the jump's record, or to the end a batch
            # claimed beyond its records): back to it, unless that jump is taken
            if self.next_fetch_offset > due and (
                    stopped or GAPS.wait(self._tp, due, self.next_fetch_offset)):
                self.next_fetch_offset = due

    fetcher_module.PartitionRecords = _Contiguous  # type: ignore[misc]
