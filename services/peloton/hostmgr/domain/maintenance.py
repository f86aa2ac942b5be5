"""Host maintenance in the host manager: requests, drains, and what everyone is told (pure).

The machine is model.hoststate's (UP -> DRAINING -> DRAINED -> DOWN -> UP, cancel back to
UP); this module applies it to the hosts of a `HostBook` (hosts.py), which holds one
`Maintenance` as `book.maint`.

Contract:
- A host's maintenance record (`HostMaint`) changes only by folding the host manager's own
  HostStateChanged (topic host-events, one partition per host, so in order): state,
  deadline, reason, and what was last announced of the host (presence, labels). So a
  replay of host-events rebuilds it exactly, in any order relative to the other topics.
- `decide_request(book, body, now_ms)` (live HostMaintenanceRequested) decides at once:
  HostStateChanged to the machine's next state (a start records its `deadline_ms`), or
  HostMaintenanceRejected with the reason (unknown host, unknown command, the machine's
  `HostStateError` reason). Both name the request (`request_id`: ``command@at``).
- A replayed request (`fold`, no decision) waits in `undecided` unless the host's
  decisions already cover it: a request is decided once a decision naming a request of
  that host at or after its `at` was read (requests of a host are read in their
  partition's order and decided in that order). The next `tick` decides what waits.
  (A refused request about a host never seen leaves no record; a full replay that reads
  it before its refusal refuses it again: harmless, and the state stays bounded.)
- `tick(book, now_ms)` decides, from the state at the start of the tick: waiting requests
  first; a DRAINING host with no run left in the book becomes DRAINED ("drained: no runs
  left"); a DRAINED host becomes DOWN ("down for maintenance"), so at the earliest on the
  tick after it drained. Then every host whose presence (registered and not lost) or
  labels differ from the last HostStateChanged about it is announced (same state): its
  first registration (present), a loss (not present), a return (present again). Not a
  loss during the grace after a restart (`book.grace_until`): a host lost and back again
  before the restart looks lost until its first live heartbeat.
  The host keeps its maintenance state through a loss and a new registration.
- Only UP hosts get work (`accepts_work`): the others are offered as unavailable and a
  placement onto them is rejected (hosts.py asks `blocked_reason`). A state change makes
  the host offered again (its `offered` entry is dropped; the new offer has a newer `at`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from peloton.model.event import Event
from peloton.model.hoststate import (
    IN_MAINTENANCE,
    HostCommand,
    HostState,
    HostStateError,
    accepts_work,
    apply,
)

if TYPE_CHECKING:
    from peloton.hostmgr.domain.hosts import HostBook

__all__ = ["HostMaint", "Maintenance", "USER_COMMANDS", "request_id", "decide_request",
           "handle_request", "fold_request", "fold_state_changed", "fold_rejected", "tick",
           "blocked_reason",
           "DRAINED_REASON", "DOWN_REASON"]

Body = dict[str, Any]

USER_COMMANDS = (HostCommand.START_MAINTENANCE, HostCommand.COMPLETE_MAINTENANCE,
                 HostCommand.CANCEL_MAINTENANCE)
DRAINED_REASON = "drained: no runs left"
DOWN_REASON = "down for maintenance"
_UNKNOWN_HOST = "unknown host"
_MOVING = (HostState.DRAINING, HostState.DRAINED)  # the only states a tick moves on


@dataclass(slots=True)
class HostMaint:
    state: HostState = HostState.UP
    deadline_ms: int | None = None
    reason: str = ""
    announced: bool = False
    """A HostStateChanged about this host was read (present and labels are its)."""
    present: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    decided_at: int = -1
    """`at` of the newest request of this host decided (-1: none)."""


@dataclass(slots=True)
class Maintenance:
    hosts: dict[str, HostMaint] = field(default_factory=dict)
    undecided: list[Body] = field(default_factory=list)
    """Replayed requests not decided yet, in the order read."""
    moving: set[str] = field(init=False, default_factory=set)
    """Derived: the hosts DRAINING or DRAINED (the only ones a tick moves on), kept where
    a state is set (`fold_state_changed`) so that an idle tick visits no host."""

    def __post_init__(self) -> None:
        self.moving = {h for h, m in self.hosts.items() if m.state in _MOVING}

    def state(self, host: str) -> HostState:
        m = self.hosts.get(host)
        return HostState.UP if m is None else m.state


def request_id(body: Body) -> str:
    return f"{body['command']}@{body['at']}"


def _request_at(request: str) -> int | None:
    _, _, at = request.rpartition("@")
    try:
        return int(at)
    except ValueError:
        return None


def _presence(book: HostBook, name: str) -> tuple[bool, dict[str, str]]:
    host = book.hosts.get(name)
    if host is None:
        return False, {}
    return host.available, dict(host.labels)


def _changed(book: HostBook, name: str, state: HostState, previous: HostState, reason: str,
             now_ms: int, deadline_ms: int | None, request: str = "") -> Event:
    present, labels = _presence(book, name)
    return Event("HostStateChanged", name, {
        "host": name, "at": now_ms, "state": state.value, "previous_state": previous.value,
        "present": present, "labels": labels, "reason": reason,
        "deadline_ms": deadline_ms if state in IN_MAINTENANCE else None, "request": request})


def _rejected(name: str, command: str, reason: str, now_ms: int, request: str) -> Event:
    return Event("HostMaintenanceRejected", name, {
        "host": name, "at": now_ms, "command": command, "reason": reason,
        "request": request})


def decide_request(book: HostBook, body: Body, now_ms: int) -> list[Event]:
    """The decision on one request (not folded: the caller folds it)."""
    name, command, rid = str(body["host"]), str(body["command"]), request_id(body)
    if name not in book.hosts:
        return [_rejected(name, command, f"{_UNKNOWN_HOST} {name}", now_ms, rid)]
    try:
        cmd = HostCommand(command)
    except ValueError:
        cmd = None
    if cmd not in USER_COMMANDS:
        allowed = ", ".join(c.value for c in USER_COMMANDS)
        return [_rejected(name, command, f"unknown command {command!r} (one of {allowed})",
                          now_ms, rid)]
    assert cmd is not None
    m = book.maint.hosts.get(name) or HostMaint()
    try:
        target = apply(m.state, cmd)
    except HostStateError as exc:
        return [_rejected(name, command, exc.reason, now_ms, rid)]
    deadline = body.get("deadline_ms") if cmd is HostCommand.START_MAINTENANCE else None
    by = str(body.get("requested_by") or "")
    reason = f"{command} requested" + (f" by {by}" if by else "")
    return [_changed(book, name, target, m.state, reason, now_ms, deadline, rid)]


def handle_request(book: HostBook, body: Body, now_ms: int) -> list[Event]:
    """A request read live: decided now, and the decision folded."""
    events = decide_request(book, body, now_ms)
    for ev in events:
        book.fold(ev.type, ev.body)
    return events


def _covered(book: HostBook, body: Body) -> bool:
    m = book.maint.hosts.get(str(body["host"]))
    return m is not None and int(body["at"]) <= m.decided_at


def fold_request(book: HostBook, body: Body, _: int | None) -> None:
    """A request read on replay: wait for the tick's decision unless already decided."""
    if not _covered(book, body):
        book.maint.undecided.append(dict(body))


