"""Every Prometheus metric the services expose, defined once (prometheus_client).

Names and units follow the Prometheus conventions: base units (seconds, bytes), counters
end in `_total`, durations are histograms in `_seconds`. All live in the default registry
of the process (with prometheus_client's process_* and python_* collectors), which
`peloton.bus.health` serves at /metrics (the API serves it on its own port).

Labels:
- `service`: the service kind (`service_label`: "agent-h1" -> "agent"); the instance is
  the scrape target's `instance` label, so dashboards aggregate over replicas.
- `topic`, `partition`: Kafka topic and partition.
- `pool`, `resource`, `unit`: a resource pool path, a resource kind (cpu, memory, disk,
  gpu) and its unit (memory and disk are converted from the scheduler's MB to bytes), as
  kube-state-metrics does.
- `reason`: a bounded pending-reason class (`reason_class`), never the free text (it
  carries numbers and ids, which would make one series per task).

Who records what (always the shells, never the pure `domain/` cores):
- `peloton.bus.service` (every scheduling service and the agent): events consumed, batch
  handling latency, events published, consumer lag, leader state, snapshot age; its
  driver (`peloton.bus.driver`): batches the broker refused.
- `peloton.api.service` (the read-model materializer): events consumed, lag; the API's
  publisher: events published.
- `peloton.resmgr.service`: cycle duration, entitlement and allocation per pool, pending
  tasks by admission reason. `peloton.placement.service`: round duration, pending
  (admitted, not yet placed) tasks by placement reason. `peloton.hostmgr.service`: hosts
  silent during a mass silence (summed over the shards of a process, when scraped).

`GaugeFamily` sets a whole family of labelled gauges at once and removes the label sets
that disappeared (a deleted pool, a reason nobody has any more), so no stale series stay.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

__all__ = [
    "EVENTS_CONSUMED", "EVENTS_PUBLISHED", "HANDLER_SECONDS", "CONSUMER_LAG",
    "RESMGR_CYCLE_SECONDS", "PLACEMENT_ROUND_SECONDS", "POOL_ENTITLEMENT",
    "POOL_ALLOCATION", "PENDING_TASKS", "LEADER", "SNAPSHOT_AGE_SECONDS",
    "HOSTS_SILENCE_HELD", "PLACEMENTS_REFUSED", "PUBLISH_REFUSED", "GaugeFamily",
    "service_label", "reason_class", "resource_samples", "count_published",
    "record_entitlement", "record_pending",
]

disable_created_metrics()  # no *_created series: start times are process_start_time_seconds

_BATCH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                  2.5, 5.0, 10.0, 30.0)
_CYCLE_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                  0.5, 1.0, 2.5, 5.0, 10.0)

EVENTS_CONSUMED = Counter(
    "peloton_events_consumed_total",
    "Records consumed from a topic (handed to the service, including ones a rebuild had "
    "already folded and that are skipped).", ["service", "topic"])
EVENTS_PUBLISHED = Counter(
    "peloton_events_published_total",
    "Records the broker acknowledged, by topic (events, dead letters, snapshots).",
    ["service", "topic"])
HANDLER_SECONDS = Histogram(
    "peloton_handler_duration_seconds",
    "Seconds from a consumed batch handed to the service until it is done: decided, its "
    "events delivered, its positions advanced (includes waiting for the core lock).",
    ["service", "topic"], buckets=_BATCH_BUCKETS)
CONSUMER_LAG = Gauge(
    "peloton_consumer_lag_records",
    "Records in a partition not handled yet: the consumer's high watermark minus the "
    "next offset to handle (sampled every few seconds).", ["service", "topic", "partition"])
RESMGR_CYCLE_SECONDS = Histogram(
    "peloton_resmgr_cycle_duration_seconds",
    "Seconds the resource manager's tick took when it ran an entitlement cycle "
    "(entitlement, preemption, admission).", buckets=_CYCLE_BUCKETS)
PLACEMENT_ROUND_SECONDS = Histogram(
    "peloton_placement_round_duration_seconds",
    "Seconds one placement round took (rounds that had runs to place).",
    buckets=_CYCLE_BUCKETS)
POOL_ENTITLEMENT = Gauge(
    "peloton_pool_entitlement",
    "A pool's entitlement at the resource manager's last cycle (unit label: core, byte, "
    "device).", ["pool", "resource", "unit"])
POOL_ALLOCATION = Gauge(
    "peloton_pool_allocation",
    "A pool's allocation (resources its admitted and running tasks hold) at the resource "
    "manager's last cycle (unit label: core, byte, device).", ["pool", "resource", "unit"])
PENDING_TASKS = Gauge(
    "peloton_pending_tasks",
    "Tasks waiting, by pool and reason class: at the resource manager for admission, at "
    "placement for a host.", ["service", "pool", "reason"])
LEADER = Gauge(
    "peloton_leader",
    "1 while this instance leads (decides and publishes), 0 while it is a standby; "
    "services without leader election always lead.", ["service"])
HOSTS_SILENCE_HELD = Gauge(
    "peloton_hostmgr_hosts_silence_held",
    "Hosts silent past the heartbeat timeout while most of the host manager's hosts are "
    "silent at once, so that it declares them lost only after longer (a lag of its own is "
    "likelier than a mass failure; hostmgr/domain/silence.py); 0 when no mass silence "
    "holds. Summed over the process's shards.")
PLACEMENTS_REFUSED = Counter(
    "peloton_hostmgr_placements_refused_total",
    "Placements the host manager refused (PlacementRejected), by reason class "
    "(hostmgr/domain/hosts.py REFUSAL_CLASSES): how often placement rounds met stale "
    "offers or collided with other engines' rounds.",
    ["reason"])
PUBLISH_REFUSED = Counter(
    "peloton_publish_refused_total",
    "Batches of decided events the broker refused: retriable=true ones are decided again "
    "(a timeout, a partition's leader moving), retriable=false ones have their input "
    "records dead-lettered.", ["service", "retriable"])
SNAPSHOT_AGE_SECONDS = Gauge(
    "peloton_snapshot_age_seconds",
    "Seconds since the newest snapshot this instance wrote or restored was taken (NaN: "
    "none yet).", ["service"])

_MB = 1024 * 1024
_UNITS = {"cpu": ("core", 1.0), "memory": ("byte", _MB), "disk": ("byte", _MB),
          "gpu": ("device", 1.0)}


def service_label(name: str) -> str:
    """The service kind of a shell's name: "agent-h1" -> "agent", "resmgr" -> "resmgr"."""
    return name.split("-", 1)[0]


