"""The topic catalog: every topic, its key and the events it carries, declared once.

Services, the read model, the API, tests and the docs all read this table; no topic name
is spelled anywhere else. A topic may carry several event types (each record says its own
type through its schema fingerprint); the key keeps one entity's events in order.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Topic", "TOPICS", "topic", "topic_for_event", "DEAD_LETTER"]


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    key: str
    partitions: int
    events: tuple[str, ...]
    public: bool = False
    doc: str = ""


TOPICS: tuple[Topic, ...] = (
    Topic("job-submitted", "job_id", 4, ("JobSubmitted",), public=True,
          doc="teams submit jobs here (any Kafka client)"),
    Topic("job-kill-requested", "job_id", 4, ("JobKillRequested",), public=True,
          doc="kill a job or some of its instances"),
    Topic("job-events", "job_id", 4,
          ("JobCreated", "JobRejected", "JobStateChanged", "TaskStateChanged"),
          doc="jobmgr's facts about a job and its tasks, in order per job (one key, one "
              "partition), so no consumer sees a task change before its job"),
    Topic("tasks-admitted", "pool", 4, ("TasksAdmitted", "AdmissionDeferred"),
          doc="resmgr admission decisions"),
    Topic("entitlement-updated", "cluster", 1, ("EntitlementUpdated",),
          doc="resmgr entitlement cycles"),
    Topic("placement-made", "round", 4, ("PlacementMade", "PlacementFailed"),
          doc="placement engine rounds"),
    Topic("placement-rejected", "host", 4, ("PlacementRejected",),
          doc="hostmgr refusals of stale placements"),
    Topic("task-launch-requested", "host", 4, ("TaskLaunchRequested",),
          doc="hostmgr to one agent"),
    Topic("task-kill-requested", "host", 4, ("TaskKillRequested",),
          doc="jobmgr to one agent"),
    Topic("host-registered", "host", 4, ("HostRegistered", "HostStatusReported"),
          doc="agents' registrations and heartbeats"),
    Topic("task-status-reported", "host", 4, ("TaskStatusReported",),
          doc="agents' observations of task runs"),
    Topic("offer-received", "host", 4, ("OfferReceived", "HostLost"),
          doc="hostmgr's view of hosts for placement and resmgr"),
    Topic("dead-letters", "source_topic", 1, ("DeadLetterRecorded",),
          doc="records a service could not decode or validate, with the reason"),
    Topic("respool-requested", "pool", 1,
          ("ResourcePoolCreateRequested", "ResourcePoolUpdateRequested",
           "ResourcePoolDeleteRequested"), public=True,
          doc="create, update or delete resource pools (one partition: decided in order)"),
    Topic("respool-events", "pool", 1,
          ("ResourcePoolCreated", "ResourcePoolUpdated", "ResourcePoolDeleted",
           "ResourcePoolRequestRejected", "TasksPreempted"),
          doc="resmgr's facts about pools: the tree's changes (one partition, so replay "
              "rebuilds the tree in order), refused requests, and preemptions per pool"),
)

DEAD_LETTER = "dead-letters"
_BY_NAME = {t.name: t for t in TOPICS}
_BY_EVENT = {e: t for t in TOPICS for e in t.events}


def topic(name: str) -> Topic:
    return _BY_NAME[name]


def topic_for_event(event_type: str) -> Topic:
    """The one topic an event type is published to."""
    return _BY_EVENT[event_type]