def _decided(book: HostBook, m: HostMaint, name: str, request: str) -> None:
    at = _request_at(request) if request else None
    if at is None:
        return
    m.decided_at = max(m.decided_at, at)
    book.maint.undecided = [b for b in book.maint.undecided
                            if not (b["host"] == name and int(b["at"]) <= m.decided_at)]


def fold_state_changed(book: HostBook, body: Body, _: int | None) -> None:
    name = str(body["host"])
    m = book.maint.hosts.setdefault(name, HostMaint())
    state = HostState(body["state"])
    if state is not m.state:
        book.offered.pop(name, None)  # offer it again, (un)available
        book.to_offer.add(name)
    m.state = state
    if state in _MOVING:
        book.maint.moving.add(name)
    else:
        book.maint.moving.discard(name)
    m.deadline_ms = body.get("deadline_ms") if state in IN_MAINTENANCE else None
    m.reason = str(body["reason"])
    m.announced, m.present, m.labels = True, bool(body["present"]), dict(body["labels"])
    book.presence_dirty.add(name)
    _decided(book, m, name, str(body.get("request") or ""))


def fold_rejected(book: HostBook, body: Body, _: int | None) -> None:
    """Marks the request decided. A host we know nothing of gets no record (requests
    naming any host must not grow the state): such a request, replayed, is refused again."""
    name = str(body["host"])
    request = str(body.get("request") or "")
    if _request_at(request) is None:
        return
    if name in book.maint.hosts or not str(body["reason"]).startswith(_UNKNOWN_HOST):
        _decided(book, book.maint.hosts.setdefault(name, HostMaint()), name, request)
    else:
        book.maint.undecided = [b for b in book.maint.undecided if not (
            b["host"] == name and request_id(b) == request)]


def tick(book: HostBook, now_ms: int) -> list[Event]:
    """This tick's maintenance decisions, each folded before the next is made."""
    events: list[Event] = []

    def emit(evs: list[Event]) -> None:
        for ev in evs:
            book.fold(ev.type, ev.body)
        events.extend(evs)

    start = {name: (book.maint.hosts[name].state, book.maint.hosts[name].deadline_ms)
             for name in sorted(book.maint.moving)}
    for body in list(book.maint.undecided):
        if not _covered(book, body):
            emit(decide_request(book, body, now_ms))
    book.maint.undecided.clear()
    for name, (state, deadline) in start.items():
        if book.maint.state(name) is not state:
            continue  # a request moved it in this tick: it moves on at the next
        host = book.hosts.get(name)
        if state is HostState.DRAINING and (host is None or not host.runs):
            emit([_changed(book, name, HostState.DRAINED, state, DRAINED_REASON, now_ms,
                           deadline)])
        elif state is HostState.DRAINED:
            emit([_changed(book, name, HostState.DOWN, state, DOWN_REASON, now_ms,
                           deadline)])
    # only hosts whose presence may differ from what was announced (hosts.py: Scale)
    dirty, book.presence_dirty = sorted(book.presence_dirty), set()
    for name in dirty:
        if name not in book.hosts:
            continue
        m = book.maint.hosts.get(name) or HostMaint()
        present, labels = _presence(book, name)
        if m.announced and m.present == present and m.labels == labels:
            continue
        if m.announced and not present and now_ms < book.grace_until:
            book.presence_dirty.add(name)  # looked at again at the next tick
            continue  # after a restart: its heartbeats were not replayed, wait for them
        if not m.announced:
            reason = "registered"
        elif m.present != present:
            reason = "host is back" if present else "host lost"
        else:
            reason = "labels changed"
        emit([_changed(book, name, m.state, m.state, reason, now_ms, m.deadline_ms)])
    return events


def blocked_reason(book: HostBook, name: str) -> str | None:
    """Why host `name` takes no new work (None: it does)."""
    state = book.maint.state(name)
    if accepts_work(state):
        return None
    return f"host {name} is {state.value} for maintenance"
