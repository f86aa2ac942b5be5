"""Topic replication and retention from the environment (peloton.bus.topicconfig)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.bus import topicconfig as tc


def test_defaults_keep_events_forever_and_snapshots_for_hours() -> None:
    s = tc.from_env({})
    assert s == tc.TopicSettings(1, None, -1, 6 * 3600 * 1000)
    assert s.event_config() == {"cleanup.policy": "delete", "retention.ms": "-1"}
    snap = s.snapshot_config()
    assert snap["cleanup.policy"] == "delete"
    assert snap["retention.ms"] == str(6 * 3600 * 1000)
    assert int(snap["segment.ms"]) < int(snap["retention.ms"])
    assert "min.insync.replicas" not in snap


def test_production_values() -> None:
    s = tc.from_env({"PELOTON_TOPIC_REPLICATION": "3",
                     "PELOTON_TOPIC_MIN_INSYNC_REPLICAS": "2",
                     "PELOTON_EVENT_RETENTION_MS": "2592000000",
                     "PELOTON_SNAPSHOT_RETENTION_MS": "86400000"})
    assert s.replication == 3
    assert s.event_config() == {"cleanup.policy": "delete", "retention.ms": "2592000000",
                                "min.insync.replicas": "2"}
    assert s.snapshot_config()["retention.ms"] == "86400000"
    assert s.snapshot_config()["min.insync.replicas"] == "2"


@pytest.mark.parametrize(("env", "message"), [
    ({"PELOTON_TOPIC_REPLICATION": "three"}, "PELOTON_TOPIC_REPLICATION: not an integer"),
    ({"PELOTON_TOPIC_REPLICATION": "0"}, "PELOTON_TOPIC_REPLICATION: 0 is below 1"),
    ({"PELOTON_TOPIC_MIN_INSYNC_REPLICAS": "2"}, "exceeds PELOTON_TOPIC_REPLICATION"),
    ({"PELOTON_EVENT_RETENTION_MS": "0"}, "would delete every event"),
    ({"PELOTON_EVENT_RETENTION_MS": "-2"}, "is below -1"),
    ({"PELOTON_SNAPSHOT_RETENTION_MS": "1000"}, "is below 60000"),
])
def test_bad_values_are_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(tc.TopicConfigError, match=message):
        tc.from_env(env)


@given(st.integers(1, 5), st.integers(1, 5),
       st.one_of(st.just(-1), st.integers(1, 10**13)))
def test_valid_settings_round_trip(replication: int, insync: int, retention: int) -> None:
    env = {"PELOTON_TOPIC_REPLICATION": str(replication),
           "PELOTON_TOPIC_MIN_INSYNC_REPLICAS": str(insync),
           "PELOTON_EVENT_RETENTION_MS": str(retention)}
    if insync > replication:
        with pytest.raises(tc.TopicConfigError):
            tc.from_env(env)
        return
    s = tc.from_env(env)
    assert (s.replication, s.min_insync_replicas, s.event_retention_ms) == (
        replication, insync, retention)
    assert int(s.event_config()["retention.ms"]) == retention
