"""Hosts as a placement round sees them: latest offers minus holds (pure).

A host's view is its latest offer (`free` for ordinary tasks, `slack` for revocable ones,
labels, task-label counts, ports) minus the runs that hold resources on it which the
offer does not count yet. A hold, revocable or not, is taken from both `free` and
`slack`: hostmgr validates both kinds against one allocation (its slack is what no run
holds, see hostmgr/domain/hosts.py), so taking it from one pool only would double-book
a host until the next offer; an offer with slack measured otherwise (Peloton's unused
allocations) is then read conservatively, never optimistically.

- A placed run holds its host from PlacementMade until hostmgr answers (its
  TaskLaunchRequested or PlacementRejected) or the run ends: hostmgr allocates only when
  it launches, so no offer counts a placement that was not launched.
- A launched run keeps holding its host until an offer that counts the launch arrives
  (in either order: the offer may arrive before the launch, on another topic). The rule:
  hostmgr makes a launch and the offer that counts it in the same tick, stamped with
  that tick's `at`, and every launch raises the host's `generation`. So an offer counts
  launch L iff `offer.at >= L.at` and `offer.generation > base`, where `base` is the
  generation of the host's latest offer when the run was placed (0 when this board never
  saw the placement). The `at` test leaves out offers made in earlier ticks that arrive
  late; the generation test leaves out the offer the placement was made against even
  when both carry the same millisecond. An offer of a newer incarnation counts it too
  (the host restarted after the launch: the run is gone). Rejected or ended runs hold
  nothing. Until an offer counts it a launch is counted twice at worst (conservative).
- Offers are idempotent and may be redelivered late: an offer older than the one held
  (lower generation and not newer in time) is ignored.
- Room hostmgr holds for a stateful task between its runs (OfferReceived v3 `holds`, one
  per (job, instance)) is in neither `free` nor `slack` of the offer, so no view gives it
  to anyone; `held_view(host, task)` is the view of that host for a run of that task
  only: its hold's room added back. A run of such a task placed or launched there and not
  counted by an offer yet takes from the host's view only what its hold does not cover
  (hostmgr lets it use its hold first), so the room is never counted twice.

Cost per round: one `HostTable` is kept between rounds; only hosts whose offer or holds
changed get their view recomputed and their row updated (a host joining or leaving
rebuilds the table, in host-name order).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

from peloton.model.resources import Resources
from peloton.placement.domain.engine import DEFAULT_CONFIG
from peloton.placement.domain.hostindex import HostTable
from peloton.placement.domain.runbook import RunKey
from peloton.placement.domain.snapshotdata import as_dict, as_list, as_row
from peloton.placement.domain.types import HostView

__all__ = ["HostViews", "Hold", "Offer", "free_ranges"]

_ZERO = Resources()


class Hold(NamedTuple):
    """Resources a run holds on a host that its latest offer does not count yet."""

    host: str
    resources: Resources
    ports: tuple[int, ...]
    revocable: bool
    base: int
    """The host's offer generation when the run was placed (0: unknown)."""
    launched_at: int | None = None
    """The `at` of its TaskLaunchRequested, once seen (then an offer may count it)."""

    def counted_by(self, offer: Offer) -> bool:
        return (self.launched_at is not None and offer.at >= self.launched_at
                and offer.generation > self.base)

    def to_row(self) -> list[Any]:
        return [self.host, self.resources.as_dict(), list(self.ports), self.revocable,
                self.base, self.launched_at]

    @classmethod
    def from_row(cls, row: list[Any]) -> Hold:
        host, res, ports, revocable, base, launched_at = row
        return cls(str(host), Resources.from_mapping(res), tuple(int(p) for p in ports),
                   bool(revocable), int(base), None if launched_at is None else int(launched_at))


class Offer:
    """A host's latest offer, with the parts every view of it shares (read-only)."""

    __slots__ = ("body", "name", "at", "generation", "free", "slack", "capacity", "labels",
                 "label_counts", "holds", "_ports_free")

    def __init__(self, body: dict[str, Any], at: int) -> None:
        self.body = body
        self.name = str(body["host"])
        self.at = at
        self.generation = int(body["generation"])
        self.free = Resources.from_mapping(body["free"])
        self.slack = Resources.from_mapping(body.get("slack"))  # absent (v1): none
        self.capacity = Resources.from_mapping(body["capacity"])
        self.labels: dict[str, str] = dict(body["labels"])
        self.label_counts: dict[str, int] = dict(body["task_label_counts"])
        self.holds: dict[tuple[str, int], Resources] = {  # absent (v1, v2): none
            (str(h["job_id"]), int(h["instance"])): Resources.from_mapping(h["resources"])
            for h in body.get("holds") or ()}
        self._ports_free: tuple[tuple[int, int], ...] | None = None

    @property
    def available(self) -> bool:
        return bool(self.body["available"])

    def ports_free(self, also_used: set[int] | None = None) -> tuple[tuple[int, int], ...]:
        """Free port ranges: the offer's range minus its used ports and ``also_used``."""
        body = self.body
        if also_used:
            return free_ranges(body["port_range_begin"], body["port_range_end"],
                               set(body["used_ports"]) | also_used)
        if self._ports_free is None:
            self._ports_free = free_ranges(body["port_range_begin"], body["port_range_end"],
                                           set(body["used_ports"]))
        return self._ports_free


