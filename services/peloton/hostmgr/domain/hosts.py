"""The host manager's core: hosts, their free resources, placement validation (pure).

Contract:
- `fold(type, body)` applies any fact on the host manager's topics (agents' registrations,
  heartbeats and task statuses; placements; its own launch requests, rejections and
  losses; job specs). Folding is idempotent, so every instance can replay the whole log.
- `tick(now_ms)` decides: placements waiting for validation become TaskLaunchRequested
  (one batch per host) or PlacementRejected (stale: the host is gone, a new incarnation,
  or the resources or ports were taken meanwhile, never double-booked); hosts silent for
  longer than `heartbeat_timeout_ms` and replaced incarnations become HostLost; hosts
  whose free resources changed are offered again (OfferReceived).
Time comes in as now_ms; event times (`at`) come from the events themselves.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from peloton.model.event import Event
from peloton.model.ids import run_id
from peloton.model.resources import Resources

__all__ = ["HostBook", "HostRecord"]

RunKey = tuple[str, int, int]
_RELEASING = {"SUCCEEDED", "FAILED", "KILLED", "LOST"}


@dataclass(slots=True)
class HostRecord:
    name: str
    incarnation: str
    capacity: Resources
    labels: dict[str, str]
    log_url: str
    port_begin: int
    port_end: int
    last_seen_ms: int
    available: bool = True
    allocated: Resources = field(default_factory=Resources)
    runs: dict[RunKey, tuple[Resources, tuple[int, ...]]] = field(default_factory=dict)
    used_ports: set[int] = field(default_factory=set)
    job_counts: Counter[str] = field(default_factory=Counter)
    generation: int = 0

    @property
    def free(self) -> Resources:
        return (self.capacity - self.allocated).clamp_non_negative()


class HostBook:
    def __init__(self, heartbeat_timeout_ms: int = 5000) -> None:
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self.hosts: dict[str, HostRecord] = {}
        self.specs: dict[str, dict[str, Any]] = {}
        # placements awaiting a decision (latest round per run); decisions are keyed by
        # (run, round), so a run placed again after a rejection is decided again and a
        # replayed placement is never decided twice
        self.pending: dict[RunKey, dict[str, Any]] = {}
        self.decided: set[tuple[RunKey, int]] = set()
        self.launched: set[RunKey] = set()
        self.released: set[RunKey] = set()
        self.orphaned: dict[tuple[str, str], list[str]] = {}  # (host, old incarnation) -> runs
        self.offered: dict[str, int] = {}  # host -> generation last offered

    # ---- fold -----------------------------------------------------------------------
    def fold(self, etype: str, body: dict[str, Any], received_ms: int | None = None) -> None:
        """Apply a fact. Liveness counts from `received_ms` (when this host manager read
        the record) where given, else from the event's own time (replay)."""
        handler = _FOLDS.get(etype)
        if handler is not None:
            handler(self, body)
        if received_ms is not None and etype in ("HostRegistered", "HostStatusReported"):
            host = self.hosts.get(body["host"])
            if host is not None and host.incarnation == body["incarnation"]:
                host.last_seen_ms = max(host.last_seen_ms, received_ms)

    def _host_registered(self, body: dict[str, Any]) -> None:
        old = self.hosts.get(body["host"])
        if old is not None and old.incarnation == body["incarnation"]:
            return
        if old is not None and old.available and old.runs:
            self.orphaned[(old.name, old.incarnation)] = sorted(run_id(*k) for k in old.runs)
        generation = old.generation + 1 if old else 1
        self.hosts[body["host"]] = HostRecord(
            body["host"], body["incarnation"], Resources.from_mapping(body["capacity"]),
            dict(body["labels"]), body["log_url"], body["port_range_begin"],
            body["port_range_end"], body["at"], generation=generation)

    def _heartbeat(self, body: dict[str, Any]) -> None:
        host = self.hosts.get(body["host"])
        if host is None or host.incarnation != body["incarnation"]:
            return
        host.last_seen_ms = max(host.last_seen_ms, body["at"])
        if not host.available:
            # Declared lost but alive after all (a stall, not a crash): offer it again.
            # Its runs were already declared lost and rescheduled; late reports of them
            # are stale runs to the job manager.
            host.available = True
            host.generation += 1

    def _statuses(self, body: dict[str, Any]) -> None:
        host = self.hosts.get(body["host"])
        if host is None or host.incarnation != body["incarnation"]:
            return
        for st in body["statuses"]:
            if st["state"] in _RELEASING:
                self._release(host, (st["job_id"], st["instance"], st["run"]))

    def _task_states(self, body: dict[str, Any]) -> None:
        for ch in body["changes"]:
            if ch["state"] in _RELEASING and ch["host"]:
                host = self.hosts.get(ch["host"])
                if host is not None:
                    self._release(host, (body["job_id"], ch["instance"], ch["run"]))

    def _release(self, host: HostRecord, key: RunKey) -> None:
        self.released.add(key)
        entry = host.runs.pop(key, None)
        if entry is None:
            return
        host.allocated = (host.allocated - entry[0]).clamp_non_negative()
        host.used_ports.difference_update(entry[1])
        host.job_counts[key[0]] -= 1
        host.generation += 1

    def _placement_made(self, body: dict[str, Any]) -> None:
        for p in body["placements"]:
            key = (p["job_id"], p["instance"], p["run"])
            if (key, body["round"]) in self.decided or key in self.launched:
                continue
            current = self.pending.get(key)
            if current is None or current["round"] < body["round"]:
                self.pending[key] = {**p, "round": body["round"]}

    def _decided(self, key: RunKey, round_: int) -> None:
        self.decided.add((key, round_))
        current = self.pending.get(key)
        if current is not None and current["round"] <= round_:
            del self.pending[key]

    def _launch_requested(self, body: dict[str, Any]) -> None:
        host = self.hosts.get(body["host"])
        for launch in body["launches"]:
            key = (launch["job_id"], launch["instance"], launch["run"])
            self._decided(key, launch["round"])
            if key in self.launched:
                continue  # allocated when decided (or already folded)
            self.launched.add(key)
            self.pending.pop(key, None)
            if (host is None or host.incarnation != body["incarnation"] or key in host.runs
                    or key in self.released):
                continue
            res = Resources.from_mapping(launch["resources"])
            ports = tuple(sorted(launch["ports"].values()))
            host.runs[key] = (res, ports)
            host.allocated = host.allocated + res
            host.used_ports.update(ports)
            host.job_counts[key[0]] += 1
            host.generation += 1

    def _rejected(self, body: dict[str, Any]) -> None:
        for r in body["rejections"]:
            self._decided((r["job_id"], r["instance"], r["run"]), r["round"])

    def _host_lost(self, body: dict[str, Any]) -> None:
        self.orphaned.pop((body["host"], body["incarnation"]), None)
        host = self.hosts.get(body["host"])
        if host is not None and host.incarnation == body["incarnation"]:
            host.available = False
            host.runs.clear()
            host.allocated = Resources()
            host.used_ports.clear()
            host.job_counts.clear()
            host.generation += 1

    def _job_created(self, body: dict[str, Any]) -> None:
        self.specs[body["job_id"]] = body

    # ---- decide ---------------------------------------------------------------------
    def tick(self, now_ms: int) -> list[Event]:
        events = self._losses(now_ms)
        events += self._validate(now_ms)
        events += self._offers(now_ms)
        return events

    def _losses(self, now_ms: int) -> list[Event]:
        events = []
        for (name, incarnation), runs in sorted(self.orphaned.items()):
            events.append(Event("HostLost", name, {
                "host": name, "incarnation": incarnation, "at": now_ms,
                "reason": "agent restarted (new incarnation)", "runs": runs}))
        for name in sorted(self.hosts):
            host = self.hosts[name]
            silent = now_ms - host.last_seen_ms
            if host.available and silent > self.heartbeat_timeout_ms:
                events.append(Event("HostLost", name, {
                    "host": name, "incarnation": host.incarnation, "at": now_ms,
                    "reason": f"no heartbeat for {silent / 1000:.1f}s",
                    "runs": sorted(run_id(*k) for k in host.runs)}))
        for ev in events:
            self.fold(ev.type, ev.body)
        return events

    def _validate(self, now_ms: int) -> list[Event]:
        launches: dict[str, list[dict[str, Any]]] = {}
        rejections: list[dict[str, Any]] = []
        for key in sorted(self.pending):
            p = self.pending[key]
            host = self.hosts.get(p["host"])
            reason = self._problem(host, p)
            if reason is not None:
                rejections.append({"job_id": key[0], "instance": key[1], "run": key[2],
                                   "host": p["host"], "reason": reason, "round": p["round"]})
                continue
            assert host is not None
            launches.setdefault(host.name, []).append(self._launch(key, p))
            res = Resources.from_mapping(p["resources"])
            host.runs[key] = (res, tuple(sorted(p["ports"].values())))
            host.allocated = host.allocated + res
            host.used_ports.update(p["ports"].values())
            host.job_counts[key[0]] += 1
            host.generation += 1
            self.launched.add(key)
            self.decided.add((key, p["round"]))
        self.pending.clear()
        events = []
        for name in sorted(launches):
            host = self.hosts[name]
            events.append(Event("TaskLaunchRequested", name, {
                "host": name, "incarnation": host.incarnation, "at": now_ms,
                "launches": launches[name]}))
        if rejections:
            ev = Event("PlacementRejected", "rejected", {"at": now_ms, "rejections": rejections})
            self._rejected(ev.body)
            events.append(ev)
        return events

    def _problem(self, host: HostRecord | None, p: dict[str, Any]) -> str | None:
        if host is None:
            return f"unknown host {p['host']}"
        if not host.available:
            return f"host {host.name} is lost"
        if host.incarnation != p["incarnation"]:
            return f"host {host.name} restarted (incarnation changed)"
        if p["job_id"] not in self.specs:
            return "unknown job"
        need = Resources.from_mapping(p["resources"])
        if not need.fits_in(host.free):
            short = ", ".join(f"{k} {need.get(k):g}>{host.free.get(k):g}"
                              for k in need.exceeding(host.free))
            return f"host {host.name} no longer fits: {short}"
        ports = set(p["ports"].values())
        if ports & host.used_ports or any(not host.port_begin <= x <= host.port_end
                                          for x in ports):
            return f"host {host.name}: ports {sorted(ports)} taken or out of range"
        return None

    def _launch(self, key: RunKey, p: dict[str, Any]) -> dict[str, Any]:
        job = self.specs[key[0]]
        spec = job["instance_tasks"].get(str(key[1]), job["default_task"])
        env = dict(spec["env"])
        env.update({"PELOTON_JOB_ID": key[0], "PELOTON_INSTANCE_ID": str(key[1]),
                    "PELOTON_TASK_ID": run_id(*key)})
        for declared in spec["ports"]:
            name, _, env_name = declared.partition(":")
            if name in p["ports"]:
                env[env_name or f"PORT_{name.upper()}"] = str(p["ports"][name])
        return {"job_id": key[0], "instance": key[1], "run": key[2],
                "command": spec["command"], "env": env, "resources": p["resources"],
                "ports": dict(p["ports"]), "kill_grace_period_s": spec["kill_grace_period_s"],
                "round": p["round"]}

    def _offers(self, now_ms: int) -> list[Event]:
        offers = []
        for name in sorted(self.hosts):
            host = self.hosts[name]
            if self.offered.get(name) == host.generation:
                continue
            self.offered[name] = host.generation
            offers.append({
                "host": name, "incarnation": host.incarnation,
                "capacity": host.capacity.as_dict(), "free": host.free.as_dict(),
                "labels": host.labels, "generation": host.generation,
                "available": host.available, "port_range_begin": host.port_begin,
                "port_range_end": host.port_end, "used_ports": sorted(host.used_ports),
                "task_label_counts": {f"peloton.job_id={j}": n
                                      for j, n in sorted(host.job_counts.items()) if n > 0}})
        if not offers:
            return []
        return [Event("OfferReceived", "offers", {"at": now_ms, "offers": offers})]


_FOLDS = {
    "HostRegistered": HostBook._host_registered,
    "HostStatusReported": HostBook._heartbeat,
    "TaskStatusReported": HostBook._statuses,
    "TaskStateChanged": HostBook._task_states,
    "PlacementMade": HostBook._placement_made,
    "TaskLaunchRequested": HostBook._launch_requested,
    "PlacementRejected": HostBook._rejected,
    "HostLost": HostBook._host_lost,
    "JobCreated": HostBook._job_created,
}