_NUMBER = re.compile(r"\d+(\.\d+)?")


def reason_class(reason: str | None) -> str:
    """A bounded class of a free-text pending reason: its first clause, up to the first
    ':' (the details after it carry numbers and ids), numbers replaced by N. None or ''
    (no reason said yet) -> "none"."""
    if not reason:
        return "none"
    head = reason.split(";", 1)[0].split(":", 1)[0].strip()
    head = _NUMBER.sub("N", head)
    return head[:80] or "none"


def resource_samples(values: Mapping[str, Any]) -> Iterable[tuple[str, str, float]]:
    """(resource, unit, value in that unit) of a resource dict (MB -> bytes); unknown
    kinds are left out."""
    for kind, amount in values.items():
        unit = _UNITS.get(kind)
        if unit is not None:
            yield kind, unit[0], float(amount) * unit[1]


class GaugeFamily:
    """Sets all series of one labelled gauge at once (for a fixed prefix of labels) and
    removes those not set again."""

    def __init__(self, gauge: Gauge, *prefix: str) -> None:
        self.gauge = gauge
        self.prefix = prefix
        self._set: set[tuple[str, ...]] = set()

    def replace(self, values: Mapping[tuple[str, ...], float]) -> None:
        keys = {(*self.prefix, *k) for k in values}
        for gone in self._set - keys:
            try:
                self.gauge.remove(*gone)
            except KeyError:  # removed by a clear() elsewhere
                pass
        for k, v in values.items():
            self.gauge.labels(*self.prefix, *k).set(v)
        self._set = keys


def count_published(service: str, topics: Iterable[str]) -> None:
    """Count acknowledged records by topic."""
    counts: dict[str, int] = {}
    for t in topics:
        counts[t] = counts.get(t, 0) + 1
    for t, n in counts.items():
        EVENTS_PUBLISHED.labels(service, t).inc(n)


_ENTITLEMENT = GaugeFamily(POOL_ENTITLEMENT)
_ALLOCATION = GaugeFamily(POOL_ALLOCATION)


def record_entitlement(rows: Iterable[Mapping[str, Any]]) -> None:
    """Set the pool gauges from EntitlementUpdated's pool rows (each with "pool",
    "entitlement" and "allocation" resource dicts); pools no longer there disappear."""
    ent: dict[tuple[str, ...], float] = {}
    alloc: dict[tuple[str, ...], float] = {}
    for row in rows:
        pool = str(row["pool"])
        for kind, unit, value in resource_samples(row.get("entitlement") or {}):
            ent[(pool, kind, unit)] = value
        for kind, unit, value in resource_samples(row.get("allocation") or {}):
            alloc[(pool, kind, unit)] = value
    _ENTITLEMENT.replace(ent)
    _ALLOCATION.replace(alloc)


_PENDING: dict[str, GaugeFamily] = {}


def record_pending(service: str, counts: Mapping[tuple[str, str], int]) -> None:
    """Set the pending-task gauges of `service` from counts by (pool, reason class)."""
    family = _PENDING.setdefault(service, GaugeFamily(PENDING_TASKS, service))
    family.replace({k: float(v) for k, v in counts.items()})
