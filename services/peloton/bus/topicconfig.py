"""How `ensure_topics` creates topics: replication and retention, from the environment.

- PELOTON_TOPIC_REPLICATION: replication factor of every topic (default 1: the dev broker;
  3 in production).
- PELOTON_TOPIC_MIN_INSYNC_REPLICAS: `min.insync.replicas` of every topic (default: the
  broker's). With acks=all producers (PELOTON_BROKER_KIND=kafka), replication 3 and 2 here
  a write survives the loss of one broker.
- PELOTON_EVENT_RETENTION_MS: `retention.ms` of the event topics (the catalog). Default -1,
  kept forever: every service rebuilds its state from its newest snapshot plus the log
  after it, and the read model from the whole log, so an event may be deleted only once
  every consumer's snapshot (and the read model's store) covers it. Set a finite value
  only knowing that; it must stay far above the snapshot interval.
- PELOTON_SNAPSHOT_RETENTION_MS: `retention.ms` of the snapshot topics (time-based
  deletion, small segments so old snapshots really go; default 6 h, far above the
  snapshot interval, so the newest complete snapshot is always kept; see
  `peloton.bus.catalog`).

The dev broker gets no topic configs (it stores them and ignores them). Settings apply
when a topic is created: changing retention of an existing topic is the operator's
`kafka-configs --alter`, and its replication a partition reassignment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from peloton.bus.envint import env_int

__all__ = ["TopicSettings", "TopicConfigError", "from_env", "SNAPSHOT_RETENTION_MS"]

SNAPSHOT_RETENTION_MS = 6 * 3600 * 1000


class TopicConfigError(ValueError):
    """A topic setting in the environment is invalid (the message names it)."""


@dataclass(frozen=True, slots=True)
class TopicSettings:
    replication: int = 1
    min_insync_replicas: int | None = None
    event_retention_ms: int = -1
    snapshot_retention_ms: int = SNAPSHOT_RETENTION_MS

    def event_config(self) -> dict[str, str]:
        """Topic configs of an event (catalog) topic."""
        config = {"cleanup.policy": "delete", "retention.ms": str(self.event_retention_ms)}
        return config | self._shared()

    def snapshot_config(self) -> dict[str, str]:
        """Topic configs of a snapshot topic."""
        return {"cleanup.policy": "delete", "retention.ms": str(self.snapshot_retention_ms),
                "segment.ms": str(600 * 1000), "max.message.bytes": str(1 << 20),
                **self._shared()}

    def _shared(self) -> dict[str, str]:
        if self.min_insync_replicas is None:
            return {}
        return {"min.insync.replicas": str(self.min_insync_replicas)}


def from_env(env: Mapping[str, str] | None = None) -> TopicSettings:
    env = os.environ if env is None else env
    replication = env_int(env, "PELOTON_TOPIC_REPLICATION", 1, 1, TopicConfigError)
    min_insync = env_int(env, "PELOTON_TOPIC_MIN_INSYNC_REPLICAS", None, 1,
                         TopicConfigError)
    event_retention = env_int(env, "PELOTON_EVENT_RETENTION_MS", -1, -1, TopicConfigError)
    snapshot_retention = env_int(env, "PELOTON_SNAPSHOT_RETENTION_MS", SNAPSHOT_RETENTION_MS,
                                 60_000, TopicConfigError)
    assert replication is not None and event_retention is not None
    assert snapshot_retention is not None
    if min_insync is not None and min_insync > replication:
        raise TopicConfigError(f"PELOTON_TOPIC_MIN_INSYNC_REPLICAS ({min_insync}) exceeds "
                               f"PELOTON_TOPIC_REPLICATION ({replication}): no write "
                               f"could succeed")
    if event_retention == 0:
        raise TopicConfigError("PELOTON_EVENT_RETENTION_MS: 0 would delete every event "
                               "at once (-1 keeps them forever)")
    return TopicSettings(replication, min_insync, event_retention, snapshot_retention)
