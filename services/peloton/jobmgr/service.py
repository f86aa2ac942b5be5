"""The job manager service: the JobBook core inside the common service shell."""

from __future__ import annotations

from typing import Any

from peloton.jobmgr.domain.book import JobBook
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

    def __init__(self) -> None:
        self.book = JobBook()

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        self.book.apply(etype, body)

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        if etype in ("OfferReceived", "AdmissionDeferred") or etype.startswith("ResourcePool"):
            return []  # respool-events: only TasksPreempted concerns the job manager
        return self.book.handle(etype, body, now)

    def tick(self, now: int) -> list[Event]:
        return self.book.reconcile(now)

    def after_replay(self, now: int) -> list[Event]:
        return self.book.reconcile(now)