class HostViews:
    def __init__(self) -> None:
        self.offers: dict[str, Offer] = {}
        self.holds: dict[RunKey, Hold] = {}
        self._on_host: dict[str, dict[RunKey, None]] = {}
        self._table: HostTable | None = None
        self._views: dict[str, HostView] = {}
        self._stale: set[str] = set()
        self.freed = False
        """Set when a hold is dropped (a host may have room now); the board clears it."""

    # ---- facts ----------------------------------------------------------------------
    def offer(self, body: dict[str, Any], at: int) -> bool:
        """An offer of OfferReceived; False if it is older than the one held."""
        name = body["host"]
        old = self.offers.get(name)
        if old is not None and body["generation"] < old.generation and at <= old.at:
            return False
        offer = self.offers[name] = Offer(body, at)
        self._stale.add(name)
        for key in [k for k in self._on_host.get(name, ()) if self.holds[k].counted_by(offer)]:
            self.release(key)
        return True

    def generation(self, host: str) -> int:
        offer = self.offers.get(host)
        return 0 if offer is None else offer.generation

    def hold(self, key: RunKey, hold: Hold) -> None:
        """The run holds `hold` (replacing what it held); a launch hold the host's latest
        offer already counts is not taken."""
        freed, old = self.freed, self.release(key)
        offer = self.offers.get(hold.host)
        if offer is not None and hold.counted_by(offer):
            return
        if old is not None and old.host == hold.host and old.resources == hold.resources:
            self.freed = freed  # the same hold again: no host has more room
        self.holds[key] = hold
        self._on_host.setdefault(hold.host, {})[key] = None
        self._stale.add(hold.host)

    def release(self, key: RunKey) -> Hold | None:
        old = self.holds.pop(key, None)
        if old is None:
            return None
        self.freed = True
        runs = self._on_host.get(old.host)
        if runs is not None:
            runs.pop(key, None)
            if not runs:
                del self._on_host[old.host]
        self._stale.add(old.host)
        return old

    # ---- the engine's host table ----------------------------------------------------
    def table(self) -> HostTable:
        """The hosts for this round (see the module doc)."""
        changed: list[HostView] = []
        rebuild = self._table is None
        for name in sorted(self._stale):
            view = self.view(name)
            if view is None:
                rebuild |= self._views.pop(name, None) is not None
                continue
            rebuild |= name not in self._views
            self._views[name] = view
            changed.append(view)
        self._stale.clear()
        if rebuild or self._table is None:
            self._views = dict(sorted(self._views.items()))
            self._table = HostTable(list(self._views.values()))
            key = DEFAULT_CONFIG.failure_domain_key
            self._table.warm_up((key,) if key else ())
        else:
            self._table.update(changed)
        return self._table

    def view(self, name: str) -> HostView | None:
        """The host's latest offer minus its holds; None if it is not available."""
        offer = self.offers.get(name)
        if offer is None or not offer.available:
            return None
        runs = self._on_host.get(name)
        if not runs:
            return HostView(name, offer.capacity, offer.free.clamp_non_negative(),
                            offer.slack.clamp_non_negative(), labels=offer.labels,
                            task_label_counts=offer.label_counts,
                            ports_free=offer.ports_free())
        pending = _ZERO
        label_counts = dict(offer.label_counts)
        ports: set[int] = set()
        for key in runs:
            hold = self.holds[key]
            own = offer.holds.get(key[:2]) if offer.holds else None
            pending = pending + (hold.resources if own is None
                                 else (hold.resources - own).clamp_non_negative())
            ports.update(hold.ports)
            label = f"peloton.job_id={key[0]}"
            label_counts[label] = label_counts.get(label, 0) + 1
        return HostView(name, offer.capacity, (offer.free - pending).clamp_non_negative(),
                        (offer.slack - pending).clamp_non_negative(), labels=offer.labels,
                        task_label_counts=label_counts, ports_free=offer.ports_free(ports))

    def held_view(self, name: str, task: tuple[str, int]) -> HostView | None:
        """The host's view for a run of `task` (job, instance) only: with the room the
        host's offer holds for that task added back. None if the host is not available
        or holds nothing for the task."""
        offer = self.offers.get(name)
        own = None if offer is None else offer.holds.get(task)
        view = self.view(name) if own is not None else None
        if view is None or own is None:
            return None
        return replace(view, free=view.free + own, slack_free=view.slack_free + own)

    # ---- snapshot -------------------------------------------------------------------
    def to_data(self) -> dict[str, Any]:
        return {"offers": [[o.body, o.at] for _, o in sorted(self.offers.items())],
                "holds": [[*key, *hold.to_row()] for key, hold in self.holds.items()]}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> HostViews:
        views = cls()
        for body, at in as_list(data["offers"], "hosts.offers"):
            offer = Offer(dict(as_dict(body, "an offer")), int(at))
            views.offers[offer.name] = offer
            views._stale.add(offer.name)
        for row in as_list(data["holds"], "hosts.holds"):
            row = as_row(row, 9, "a hold")
            key = (str(row[0]), int(row[1]), int(row[2]))
            hold = Hold.from_row(row[3:])
            views.holds[key] = hold
            views._on_host.setdefault(hold.host, {})[key] = None
        return views


def free_ranges(begin: int, end: int, used: set[int]) -> tuple[tuple[int, int], ...]:
    ranges = []
    start = begin
    for port in sorted(p for p in used if begin <= p <= end):
        if port > start:
            ranges.append((start, port - 1))
        start = port + 1
    if start <= end:
        ranges.append((start, end))
    return tuple(ranges)
