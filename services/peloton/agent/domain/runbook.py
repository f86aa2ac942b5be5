"""The runs one agent incarnation knows, and what it keeps of them after they end (pure).

A run's life in the book:

    LIVE      its launch was accepted: the runner was asked to start it
    ENDED     a terminal status was seen (from the runner, or a kill that came before the
              launch) but the report carrying it has not reached the log yet
    REPORTED  that report reached the log at `reported_at` (the agent's event time); the
              entry stays `retention_ms` longer, so late or redelivered requests find it
    (gone)    then it leaves; all that remains of it is two numbers, the horizons

Idempotency under at-least-once delivery. A launch of a run the book holds (in any state)
is never started again; a kill of a run that ended is a no-op. Once a run has left, a
redelivered request for it is recognised by its event time (`at`): the book keeps
`launch_horizon`, the newest `at` of any launch request that touched a run that left, and
`kill_horizon` likewise for kill requests. A launch of an unknown run with `at <=
launch_horizon` is not started and a kill of an unknown run with `at <= kill_horizon` is
ignored, neither reported: a redelivered record is the same record, with the same `at`,
and that `at` is at most the horizon because the first delivery touched the entry before
it left. Nothing is lost by refusing it either: an entry leaves only after its terminal
status reached the log.

Why a new request is never mistaken for a redelivery: requests for one host are one
partition of their topic (keyed by host), read in order, and each is written by one
service (launches by the host manager, kills by the job manager) whose `at` grows along
the partition. A new request is written after every request already handled, so its `at`
is newer than any horizon, unless the writer's clock went back by more than the time
since the horizon's request, which is at least `retention_ms` (10 min by default) old:
a leader fail-over between hosts whose clocks differ by over 10 minutes.

What the windows do not cover, and why it is harmless:
- A kill that came before its launch leaves a KILLED tombstone (so the launch is not
  started). If that launch came more than `retention_ms` after the kill, it would start
  a run the job manager already counts as KILLED; the placement and launch that precede
  a launch request take far less than the window.
- A first-time kill of a run that left (its end was published over `retention_ms` ago)
  is reported KILLED "before launch": a terminal status for a run already terminal in the
  log, which consumers drop.
- Another incarnation's requests never reach the book (the agent filters launches by
  incarnation), so a restart starts from an empty book.

Bound: live entries are the runs on the host plus those that ended within the window
(plus those whose report is in flight); two integers for everything older. Expiry is
O(1) amortised: REPORTED entries queue in report order.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum

__all__ = ["RunBook", "RunPhase", "KillAction", "DEFAULT_RETENTION_MS"]

DEFAULT_RETENTION_MS = 10 * 60_000


class RunPhase(Enum):
    LIVE = "LIVE"
    ENDED = "ENDED"
    REPORTED = "REPORTED"


class KillAction(Enum):
    """What a kill request asks of the agent for one run."""

    KILL = "KILL"  # the run is live: ask the runner to stop it
    REPORT_KILLED = "REPORT_KILLED"  # never launched here: report KILLED, keep a tombstone
    IGNORE = "IGNORE"  # it ended already, or this is a redelivery of a forgotten kill


@dataclass(slots=True)
class _Entry:
    phase: RunPhase
    launch_at: int = -1  # newest `at` of a launch request for this run
    kill_at: int = -1  # newest `at` of a kill request for this run
    reported_at: int = -1


class RunBook:
    """Runs of one agent incarnation by run id (see the module doc)."""

    def __init__(self, retention_ms: int = DEFAULT_RETENTION_MS) -> None:
        if retention_ms < 0:
            raise ValueError(f"retention_ms must be >= 0, got {retention_ms}")
        self.retention_ms = retention_ms
        self.launch_horizon = -1
        self.kill_horizon = -1
        self._runs: dict[str, _Entry] = {}
        self._reported: deque[tuple[int, str]] = deque()

    # ---- requests ------------------------------------------------------------------------
    def admit_launch(self, rid: str, at: int) -> bool:
        """True if the run is to be started now (and it is then LIVE); False for a run the
        book holds or a redelivery of one that left."""
        entry = self._runs.get(rid)
        if entry is not None:
            entry.launch_at = max(entry.launch_at, at)
            return False
        if at <= self.launch_horizon:
            return False
        self._runs[rid] = _Entry(RunPhase.LIVE, launch_at=at)
        return True

    def admit_kill(self, rid: str, at: int) -> KillAction:
        """What to do for a kill of `rid` requested at `at` (a tombstone for an unknown run:
        it is ENDED, and its KILLED report is the caller's to send)."""
        entry = self._runs.get(rid)
        if entry is not None:
            entry.kill_at = max(entry.kill_at, at)
            return KillAction.KILL if entry.phase is RunPhase.LIVE else KillAction.IGNORE
        if at <= self.kill_horizon:
            return KillAction.IGNORE
        self._runs[rid] = _Entry(RunPhase.ENDED, kill_at=at)
        return KillAction.REPORT_KILLED

    # ---- outcomes ------------------------------------------------------------------------
    def ended(self, rid: str) -> None:
        """A terminal status of the run was seen (a LIVE run becomes ENDED; else no-op)."""
        entry = self._runs.get(rid)
        if entry is not None and entry.phase is RunPhase.LIVE:
            entry.phase = RunPhase.ENDED

    def reported(self, rid: str, now_ms: int) -> None:
        """The run's terminal status reached the log at `now_ms`: its window starts. A
        repeated report keeps the first time."""
        entry = self._runs.get(rid)
        if entry is None or entry.phase is RunPhase.REPORTED:
            return
        entry.phase = RunPhase.REPORTED
        entry.reported_at = now_ms
        self._reported.append((now_ms, rid))

    def expire(self, now_ms: int) -> list[str]:
        """Forget the runs reported at least `retention_ms` before `now_ms`, raising the
        horizons to their requests' times; returns their ids (the runner may forget them)."""
        gone: list[str] = []
        queue = self._reported
        while queue and queue[0][0] + self.retention_ms <= now_ms:
            _, rid = queue.popleft()
            entry = self._runs.pop(rid)
            self.launch_horizon = max(self.launch_horizon, entry.launch_at)
            self.kill_horizon = max(self.kill_horizon, entry.kill_at)
            gone.append(rid)
        return gone

    # ---- reading -------------------------------------------------------------------------
    def phase(self, rid: str) -> RunPhase | None:
        entry = self._runs.get(rid)
        return entry.phase if entry is not None else None

    def __len__(self) -> int:
        return len(self._runs)

    def __contains__(self, rid: object) -> bool:
        return rid in self._runs
