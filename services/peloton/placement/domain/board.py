"""What the placement service knows between rounds, folded from facts (pure).

Contract:
- `fold` applies JobCreated (task specs), TasksAdmitted (runs to place), PlacementMade and
  PlacementRejected (its own decisions and hostmgr's refusals), TaskLaunchRequested
  (a placement has reached its host), TaskStateChanged (runs that ended leave the queue)
  and OfferReceived (hosts' free resources). Idempotent: every record may come twice.
- `next_round(now_ms)` runs the engine over the queue when something changed since the
  last round and returns PlacementMade / PlacementFailed events (already folded).
- A host's free resources for a round are its latest offer minus the placements made on
  it that hostmgr has not answered yet (in flight). An offer that already counts such a
  placement makes this view briefly conservative, never optimistic, so hostmgr's
  re-validation rejects little.
- Cost per round: the engine keeps one `HostTable` between rounds; a round recomputes the
  views of the hosts whose offer or in-flight placements changed since the last one and
  updates their rows (a host joining or leaving rebuilds the table), instead of turning
  every host's offer into a view again. A task's request is built once while it waits
  (and dropped when its run reaches its host or ends).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from typing import Any, NamedTuple

from peloton.model.constraint import parse_constraint
from peloton.model.event import Event
from peloton.model.ids import task_id as make_task_id
from peloton.model.resources import Resources
from peloton.placement.domain.engine import DEFAULT_CONFIG, place
from peloton.placement.domain.hostindex import HostTable
from peloton.placement.domain.types import HostView, Strategy, TaskRequest

__all__ = ["PlacementBoard"]

RunKey = tuple[str, int, int]
_ENDED = {"SUCCEEDED", "FAILED", "LOST", "KILLED", "KILLING"}
_MAX_ROUND = 20_000


class PlacementBoard:
    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.queue: dict[RunKey, int] = {}  # run -> arrival order (also the dict's order)
        self.inflight: dict[RunKey, tuple[str, Resources, tuple[int, ...]]] = {}
        self.done: set[RunKey] = set()
        self.offers: dict[str, _Offer] = {}
        self.reasons: dict[RunKey, str] = {}
        self.round = 0
        self._arrivals = 0
        self._dirty = False
        self._rank: dict[str, int] = {}  # job -> -priority
        self._constraints: dict[str, Any] = {}
        self._resources: dict[tuple[tuple[str, float], ...], Resources] = {}
        self._last_resources: tuple[dict[str, float] | None, Resources] = (None, Resources())
        self._requests: dict[tuple[str, int], _Request] = {}
        self._specs: dict[tuple[str, str], _SpecParts] = {}
        # the engine's view of the hosts, kept between rounds (see the module docstring)
        self._table: HostTable | None = None
        self._views: dict[str, HostView] = {}
        self._stale: set[str] = set()
        self._on_host: dict[str, dict[RunKey, None]] = {}

    # ---- fold -----------------------------------------------------------------------
    def fold(self, etype: str, body: dict[str, Any]) -> None:
        if etype == "JobCreated":
            job = self.jobs.setdefault(body["job_id"], body)
            self._rank.setdefault(body["job_id"], -job["priority"])
        elif etype == "TasksAdmitted":
            for t in body["tasks"]:
                self._enqueue((t["job_id"], t["instance"], t["run"]))
        elif etype == "PlacementMade":
            for p in body["placements"]:
                key = (p["job_id"], p["instance"], p["run"])
                self.queue.pop(key, None)
                if key not in self.done:
                    self._set_inflight(key, (p["host"], self._resources_of(p["resources"]),
                                             tuple(p["ports"].values())))
        elif etype == "PlacementRejected":
            for r in body["rejections"]:
                key = (r["job_id"], r["instance"], r["run"])
                self._drop_inflight(key)
                self.done.discard(key)
                self._enqueue(key)
        elif etype == "TaskLaunchRequested":
            for launch in body["launches"]:
                key = (launch["job_id"], launch["instance"], launch["run"])
                self._drop_inflight(key)
                self.done.add(key)
                self._requests.pop(key[:2], None)  # built again if the task runs again
        elif etype == "TaskStateChanged":
            for ch in body["changes"]:
                if ch["state"] in _ENDED:
                    key = (body["job_id"], ch["instance"], ch["run"])
                    self.queue.pop(key, None)
                    self._drop_inflight(key)
                    self.done.add(key)
                    self._requests.pop(key[:2], None)
        elif etype == "OfferReceived":
            for offer in body["offers"]:
                self.offers[offer["host"]] = _Offer(
                    offer, self._resources_of(offer["free"]),
                    self._resources_of(offer["capacity"]))
                self._stale.add(offer["host"])
            self._dirty = True

    def _enqueue(self, key: RunKey) -> None:
        if key in self.done or key in self.inflight or key in self.queue:
            return
        self._arrivals += 1
        self.queue[key] = self._arrivals
        self._dirty = True

    def _set_inflight(self, key: RunKey, entry: tuple[str, Resources, tuple[int, ...]]) -> None:
        old = self.inflight.get(key)
        if old is not None and old[0] != entry[0]:
            self._drop_inflight(key)
        self.inflight[key] = entry
        self._on_host.setdefault(entry[0], {})[key] = None
        self._stale.add(entry[0])

    def _drop_inflight(self, key: RunKey) -> None:
        old = self.inflight.pop(key, None)
        if old is None:
            return
        host = old[0]
        runs = self._on_host.get(host)
        if runs is not None:
            runs.pop(key, None)
            if not runs:
                del self._on_host[host]
        self._stale.add(host)

    def _resources_of(self, values: dict[str, float]) -> Resources:
        """`Resources.from_mapping`, memoised: a few shapes recur in every event (and the
        placements of one spec in this board's own events share one mapping)."""
        if values is self._last_resources[0]:
            return self._last_resources[1]
        key = tuple(values.items())
        res = self._resources.get(key)
        if res is None:
            if len(self._resources) > 100_000:
                self._resources.clear()
            res = self._resources[key] = Resources.from_mapping(values)
        self._last_resources = (values, res)
        return res

    # ---- decide ---------------------------------------------------------------------
    def next_round(self, now_ms: int) -> list[Event]:
        if not self._dirty or not self.queue:
            return []
        self._dirty = False
        keys = self._in_order()[:_MAX_ROUND]
        known = [k for k in keys if k[0] in self.jobs]
        requests = [self._request(k) for k in known]
        result = place(self._host_table(), requests)
        by_task = {r.task_id: k for r, k in zip(requests, known, strict=True)}
        self.round += 1
        events: list[Event] = []
        placements = []
        offers = self.offers
        for p in result.placements:
            key = by_task[p.task_id]
            placements.append({"job_id": key[0], "instance": key[1], "run": key[2],
                               "host": p.host, "incarnation": offers[p.host].body["incarnation"],
                               "resources": self._requests[key[:2]].spec_resources,
                               "ports": dict(p.ports)})
        if placements:
            ev = Event("PlacementMade", str(self.round),
                       {"at": now_ms, "round": self.round, "placements": placements})
            self.fold(ev.type, ev.body)
            events.append(ev)
        failed = []
        for tid, reason in sorted(result.unplaced.items()):
            key = by_task[tid]
            if self.reasons.get(key) != reason:
                self.reasons[key] = reason
                failed.append({"job_id": key[0], "instance": key[1], "run": key[2],
                               "reason": reason})
        if failed:
            events.append(Event("PlacementFailed", str(self.round),
                                {"at": now_ms, "round": self.round, "tasks": failed}))
        return events

    def _in_order(self) -> list[RunKey]:
        """Queued runs, higher job priority first, then by arrival. The queue's dict order
        is its arrival order (`_enqueue` appends with a rising counter), so a stable sort
        by priority alone suffices, and none at all when every job has the same one."""
        keys = list(self.queue)
        ranks = list(map(self._rank.get, map(_JOB, keys), repeat(0)))
        if ranks and min(ranks) != max(ranks):
            keys = [keys[i] for i in sorted(range(len(keys)), key=ranks.__getitem__)]
        return keys

    def _spec(self, key: RunKey) -> dict[str, Any]:
        job = self.jobs[key[0]]
        spec: dict[str, Any] = job["instance_tasks"].get(str(key[1]), job["default_task"])
        return spec

    def _request(self, key: RunKey) -> TaskRequest:
        """The run's task request (the same for every run of an instance: built once)."""
        cached = self._requests.get(key[:2])
        if cached is None:
            cached = self._requests[key[:2]] = self._build_request(key)
        return cached.request

    def _build_request(self, key: RunKey) -> _Request:
        job = self.jobs[key[0]]
        parts = self._spec_parts(key)
        in_gang = job["gang_size"] > 1 and key[1] < job["gang_size"]
        return _Request(TaskRequest(
            make_task_id(key[0], key[1]), key[0], parts.resources, parts.ports,
            parts.constraint, parts.labels, f"{key[0]}/gang" if in_gang else None,
            job["gang_size"] if in_gang else 1, parts.strategy, job["revocable"],
            job["priority"]), parts.spec_resources)

    def _spec_parts(self, key: RunKey) -> _SpecParts:
        """The parsed parts of the run's task spec, shared by every task with that spec
        (shared objects also let the engine group identical tasks cheaply)."""
        job = self.jobs[key[0]]
        instance = str(key[1])
        which = (key[0], instance if instance in job["instance_tasks"] else "")
        parts = self._specs.get(which)
        if parts is None:
            spec = self._spec(key)
            raw = spec["constraint_json"]
            constraint = None
            if raw:
                constraint = self._constraints.get(raw)
                if constraint is None:
                    constraint = self._constraints[raw] = parse_constraint(json.loads(raw))
            parts = self._specs[which] = _SpecParts(
                Resources.from_mapping(spec["resources"]),
                tuple(p.partition(":")[0] for p in spec["ports"]), constraint,
                dict(spec["labels"]), Strategy(job["placement_strategy"]), spec["resources"])
        return parts

    # ---- the engine's host table ----------------------------------------------------
    def _host_table(self) -> HostTable:
        """The hosts for this round: the views of hosts whose offer or in-flight placements
        changed are recomputed and their rows updated; a host joining or leaving (or the
        first round) builds the table anew."""
        changed: list[HostView] = []
        rebuild = self._table is None
        for name in self._stale:
            view = self._view(name)
            if view is None:
                rebuild |= self._views.pop(name, None) is not None
                continue
            rebuild |= name not in self._views
            self._views[name] = view
            changed.append(view)
        self._stale.clear()
        if rebuild or self._table is None:
            self._table = HostTable(list(self._views.values()))
            key = DEFAULT_CONFIG.failure_domain_key
            self._table.warm_up((key,) if key else ())
        else:
            self._table.update(changed)
        return self._table

    def _view(self, name: str) -> HostView | None:
        """The host's latest offer minus its in-flight placements; None if unavailable."""
        offer = self.offers.get(name)
        if offer is None or not offer.body["available"]:
            return None
        runs = self._on_host.get(name)
        if not runs:
            return HostView(name, offer.capacity, offer.free.clamp_non_negative(),
                            labels=offer.labels, task_label_counts=offer.label_counts,
                            ports_free=offer.ports_free())
        pending = Resources()
        label_counts = dict(offer.label_counts)
        in_flight_ports: set[int] = set()
        for key in runs:
            _, res, ports = self.inflight[key]
            pending = pending + res
            in_flight_ports.update(ports)
            label = f"peloton.job_id={key[0]}"
            label_counts[label] = label_counts.get(label, 0) + 1
        return HostView(name, offer.capacity, (offer.free - pending).clamp_non_negative(),
                        labels=offer.labels, task_label_counts=label_counts,
                        ports_free=offer.ports_free(in_flight_ports))


_JOB = itemgetter(0)


@dataclass(frozen=True, slots=True)
class _SpecParts:
    resources: Resources
    ports: tuple[str, ...]
    constraint: Any
    labels: dict[str, str]
    strategy: Strategy
    spec_resources: dict[str, float]
    """The spec's own resources mapping, as PlacementMade carries it."""


class _Request(NamedTuple):
    request: TaskRequest
    spec_resources: dict[str, float]


class _Offer:
    """A host's latest offer, with the parts every view of it shares (read-only)."""

    __slots__ = ("body", "free", "capacity", "labels", "label_counts", "_ports_free")

    def __init__(self, body: dict[str, Any], free: Resources, capacity: Resources) -> None:
        self.body = body
        self.free = free
        self.capacity = capacity
        self.labels: dict[str, str] = dict(body["labels"])
        self.label_counts: dict[str, int] = dict(body["task_label_counts"])
        self._ports_free: tuple[tuple[int, int], ...] | None = None

    def ports_free(self, also_used: set[int] | None = None) -> tuple[tuple[int, int], ...]:
        """Free port ranges: the offer's range minus its used ports and ``also_used``."""
        body = self.body
        if also_used:
            return _free_ranges(body["port_range_begin"], body["port_range_end"],
                                set(body["used_ports"]) | also_used)
        if self._ports_free is None:
            self._ports_free = _free_ranges(body["port_range_begin"], body["port_range_end"],
                                            set(body["used_ports"]))
        return self._ports_free


def _free_ranges(begin: int, end: int, used: set[int]) -> tuple[tuple[int, int], ...]:
    ranges = []
    start = begin
    for port in sorted(p for p in used if begin <= p <= end):
        if port > start:
            ranges.append((start, port - 1))
        start = port + 1
    if start <= end:
        ranges.append((start, end))
    return tuple(ranges)
