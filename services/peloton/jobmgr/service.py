"""The job manager service: the JobBook core inside the common service shell.

Settings (`JobManagerCore.from_env`, read once by `peloton serve jobmgr`; seconds, 0 turns
a timeout off; defaults are Peloton's, see `jobmgr.domain.timeouts` and `retention`):

    PELOTON_JOBMGR_PLACEMENT_TIMEOUT_S   READY not placed -> PENDING      (600)
    PELOTON_JOBMGR_PLACEMENT_BACKOFF_S   placement backoff unit           (300)
    PELOTON_JOBMGR_PREEMPT_TIMEOUT_S     PREEMPTING not ended -> RUNNING  (600)
    PELOTON_JOBMGR_RETENTION_S           terminal jobs stay in memory     (600)
    PELOTON_JOBMGR_RESTART_BACKOFF_S     service restart backoff base     (30)
    PELOTON_JOBMGR_IN_PLACE_WAIT_S       an in-place update waits for its host (10)
    PELOTON_JOBMGR_RECONCILE_AFTER_S     a run on a host with no news is asked about (60)
    PELOTON_JOBMGR_RECONCILE_EVERY_S     ... and again at most this often  (600)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Self

from peloton.jobmgr.domain.book import JobBook
from peloton.jobmgr.domain.retention import DEFAULT_RETENTION_MS
from peloton.jobmgr.domain.snapshot import SNAPSHOT_VERSION, book_from_data, book_to_data
from peloton.jobmgr.domain.timeouts import Timeouts
from peloton.model.event import Event

__all__ = ["JobManagerCore", "ENV_PLACEMENT_TIMEOUT", "ENV_PLACEMENT_BACKOFF",
           "ENV_PREEMPT_TIMEOUT", "ENV_RETENTION", "ENV_RESTART_BACKOFF",
           "ENV_IN_PLACE_WAIT", "ENV_RECONCILE_AFTER", "ENV_RECONCILE_EVERY"]

ENV_PLACEMENT_TIMEOUT = "PELOTON_JOBMGR_PLACEMENT_TIMEOUT_S"
ENV_PLACEMENT_BACKOFF = "PELOTON_JOBMGR_PLACEMENT_BACKOFF_S"
ENV_PREEMPT_TIMEOUT = "PELOTON_JOBMGR_PREEMPT_TIMEOUT_S"
ENV_RETENTION = "PELOTON_JOBMGR_RETENTION_S"
ENV_RESTART_BACKOFF = "PELOTON_JOBMGR_RESTART_BACKOFF_S"
ENV_IN_PLACE_WAIT = "PELOTON_JOBMGR_IN_PLACE_WAIT_S"
ENV_RECONCILE_AFTER = "PELOTON_JOBMGR_RECONCILE_AFTER_S"
ENV_RECONCILE_EVERY = "PELOTON_JOBMGR_RECONCILE_EVERY_S"


def _ms(environ: Mapping[str, str], name: str, default_ms: int) -> int:
    raw = environ.get(name)
    if raw is None or not raw.strip():
        return default_ms
    try:
        seconds = float(raw)
    except ValueError:
        raise ValueError(f"{name}: seconds expected, got {raw!r}") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{name}: must be a number of seconds >= 0, got {raw!r}")
    return round(seconds * 1000)


class JobManagerCore:
    """Adapter between ServiceShell and JobBook (no logic of its own)."""

    inputs: tuple[str, ...] = (
        "job-submitted", "job-kill-requested", "tasks-admitted", "placement-made",
        "placement-rejected", "task-launch-requested", "task-status-reported",
        "offer-received", "entitlement-updated", "respool-events", "host-events",
        "job-update-requested")
    # its own facts plus the public requests, so a restart neither repeats nor forgets;
    # the host manager's host facts (few) give the host list for daemons and drains
    replay: tuple[str, ...] = (
        "job-submitted", "job-kill-requested", "job-events", "entitlement-updated",
        "host-events", "job-update-requested")
    tick_interval: float | None = 2.0
    snapshot_version: int = SNAPSHOT_VERSION
    #: types on its input topics that concern it not (the shell skips them undecoded:
    #: an offer batch of 10,000 hosts costs milliseconds to decode); respool-events: only
    #: TasksPreempted concerns the job manager
    ignores: frozenset[str] = frozenset({
        "OfferReceived", "AdmissionDeferred", "ResourcePoolCreated", "ResourcePoolUpdated",
        "ResourcePoolDeleted", "ResourcePoolRequestRejected"})

    def __init__(self, retention_ms: int = DEFAULT_RETENTION_MS,
                 timeouts: Timeouts | None = None) -> None:
        self.retention_ms = retention_ms
        self.timeouts = timeouts or Timeouts()
        self.book = JobBook(retention_ms, self.timeouts)

    @classmethod
    def from_env(cls, environ: Mapping[str, str], **options: Any) -> Self:
        """A core with the settings of the module doc (raises ValueError on a bad one);
        `options` go to the constructor as they are (a shard's partition)."""
        default = Timeouts()
        return cls(_ms(environ, ENV_RETENTION, DEFAULT_RETENTION_MS), Timeouts(
            placement_ms=_ms(environ, ENV_PLACEMENT_TIMEOUT, default.placement_ms),
            placement_backoff_unit_ms=_ms(environ, ENV_PLACEMENT_BACKOFF,
                                          default.placement_backoff_unit_ms),
            preempt_ms=_ms(environ, ENV_PREEMPT_TIMEOUT, default.preempt_ms),
            restart_base_ms=_ms(environ, ENV_RESTART_BACKOFF, default.restart_base_ms),
            in_place_ms=_ms(environ, ENV_IN_PLACE_WAIT, default.in_place_ms),
            reconcile_ms=_ms(environ, ENV_RECONCILE_AFTER, default.reconcile_ms),
            reconcile_every_ms=_ms(environ, ENV_RECONCILE_EVERY, default.reconcile_every_ms)),
            **options)

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        self.book.apply(etype, body)

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        if etype in self.ignores:
            return []
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
        it cannot read (the shell then replays the whole log), leaving the book as it was."""
        self.book = book_from_data(state, self.retention_ms, self.timeouts)
