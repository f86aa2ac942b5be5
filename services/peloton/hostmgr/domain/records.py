"""The host manager's records: hosts and the runs they hold, jobs, placements waiting (pure).

Plain mutable records, owned and changed only by `HostBook` (hosts.py). Every field is
part of the core's state and goes into its snapshot (snapshot.py), except the indexes
marked "derived", which `restore` rebuilds from the rest.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from peloton.model.quickinit import quick_init
from peloton.model.resources import Resources
from peloton.model.spec import JobSpec

__all__ = ["RunKey", "TaskKey", "RunAlloc", "RoomHold", "HostRecord", "JobRecord", "Pending",
           "Early", "PAST_INCARNATIONS"]

RunKey = tuple[str, int, int]
"""(job_id, instance, run)."""

TaskKey = tuple[str, int]
"""(job_id, instance)."""

PAST_INCARNATIONS = 8
"""How many earlier incarnations of a host are remembered (to tell a stale fact about an
old incarnation from an early fact about a new one)."""


@quick_init
@dataclass(frozen=True, slots=True)
class RunAlloc:
    """What one launched run holds on its host, and when its launch was decided."""

    resources: Resources
    ports: tuple[int, ...]
    at: int
    volume: bool = False
    """The launch carried a stateful volume (TaskLaunchRequested v3 `volume`): when the
    run ends while its task may run again, its room stays held on the host (RoomHold)."""


@dataclass(frozen=True, slots=True)
class RoomHold:
    """Room kept on a host for a stateful task between two runs (Mesos' reservation of a
    task's resources with its persistent volume): what run `run` held there, kept from
    its end until the task's next run is launched (or the hold ends, see hosts.py)."""

    run: int
    resources: Resources
    at: int
    """When the launch of run `run` was decided (a host loss at or after it ends the
    hold, as it would have ended the run)."""


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
    holds: dict[TaskKey, RoomHold] = field(default_factory=dict)
    """Room held for stateful tasks between runs (one hold per task, cluster-wide)."""

    @property
    def held(self) -> Resources:
        """The room all holds keep (summed in task order: the same bits whatever order
        the holds were made in)."""
        total = Resources()
        for key in sorted(self.holds):
            total = total + self.holds[key].resources
        return total

    @property
    def free(self) -> Resources:
        """What no run holds and no hold keeps."""
        if not self.holds:
            return (self.capacity - self.allocated).clamp_non_negative()
        return (self.capacity - self.allocated - self.held).clamp_non_negative()

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
    """JobCreated's spec: config version 1."""
    versions: dict[int, JobSpec] = field(default_factory=dict)
    """Later config versions of the spec (JobSpecChanged, version >= 2), all kept while
    the job's record lives: a not yet updated instance may start a run of an old one."""
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
    void: dict[int, int] = field(default_factory=dict)
    """instance -> highest run whose room may not be held (it was killed for good, or a
    later run of the task was launched or ended): a hold is only made for a later run."""
    held: dict[int, str] = field(default_factory=dict)  # derived: instance -> host holding

    def has_ended(self, instance: int, run: int) -> bool:
        return self.ended.get(instance, 0) >= run

    def spec_of(self, version: int) -> JobSpec | None:
        """The spec of one config version (None: its JobCreated or JobSpecChanged has not
        been read)."""
        return self.spec if version == 1 else self.versions.get(version)


@quick_init
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
    config_version: int = 1
    """The job config version the run runs (PlacementMade v2): its launch uses that
    version's task spec."""


@dataclass(slots=True)
class Early:
    """Facts about a host incarnation not registered yet (read before its HostRegistered),
    applied when it registers."""

    first_at: int
    launches: dict[RunKey, RunAlloc] = field(default_factory=dict)
    lost_at: int = -1
