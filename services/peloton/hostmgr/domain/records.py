"""The host manager's records: hosts and the runs they hold, jobs, placements waiting (pure).

Plain mutable records, owned and changed only by `HostBook` (hosts.py). Every field is
part of the core's state and goes into its snapshot (snapshot.py), except the indexes
marked "derived", which `restore` rebuilds from the rest.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from peloton.model.resources import Resources
from peloton.model.spec import JobSpec

__all__ = ["RunKey", "RunAlloc", "HostRecord", "JobRecord", "Pending", "Early",
           "PAST_INCARNATIONS"]

RunKey = tuple[str, int, int]
"""(job_id, instance, run)."""

PAST_INCARNATIONS = 8
"""How many earlier incarnations of a host are remembered (to tell a stale fact about an
old incarnation from an early fact about a new one)."""


@dataclass(frozen=True, slots=True)
class RunAlloc:
    """What one launched run holds on its host, and when its launch was decided."""

    resources: Resources
    ports: tuple[int, ...]
    at: int


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
    lost_at: int = -1
    """Event time of the newest HostLost applied to this incarnation (-1: none). Runs
    whose launch was decided at or before it were lost with it."""
    allocated: Resources = field(default_factory=Resources)
    runs: dict[RunKey, RunAlloc] = field(default_factory=dict)
    generation: int = 0
    past: tuple[str, ...] = ()
    """Earlier incarnations, oldest first (at most PAST_INCARNATIONS)."""
    used_ports: Counter[int] = field(default_factory=Counter)
    """Derived from runs: port -> how many runs hold it (no zero entries). A multiset,
    not a set: read out of order, a run's launch can be applied before the end of the
    earlier run that held the same port, and that end must not free the port."""
    job_counts: Counter[str] = field(default_factory=Counter)  # derived; no zero entries

    @property
    def free(self) -> Resources:
        return (self.capacity - self.allocated).clamp_non_negative()

    @property
    def slack(self) -> Resources:
        """What revocable tasks may use (OfferReceived v2 `slack`): the resources
        allocated to no run, revocable or not, so the same figures as `free` and the same
        pool (agents report no usage, so unused allocations cannot be lent; see the
        contract in hosts.py)."""
        return self.free


@dataclass(slots=True)
class JobRecord:
    """What the host manager knows of one job. Kept while the job may still matter; see
    `HostBook.prune` for when it leaves."""

    spec: JobSpec | None = None
    terminal: bool = False
    """The job reached a terminal job state (its spec may go once it is quiet)."""
    last_at: int = 0
    """Event time of the newest fact about the job."""
    ended: dict[int, int] = field(default_factory=dict)
    """instance -> highest run known to have ended (runs of a task are sequential, so
    every earlier run has ended too)."""
    decided: dict[int, tuple[int, int]] = field(default_factory=dict)
    """instance -> (run, round) of the newest placement decided, for runs not known to
    have ended (one entry per task at most)."""
    on_host: dict[tuple[int, int], str] = field(default_factory=dict)  # derived from hosts

    def has_ended(self, instance: int, run: int) -> bool:
        return self.ended.get(instance, 0) >= run


@dataclass(frozen=True, slots=True)
class Pending:
    """A placement waiting for the host manager's decision (the latest round of a run)."""

    host: str
    incarnation: str
    resources: Resources
    ports: tuple[tuple[str, int], ...]
    round: int
    since: int
    """When the host manager first saw it (its read time live, the event time on replay):
    the start of the bounded wait for a job spec or host registration it still lacks."""


@dataclass(slots=True)
class Early:
    """Facts about a host incarnation not registered yet (read before its HostRegistered),
    applied when it registers."""

    first_at: int
    launches: dict[RunKey, RunAlloc] = field(default_factory=dict)
    lost_at: int = -1
