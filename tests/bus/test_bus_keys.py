"""Record keys come from the catalog, and `check_event` accepts exactly valid events."""

from __future__ import annotations

import pytest
from bus_samples import SCHEMA_DIR, field_type, load, sample

from peloton.bus.catalog import TOPICS, Batch, Field, key_rule
from peloton.bus.check import EventCheckError, check_event
from peloton.bus.codec import default_codec
from peloton.bus.keys import key_of, record_key
from peloton.model.event import Event

CATALOG_EVENTS = sorted(e for t in TOPICS for e in t.events)


def newest(event: str) -> dict:  # type: ignore[type-arg]
    versions = sorted(SCHEMA_DIR.glob(f"{event}.v*.avsc"),
                      key=lambda p: int(p.name.split(".v")[1].split(".")[0]))
    return load(versions[-1])  # type: ignore[no-any-return]


@pytest.mark.parametrize("event", CATALOG_EVENTS)
def test_every_event_type_has_a_derivable_key(event: str) -> None:
    rule = key_rule(event)
    body = sample(newest(event))
    if isinstance(rule, Batch):
        assert rule.key and rule.why
        assert key_of(event, body) == rule.key
    else:
        assert isinstance(rule, Field)
        # every published version carries the field, as a string or an integer
        for path in SCHEMA_DIR.glob(f"{event}.v*.avsc"):
            assert field_type(load(path), rule.path) in ("string", "int", "long"), path.name
        assert key_of(event, body) != ""
    assert record_key(event, body) == key_of(event, body).encode()


@pytest.mark.parametrize("event", CATALOG_EVENTS)
def test_a_sample_of_every_event_passes_the_check(event: str) -> None:
    check_event(Event(event, "ignored", sample(newest(event))))


def test_keys_follow_the_declared_fields() -> None:
    assert key_of("TaskLaunchRequested", {"host": "h1"}) == "h1"
    assert key_of("PlacementMade", {"round": 7, "placements": [{"job_id": "j4"}]}) == "j4"
    assert key_of("ResourcePoolCreated", {"pool": {"path": "/a/b"}}) == "/a/b"
    assert key_of("OfferReceived", {"offers": []}) == "offers"
    tasks = [{"job_id": "j2", "instance": 0}, {"job_id": "j9", "instance": 1}]
    assert key_of("TasksAdmitted", {"pool": "/a", "tasks": tasks}) == "j2"  # the first's


def test_a_batch_keyed_by_its_first_item_needs_one() -> None:
    with pytest.raises(KeyError, match=r"tasks\.0\.job_id"):
        key_of("TasksAdmitted", {"pool": "/a", "tasks": []})


def test_a_body_without_its_key_field_raises() -> None:
    with pytest.raises(KeyError, match="job_id"):
        key_of("JobCreated", {"at": 1})


def test_check_names_the_problem() -> None:
    body = sample(newest("JobKillRequested"))
    with pytest.raises(EventCheckError, match="not in the topic catalog"):
        check_event(Event("Nope", "k", body))
    with pytest.raises(EventCheckError, match="extra"):
        check_event(Event("JobKillRequested", "k", body | {"extra": 1}))
    with pytest.raises(EventCheckError, match="reason"):
        check_event(Event("JobKillRequested", "k", body | {"reason": 3}))
    missing = {k: v for k, v in body.items() if k != "requested_by"}
    with pytest.raises(EventCheckError):
        check_event(Event("JobKillRequested", "k", missing))


def test_the_checked_sample_encodes() -> None:
    codec = default_codec()
    for event in CATALOG_EVENTS:
        body = sample(newest(event))
        assert codec.decode(codec.encode(event, body))[0] == event
