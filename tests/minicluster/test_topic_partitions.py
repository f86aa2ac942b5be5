"""Topics are created with the partition counts the cluster's processes read them with,
and `bench scale` records the counts as the broker has them: a topic keeps the count it
was created with, whatever the catalog (or a later PELOTON_TOPIC_PARTITIONS) says."""

from __future__ import annotations

import asyncio

import pytest
from broker_topics import create_topic

from peloton.bus.catalog import TOPICS
from peloton.bus.faustapp import ensure_topics
from peloton.bus.partitions import ENV
from peloton.minicluster.bench import topic_partitions
from peloton.minicluster.scalebench import partitions_text

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]



def test_topics_get_the_counts_of_the_environment_their_readers_start_with(
        fresh_broker: str) -> None:
    broker = fresh_broker
    # a minicluster's parent creates the topics for services started with Layout.env
    asyncio.run(ensure_topics(broker, {ENV: "job-events=1,task-launch-requested=2"}))
    counts = asyncio.run(topic_partitions(broker))
    wanted = {"job-events": 1, "task-launch-requested": 2}
    assert counts == {t.name: wanted.get(t.name, t.partitions) for t in TOPICS}


def test_the_counts_are_the_broker_s_a_topic_made_before_keeps_its_own(
        fresh_broker: str) -> None:
    broker = fresh_broker
    asyncio.run(create_topic(broker, "job-events", 2))
    asyncio.run(ensure_topics(broker))  # the others, as this process's catalog says
    counts = asyncio.run(topic_partitions(broker))
    assert counts == {t.name: 2 if t.name == "job-events" else t.partitions for t in TOPICS}
    ones = sorted(t.name for t in TOPICS if t.partitions == 1)
    # the most common count first, then by how many topics have it
    assert partitions_text(counts) == f"4 ({', '.join(ones)}: 1; job-events: 2)"
