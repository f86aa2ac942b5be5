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
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from peloton.model.constraint import parse_constraint
from peloton.model.event import Event
from peloton.model.ids import task_id as make_task_id
from peloton.model.resources import Resources
from peloton.placement.domain.engine import place
from peloton.placement.domain.types import HostView, Strategy, TaskRequest

__all__ = ["PlacementBoard"]

RunKey = tuple[str, int, int]
_ENDED = {"SUCCEEDED", "FAILED", "LOST", "KILLED", "KILLING"}
_MAX_ROUND = 20_000


@dataclass(slots=True)
class _Offer:
    body: dict[str, Any]
    free: Resources


class PlacementBoard:
    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.queue: dict[RunKey, int] = {}  # run -> arrival order
        self.inflight: dict[RunKey, tuple[str, Resources, tuple[int, ...]]] = {}
        self.done: set[RunKey] = set()
        self.offers: dict[str, _Offer] = {}
        self.reasons: dict[RunKey, str] = {}
        self.round = 0
        self._arrivals = 0
        self._dirty = False
        self._constraints: dict[str, Any] = {}

    # ---- fold -----------------------------------------------------------------------
    def fold(self, etype: str, body: dict[str, Any]) -> None:
        if etype == "JobCreated":
            self.jobs.setdefault(body["job_id"], body)
        elif etype == "TasksAdmitted":
            for t in body["tasks"]:
                self._enqueue((t["job_id"], t["instance"], t["run"]))
        elif etype == "PlacementMade":
            for p in body["placements"]:
                key = (p["job_id"], p["instance"], p["run"])
                self.queue.pop(key, None)
                if key not in self.done:
                    self.inflight[key] = (p["host"], Resources.from_mapping(p["resources"]),
                                          tuple(p["ports"].values()))
        elif etype == "PlacementRejected":
            for r in body["rejections"]:
                key = (r["job_id"], r["instance"], r["run"])
                self.inflight.pop(key, None)
                self.done.discard(key)
                self._enqueue(key)
        elif etype == "TaskLaunchRequested":
            for launch in body["launches"]:
                key = (launch["job_id"], launch["instance"], launch["run"])
                self.inflight.pop(key, None)
                self.done.add(key)
        elif etype == "TaskStateChanged":
            for ch in body["changes"]:
                if ch["state"] in _ENDED:
                    key = (body["job_id"], ch["instance"], ch["run"])
                    self.queue.pop(key, None)
                    self.inflight.pop(key, None)
                    self.done.add(key)
        elif etype == "OfferReceived":
            for offer in body["offers"]:
                self.offers[offer["host"]] = _Offer(offer, Resources.from_mapping(offer["free"]))
            self._dirty = True

    def _enqueue(self, key: RunKey) -> None:
        if key in self.done or key in self.inflight or key in self.queue:
            return
        self._arrivals += 1
        self.queue[key] = self._arrivals
        self._dirty = True

    # ---- decide ---------------------------------------------------------------------
    def next_round(self, now_ms: int) -> list[Event]:
        if not self._dirty or not self.queue:
            return []
        self._dirty = False
        keys = sorted(self.queue, key=lambda k: self._order(k))[:_MAX_ROUND]
        requests = [self._request(k) for k in keys if k[0] in self.jobs]
        hosts = self._hosts()
        result = place(hosts, requests)
        by_task = {make_task_id(k[0], k[1]): k for k in keys}
        self.round += 1
        events: list[Event] = []
        placements = []
        offers = {h.name: self.offers[h.name].body for h in hosts}
        for p in result.placements:
            key = by_task[p.task_id]
            spec = self._spec(key)
            placements.append({"job_id": key[0], "instance": key[1], "run": key[2],
                               "host": p.host, "incarnation": offers[p.host]["incarnation"],
                               "resources": spec["resources"], "ports": dict(p.ports)})
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

    def _order(self, key: RunKey) -> tuple[int, int]:
        job = self.jobs.get(key[0])
        return (-(job["priority"] if job else 0), self.queue[key])

    def _spec(self, key: RunKey) -> dict[str, Any]:
        job = self.jobs[key[0]]
        spec: dict[str, Any] = job["instance_tasks"].get(str(key[1]), job["default_task"])
        return spec

    def _request(self, key: RunKey) -> TaskRequest:
        job = self.jobs[key[0]]
        spec = self._spec(key)
        raw = spec["constraint_json"]
        constraint = None
        if raw:
            constraint = self._constraints.get(raw)
            if constraint is None:
                constraint = self._constraints[raw] = parse_constraint(json.loads(raw))
        in_gang = job["gang_size"] > 1 and key[1] < job["gang_size"]
        return TaskRequest(
            task_id=make_task_id(key[0], key[1]), job_id=key[0],
            resources=Resources.from_mapping(spec["resources"]),
            ports=tuple(p.partition(":")[0] for p in spec["ports"]), constraint=constraint,
            labels=dict(spec["labels"]),
            gang_id=f"{key[0]}/gang" if in_gang else None,
            gang_size=job["gang_size"] if in_gang else 1,
            strategy=Strategy(job["placement_strategy"]), revocable=job["revocable"],
            priority=job["priority"])

    def _hosts(self) -> list[HostView]:
        pending: dict[str, Resources] = {}
        ports: dict[str, set[int]] = {}
        counts: dict[str, dict[str, int]] = {}
        for key, (host, res, used) in self.inflight.items():
            pending[host] = pending.get(host, Resources()) + res
            ports.setdefault(host, set()).update(used)
            label = f"peloton.job_id={key[0]}"
            per_host = counts.setdefault(host, {})
            per_host[label] = per_host.get(label, 0) + 1
        views = []
        for name in sorted(self.offers):
            offer = self.offers[name]
            body = offer.body
            if not body["available"]:
                continue
            free = (offer.free - pending.get(name, Resources())).clamp_non_negative()
            label_counts = dict(body["task_label_counts"])
            for label, n in counts.get(name, {}).items():
                label_counts[label] = label_counts.get(label, 0) + n
            used = set(body["used_ports"]) | ports.get(name, set())
            views.append(HostView(
                name=name, capacity=Resources.from_mapping(body["capacity"]), free=free,
                labels=dict(body["labels"]), task_label_counts=label_counts,
                ports_free=_free_ranges(body["port_range_begin"], body["port_range_end"],
                                        used)))
        return views


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
