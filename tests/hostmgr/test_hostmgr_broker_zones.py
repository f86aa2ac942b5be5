"""The host manager's mass-silence zones follow the partitions host-registered has on the
broker, not the catalog's setting: a topic created with another count (the setting changed
after the topics existed) keeps its count, and the agents' heartbeats land by it
(peloton.bus.brokercounts, `HostManagerCore.partitions_known`). Real broker."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from event_bodies import host_registered
from hostmgr_helpers import TIMEOUT, heartbeat, lost

from peloton.bus.catalog import topic
from peloton.bus.codec import default_codec
from peloton.bus.driver import CoreDriver
from peloton.bus.faustapp import ensure_topics
from peloton.bus.publisher import Publisher
from peloton.bus.routing import partition_for
from peloton.hostmgr.service import HostManagerCore
from peloton.minicluster.servers import free_port, start_tansu
from peloton.model.event import Event

pytestmark = pytest.mark.integration

HOSTS = [f"host-{i}" for i in range(60)]
CATALOG = topic("host-registered").partitions
BROKER = 3  # host-registered as an older setting created it


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[str]:
    server = start_tansu(free_port(), tmp_path / "tansu.log")
    try:
        yield server.address
    finally:
        server.stop()


def silence_one_zone(core: HostManagerCore, quiet: set[str]) -> list[str]:
    """Heartbeats of every host but `quiet` for longer than the timeout; the hosts lost."""
    gone: list[str] = []
    for t in range(1000, TIMEOUT + 3000, 1000):
        for h in HOSTS:
            if h not in quiet:
                core.handle("HostStatusReported", heartbeat(h, t), t)
        gone += lost(core.tick(t))
    return gone


async def test_zones_follow_the_partitions_the_heartbeats_land_in(
        fresh_broker: str, caplog: pytest.LogCaptureFixture) -> None:
    assert CATALOG != BROKER
    admin = AIOKafkaAdminClient(bootstrap_servers=fresh_broker)
    await admin.start()
    try:
        await admin.create_topics([NewTopic("host-registered", BROKER, 1)])
    finally:
        await admin.close()
    await ensure_topics(fresh_broker)  # the other topics, host-registered kept as it is
    publisher = Publisher(fresh_broker, default_codec())
    await publisher.start()
    try:
        delivered = await publisher.publish(
            [Event("HostRegistered", h, host_registered(h, incarnation="inc-1"))
             for h in HOSTS])
    finally:
        await publisher.stop()
    landed = {h: p for h, (_t, p, _o) in zip(HOSTS, delivered, strict=True)}
    assert any(p != partition_for(h.encode(), CATALOG) for h, p in landed.items())

    driver = CoreDriver("hostmgr", HostManagerCore(heartbeat_timeout_s=TIMEOUT / 1000,
                                                   restart_grace_s=0.0),
                        fresh_broker, default_codec(), clock=lambda: 0)
    with caplog.at_level(logging.WARNING, logger="peloton.bus.brokercounts"):
        await driver.rebuild()
    core = driver.core
    zone_of = core.book.zone_of
    assert zone_of is not None and {h: zone_of(h) for h in HOSTS} == landed
    assert (f"topic host-registered has {BROKER} partitions on the broker, the catalog's "
            f"setting is {CATALOG}") in caplog.text
    assert sorted(core.book.hosts) == sorted(HOSTS)  # the replay registered them

    # one partition's hosts silent at once (its reader late): held, none lost
    quiet_zone = max(range(BROKER), key=lambda z: sum(p == z for p in landed.values()))
    quiet = {h for h, p in landed.items() if p == quiet_zone}
    assert len(quiet) >= 10
    assert silence_one_zone(core, quiet) == []
    assert core.book.silence_zones == (quiet_zone,)

    # the same silence, zoned by the catalog's count (the bug this guards): hosts lost
    untold = HostManagerCore(heartbeat_timeout_s=TIMEOUT / 1000, restart_grace_s=0.0)
    for h in HOSTS:
        untold.handle("HostRegistered", host_registered(h, incarnation="inc-1"), 0)
    untold.after_replay(0)
    assert set(silence_one_zone(untold, quiet)) == quiet
