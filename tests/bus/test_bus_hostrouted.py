"""The host routing rule (peloton.bus.hostrouted): which partitions an agent reads, and which
fetched records reach its decoder (pure; no broker)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from peloton.bus.codec import default_codec
from peloton.bus.hostrouted import HostRoute, host_partitions
from peloton.bus.routing import partition_for
from peloton.runner.memory import partition_for as runner_partition_for

CODEC = default_codec()
names = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1,
                max_size=20)


def heartbeat(host: str) -> bytes:
    return CODEC.encode("HostStatusReported",
                        {"host": host, "incarnation": "i", "at": 1, "running": []})


def registration(host: str) -> bytes:
    return CODEC.encode("HostRegistered", {
        "host": host, "incarnation": "i", "at": 1,
        "capacity": {"cpu": 1.0, "memory": 1.0, "disk": 1.0, "gpu": 0.0}, "labels": {},
        "log_url": "", "port_range_begin": 1, "port_range_end": 2, "simulated": True})


def test_the_partitioner_is_the_runners_and_in_range() -> None:
    # the producer's default partitioner (aiokafka's murmur2), as the in-memory runner uses it
    assert [partition_for(k, 4) for k in (b"a", b"b", b"c")] == \
        [runner_partition_for(k, 4) for k in (b"a", b"b", b"c")]
    assert all(0 <= partition_for(f"host-{i}".encode(), 64) < 64 for i in range(1000))


@given(st.lists(names, min_size=1, max_size=30), st.integers(1, 128))
def test_a_fleet_reads_exactly_the_partitions_its_hosts_hash_to(hosts: list[str],
                                                                partitions: int) -> None:
    chosen = host_partitions(hosts, partitions)
    assert chosen == {runner_partition_for(h.encode(), partitions) for h in hosts}
    assert len(chosen) <= min(len(set(hosts)), partitions)
    # every record keyed by one of its hosts lands in a partition it reads
    assert all(runner_partition_for(h.encode(), partitions) in chosen for h in hosts)


@given(st.sets(names, min_size=1, max_size=10), names)
def test_only_records_keyed_by_its_hosts_pass(hosts: set[str], other: str) -> None:
    route = HostRoute(frozenset(hosts))
    for h in hosts:
        assert route.wants("task-launch-requested", h.encode(), b"whatever", CODEC)
    assert route.wants("task-launch-requested", other.encode(), b"x", CODEC) == (other in hosts)
    assert not route.wants("task-launch-requested", None, b"x", CODEC)
    assert route.kept + route.skipped == len(hosts) + 2


def test_a_topic_with_types_keeps_only_those_types_undecoded() -> None:
    route = HostRoute(frozenset({"h1"}), {"host-registered": ("HostRegistered",)})
    assert route.wants("host-registered", b"h1", registration("h1"), CODEC)
    assert not route.wants("host-registered", b"h1", heartbeat("h1"), CODEC)  # own heartbeat
    assert not route.wants("host-registered", b"h2", registration("h2"), CODEC)
    assert not route.wants("host-registered", b"h1", b"not avro", CODEC)
    assert (route.kept, route.skipped) == (1, 3)
