"""The topic catalog: every event on exactly one topic, every topic's events have schemas,
and every service reads and replays only catalog topics."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from bus_samples import SCHEMA_DIR

from peloton.bus.catalog import DEAD_LETTER, TOPICS, topic, topic_for_event
from peloton.hostmgr.service import HostManagerCore
from peloton.jobmgr.service import JobManagerCore
from peloton.placement.service import PlacementCore
from peloton.resmgr.service import ResourceManagerCore

SCHEMA_EVENTS = sorted({p.name.split(".")[0] for p in SCHEMA_DIR.glob("*.avsc")})
CATALOG_EVENTS = [e for t in TOPICS for e in t.events]


@pytest.mark.parametrize("event", SCHEMA_EVENTS)
def test_every_schema_event_is_on_exactly_one_topic(event: str) -> None:
    carriers = [t.name for t in TOPICS if event in t.events]
    assert len(carriers) == 1, (event, carriers)
    assert topic_for_event(event).name == carriers[0]


def test_every_catalog_event_has_a_schema() -> None:
    assert sorted(set(CATALOG_EVENTS) - set(SCHEMA_EVENTS)) == []


def test_no_event_is_listed_twice() -> None:
    assert [e for e, n in Counter(CATALOG_EVENTS).items() if n > 1] == []


def test_topic_names_are_unique_and_looked_up_by_name() -> None:
    names = [t.name for t in TOPICS]
    assert len(names) == len(set(names))
    for t in TOPICS:
        assert topic(t.name) is t
        assert t.partitions >= 1 and t.events and t.key and t.doc


def test_the_dead_letter_topic_is_in_the_catalog() -> None:
    assert topic(DEAD_LETTER).events == ("DeadLetterRecorded",)


def test_public_topics_are_the_requests_anyone_may_produce() -> None:
    public = {t.name for t in TOPICS if t.public}
    assert {"job-submitted", "job-kill-requested"} <= public
    for name in public:
        assert all(e.endswith("Requested") or e == "JobSubmitted" for e in topic(name).events)


def test_unknown_names_raise_key_error() -> None:
    with pytest.raises(KeyError):
        topic("nope")
    with pytest.raises(KeyError):
        topic_for_event("Nope")


@pytest.mark.parametrize("core", [JobManagerCore, HostManagerCore, ResourceManagerCore,
                                  PlacementCore], ids=lambda c: c.__name__)
def test_services_read_and_replay_only_catalog_topics(core: Any) -> None:
    names = {t.name for t in TOPICS}
    assert set(core.inputs) <= names
    assert set(core.replay) <= names
