"""The topic catalog: every topic, its key and the events it carries, declared once.

Services, the read model, the API, tests and the docs all read this table; no topic name
is spelled anywhere else. A topic may carry several event types (each record says its own
type through its schema fingerprint); the key keeps one entity's events in order.

Keys: the shell sets every record's Kafka key from the catalog, never from the core (see
`peloton.bus.keys`). By default an event's key is the body field named by its topic's
`key`; `keys` overrides that per event type with a `Field` (another field, a nested one
such as `pool.path`, or a list's item such as `tasks.0.job_id`: the producer then puts in
one record only items whose keys share its partition) or a `Batch` rule. A batch event
that spans several entities (an OfferReceived lists many hosts, a PlacementRejected many
runs) has no one field: the batch rule gives it one constant key, so every batch of that
type lands on one partition in the order it was decided (a later batch supersedes an
earlier one only if read after it).

Snapshots (`SNAPSHOT_TOPICS`, one per service that rebuilds state from the log): 1
partition, written only by the service itself (see `peloton.bus.snapshots`). They are not
events (no Avro schema, not in `TOPICS`, never read by the read model). Production:
`cleanup.policy=delete` with `retention.ms` a few hours (far above `snapshot_interval_s`,
so the newest complete snapshot is always kept) and a small `segment.ms`/`segment.bytes`
so old snapshots really go; or `compact` (keys are `chunk-<i>` and `manifest`, so the
topic keeps about one snapshot), at the cost that a writer that dies mid-snapshot may leave
none readable (the service then falls back to a full replay, with a warning).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from peloton.bus.partitions import configured

__all__ = ["Topic", "Field", "Batch", "KeyRule", "TOPICS", "SNAPSHOT_TOPICS",
           "INTERNAL_TOPICS", "ALL_TOPICS", "topic", "topic_for_event", "key_rule",
           "snapshot_topic", "DEAD_LETTER", "partitioned_for"]


@dataclass(frozen=True, slots=True)
class Field:
    """The key is the value of one body field (`pool.path` names a nested field)."""

    path: str


@dataclass(frozen=True, slots=True)
class Batch:
    """The key is one constant for every batch of this event type (see the module doc)."""

    key: str
    why: str


KeyRule = Field | Batch


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    key: str
    partitions: int
    events: tuple[str, ...]
    public: bool = False
    doc: str = ""
    keys: Mapping[str, KeyRule] = field(default_factory=dict)


_OFFERS = Batch("offers", "one batch lists every host with free resources; batches must "
                "stay in order (a newer offer of a host replaces the older)")

TOPICS: tuple[Topic, ...] = (
    Topic("job-submitted", "job_id", 4, ("JobSubmitted",), public=True,
          doc="teams submit jobs here (any Kafka client)"),
    Topic("job-kill-requested", "job_id", 4, ("JobKillRequested", "JobStartRequested"),
          public=True, doc="kill (stop) a job or some of its instances, or start a "
                           "stopped long-running job or instances again (one partition "
                           "per job: kills and starts stay in order)"),
    Topic("job-events", "job_id", 4,
          ("JobCreated", "JobRejected", "JobStateChanged", "TaskStateChanged",
           "TaskHealthChanged", "JobSpecChanged", "UpdateStateChanged", "JobUpdateRejected"),
          doc="jobmgr's facts about a job and its tasks, in order per job (one key, one "
              "partition), so no consumer sees a task change before its job"),
    Topic("job-update-requested", "job_id", 4, ("JobUpdateRequested",
                                                 "UpdateCommandRequested"), public=True,
          doc="roll a job to a new config; pause, resume, abort or roll back its update"),
    Topic("tasks-admitted", "job_id", 4, ("TasksAdmitted", "AdmissionDeferred"),
          doc="resmgr admission decisions (a batch's tasks are of jobs of one partition; "
              "keyed by its first task's job, so each job's admissions land in the "
              "partition of its job-events)",
          keys={e: Field("tasks.0.job_id") for e in ("TasksAdmitted", "AdmissionDeferred")}),
    Topic("entitlement-updated", "cluster", 1, ("EntitlementUpdated",),
          doc="resmgr entitlement cycles",
          keys={"EntitlementUpdated": Batch("cluster", "one cycle covers every pool")}),
    Topic("placement-made", "job_id", 4, ("PlacementMade", "PlacementFailed"),
          doc="placement engine rounds (a round is written one record per partition of "
              "its jobs, keyed by its first item's job, so each job's placements land in "
              "the partition of its job-events)",
          keys={"PlacementMade": Field("placements.0.job_id"),
                "PlacementFailed": Field("tasks.0.job_id")}),
    Topic("placement-rejected", "host", 4, ("PlacementRejected",),
          doc="hostmgr refusals of stale placements",
          keys={"PlacementRejected": Batch(
              "rejected", "one batch refuses runs on several hosts in one tick")}),
    Topic("task-launch-requested", "host", 4, ("TaskLaunchRequested",),
          doc="hostmgr to one agent"),
    Topic("task-kill-requested", "host", 4, ("TaskKillRequested", "TaskReconcileRequested"),
          doc="jobmgr to one agent: kills, and questions about runs with no news"),
    Topic("host-registered", "host", 4, ("HostRegistered", "HostStatusReported"),
          doc="agents' registrations and heartbeats"),
    Topic("task-status-reported", "host", 4, ("TaskStatusReported",),
          doc="agents' observations of task runs"),
    Topic("offer-received", "host", 4, ("OfferReceived", "HostLost"),
          doc="hostmgr's view of hosts for placement and resmgr",
          keys={"OfferReceived": _OFFERS}),
    Topic("host-maintenance-requested", "host", 4, ("HostMaintenanceRequested",),
          public=True, doc="start, complete or cancel a host's maintenance"),
    Topic("host-events", "host", 4, ("HostStateChanged", "HostMaintenanceRejected",
                                      "HostDrainProgressed"),
          doc="hostmgr's facts about hosts: maintenance state and presence changes (the "
              "host list, labels and states), refused maintenance requests; and jobmgr's "
              "account of each drain (what moved, why the rest waits)"),
    Topic("dead-letters", "source_topic", 1, ("DeadLetterRecorded",),
          doc="records a service could not decode or validate, with the reason"),
    Topic("respool-requested", "pool", 1,
          ("ResourcePoolCreateRequested", "ResourcePoolUpdateRequested",
           "ResourcePoolDeleteRequested"), public=True,
          doc="create, update or delete resource pools (one partition: decided in order)",
          keys={e: Field("path") for e in ("ResourcePoolCreateRequested",
                                           "ResourcePoolUpdateRequested",
                                           "ResourcePoolDeleteRequested")}),
    Topic("respool-events", "pool", 1,
          ("ResourcePoolCreated", "ResourcePoolUpdated", "ResourcePoolDeleted",
           "ResourcePoolRequestRejected", "TasksPreempted"),
          doc="resmgr's facts about pools: the tree's changes (one partition, so replay "
              "rebuilds the tree in order), refused requests, and preemptions per pool",
          keys={"ResourcePoolCreated": Field("pool.path"),
                "ResourcePoolUpdated": Field("path"), "ResourcePoolDeleted": Field("path"),
                "ResourcePoolRequestRejected": Field("path")}),
)

SNAPSHOT_SERVICES = ("jobmgr", "resmgr", "placement", "hostmgr")
SNAPSHOT_TOPICS: tuple[Topic, ...] = tuple(
    Topic(f"{s}-snapshots", "chunk", 1, (),
          doc=f"{s}'s core snapshots: chunks, then a manifest naming them")
    for s in SNAPSHOT_SERVICES)

#: Internal inbox topics of partitioned services (`peloton.bus.routing`): a router
#: re-publishes the parts of other topics' facts there, split by the service's shard key,
#: so each instance reads only the partitions it owns. They carry events declared on
#: public topics (not in `topic_for_event`), are read by their service alone (never by the
#: read model), and must have the partition count of the service's own topics (checked by
#: `peloton.bus.routing.check_copartitioned`).
INTERNAL_TOPICS: tuple[Topic, ...] = (
    Topic("jobmgr-inbox", "job_id", 4,
          ("PlacementRejected", "TaskLaunchRequested", "TaskStatusReported", "HostLost",
           "TasksPreempted", "PlacementMade", "PlacementFailed"),
          doc="the job manager's share of other services' facts, split by job (internal: "
              "written by the job router, read by the job manager instance that owns the "
              "partition; placements are no longer routed, as placement-made is keyed by "
              "job, nor launches and statuses, read whole by every partition since "
              "session 35, but parts a router wrote before an upgrade are still read)"),
    Topic("hostmgr-inbox", "host", 4,
          ("PlacementMade", "PlacementRejected", "OfferReceived", "HostLost"),
          doc="the host manager's refusals and offers, and lost hosts, split by host "
              "(internal: written by the host router, read by the host manager instance "
              "that owns the partition; placements are no longer routed, each shard reads "
              "placement-made whole, but parts a router wrote before an upgrade are still "
              "read)"),
)
# partition counts are configuration (`peloton.bus.partitions`, PELOTON_TOPIC_PARTITIONS):
# the numbers above are the defaults
_DEFAULTS = (TOPICS, INTERNAL_TOPICS)
TOPICS, INTERNAL_TOPICS = configured(_DEFAULTS)


def partitioned_for(env: Mapping[str, str]) -> tuple[Topic, ...]:
    """The event topics and internal inboxes with the partition counts a process started
    with environment `env` has (the catalog's defaults, overridden by its
    PELOTON_TOPIC_PARTITIONS): what a parent that creates a cluster's topics must use
    for the processes it starts, whatever its own environment says."""
    topics, internal = configured(_DEFAULTS, env)
    return (*topics, *internal)
#: every topic the shells create: events, internal inboxes, snapshots
ALL_TOPICS: tuple[Topic, ...] = (*TOPICS, *INTERNAL_TOPICS, *SNAPSHOT_TOPICS)

DEAD_LETTER = "dead-letters"
_BY_NAME = {t.name: t for t in (*TOPICS, *INTERNAL_TOPICS)}
_BY_EVENT = {e: t for t in TOPICS for e in t.events}


def topic(name: str) -> Topic:
    return _BY_NAME[name]


def topic_for_event(event_type: str) -> Topic:
    """The one topic an event type is published to."""
    return _BY_EVENT[event_type]


def key_rule(event_type: str) -> KeyRule:
    """How a record of this event type is keyed (see the module doc)."""
    t = _BY_EVENT[event_type]
    return t.keys.get(event_type, Field(t.key))


def snapshot_topic(service: str) -> str:
    """The snapshot topic of a service (KeyError if the service takes no snapshots)."""
    name = f"{service}-snapshots"
    if all(t.name != name for t in SNAPSHOT_TOPICS):
        raise KeyError(service)
    return name
