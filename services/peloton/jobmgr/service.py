"""The job manager service: the JobBook core inside the common service shell."""

from __future__ import annotations

from typing import Any

from peloton.jobmgr.domain.book import JobBook
from peloton.jobmgr.domain.retention import DEFAULT_RETENTION_MS
from peloton.jobmgr.domain.snapshot import SNAPSHOT_VERSION, book_from_data, book_to_data
from peloton.jobmgr.domain.timeouts import Timeouts
from peloton.model.event import Event

__all__ = ["JobManagerCore"]


class JobManagerCore:
    """Adapter between ServiceShell and JobBook (no logic of its own)."""

    inputs: tuple[str, ...] = (
        "job-submitted", "job-kill-requested", "tasks-admitted", "placement-made",
        "placement-rejected", "task-launch-requested", "task-status-reported",
        "offer-received", "entitlement-updated", "respool-events")
    # its own facts plus the public requests, so a restart neither repeats nor forgets
    replay: tuple[str, ...] = (
        "job-submitted", "job-kill-requested", "job-events", "entitlement-updated")
    tick_interval: float | None = 2.0
    snapshot_version: int = SNAPSHOT_VERSION

    def __init__(self, retention_ms: int = DEFAULT_RETENTION_MS,
                 timeouts: Timeouts | None = None) -> None:
        self.retention_ms = retention_ms
        self.timeouts = timeouts or Timeouts()
        self.book = JobBook(retention_ms, self.timeouts)

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        self.book.apply(etype, body)

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        if etype in ("OfferReceived", "AdmissionDeferred") or etype.startswith("ResourcePool"):
            return []  # respool-events: only TasksPreempted concerns the job manager
        return self.book.handle(etype, body, now)

    def tick(self, now: int) -> list[Event]:
        return self.book.tick(now)

    def after_replay(self, now: int) -> list[Event]:
        return self.book.tick(now)

    def snapshot(self) -> dict[str, Any]:
        """The book as plain JSON-able data (see jobmgr.domain.snapshot)."""
        return book_to_data(self.book)

    def restore(self, state: dict[str, Any]) -> None:
        """Replace the book by a snapshot's; raises KeyError/TypeError/ValueError on data
        it cannot read (the shell then replays the whole log)."""
        self.book = book_from_data(state, self.retention_ms, self.timeouts)
