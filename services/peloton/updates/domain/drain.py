"""The drain planner: which runs to move off a host in maintenance now, within every SLA.

Input: the host's runs (`HostRun`: job, instance, job type, whether a replacement already
runs elsewhere, whether a kill is under way), each job's SLA budget (`JobBudget`:
``sla.maximumUnavailableInstances``, None when the job sets none, and how many of its
instances are unavailable now anywhere in the cluster), ``now_ms`` and the maintenance
deadline (None: no deadline). Output (`DrainPlan`): actions, whether the host is drained
(it runs nothing), and one reason per run that is still waiting.

Contract:
- SERVICE runs are replaced first (Kubernetes users have asked for this for years): the
  planner asks for a replacement elsewhere (START_REPLACEMENT), and KILLs the old run
  only once its replacement is healthy, so the instance never stops serving. That costs
  no availability; to bound the surge, at most ``max(1, maximumUnavailableInstances)``
  replacements of one job are starting at once on the host (no cap without an SLA).
- BATCH runs are killed (the job manager retries them elsewhere). STATEFUL runs are
  killed too (no replacement elsewhere: their volume is on this host; they come back to
  it after the maintenance). Each such kill counts against its job's budget: it is
  issued only while ``unavailable + kills so far < maximumUnavailableInstances`` (0
  blocks every voluntary kill, like a PodDisruptionBudget with maxUnavailable 0).
- DAEMON runs stop last: only once no other run is left on the host. A daemon instance
  exists for its host, so its SLA does not hold it back.
- Once the deadline has passed, every run is killed whatever the SLA (a service without a
  healthy replacement too), and the reason says so; daemons still stop last.
- Runs whose kill is under way wait. A host with no runs is drained.
- Deterministic: runs are handled in a fixed order (type: batch, service, stateful,
  daemon; then job id, then instance), whatever order they are given in.

Example (deadline not passed; job `api` SERVICE with max 1 unavailable, 0 unavailable):

    =======================================  ====================================
    runs on the host                          actions (waiting)
    =======================================  ====================================
    api/0 SERVICE, api/1 SERVICE, etl/0 BATCH  kill etl/0; replace api/0 elsewhere
                                               (api/1 waits: 1 replacement of api
                                               starting at a time)
    api/0 (replacement healthy), api/1         kill api/0; replace api/1
    dns/0 DAEMON, api/1 (replacement starting) (dns/0 stops last; api/1 waits)
    dns/0 DAEMON                               kill dns/0
    (nothing)                                  drained
    =======================================  ====================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from peloton.model.spec import JobType

__all__ = [
    "Replacement", "HostRun", "JobBudget", "DrainActionKind", "DrainAction", "DrainPlan",
    "plan_drain",
]


class Replacement(StrEnum):
    NONE = "NONE"            # no replacement asked for yet
    STARTING = "STARTING"    # asked for, not healthy yet
    HEALTHY = "HEALTHY"      # runs healthily elsewhere: the old run may go


@dataclass(frozen=True, slots=True)
class HostRun:
    job_id: str
    instance: int
    job_type: str                      # a JobType name
    replacement: Replacement = Replacement.NONE
    ending: bool = False               # a kill is already under way

    @property
    def name(self) -> str:
        return f"{self.job_id}/{self.instance}"


@dataclass(frozen=True, slots=True)
class JobBudget:
    max_unavailable: int | None   # sla.maximumUnavailableInstances; None: no SLA
    unavailable: int = 0          # instances of the job unavailable now, cluster-wide


class DrainActionKind(StrEnum):
    START_REPLACEMENT = "start_replacement"
    KILL = "kill"


@dataclass(frozen=True, slots=True)
class DrainAction:
    kind: DrainActionKind
    job_id: str
    instance: int
    reason: str


@dataclass(frozen=True, slots=True)
class DrainPlan:
    host: str
    actions: tuple[DrainAction, ...]
    drained: bool
    waiting: tuple[str, ...]   # one reason per run that waits

    @property
    def reason(self) -> str:
        if self.drained:
            return f"host {self.host} is drained: it runs nothing"
        if not self.waiting:
            return f"host {self.host} is draining: {len(self.actions)} action(s) under way"
        return f"host {self.host} is not drained yet: " + "; ".join(self.waiting)


_ORDER = {JobType.BATCH: 0, JobType.SERVICE: 1, JobType.STATEFUL: 2, JobType.DAEMON: 3}
_NO_SLA = JobBudget(None, 0)


def plan_drain(host: str, runs: Sequence[HostRun], jobs: Mapping[str, JobBudget],
               now_ms: int, deadline_ms: int | None, *,
               replace_first: bool = True) -> DrainPlan:
    """The next moves for ``host`` (see the module doc); pure and deterministic.

    ``replace_first=False`` is Peloton's drain: a SERVICE run is killed like a batch run,
    within its job's budget (its instance restarts elsewhere once killed)."""
    if not runs:
        return DrainPlan(host, (), True, ())
    forced = deadline_ms is not None and now_ms >= deadline_ms
    ordered = sorted(runs, key=lambda r: (_ORDER.get(r.job_type, 0), r.job_id, r.instance))
    others = sum(1 for r in ordered if r.job_type != JobType.DAEMON)
    spent: dict[str, int] = {}      # kills charged to each job's budget this round
    starting: dict[str, int] = {}   # replacements starting per job (before this round too)
    for r in ordered:
        if r.job_type == JobType.SERVICE and r.replacement is Replacement.STARTING:
            starting[r.job_id] = starting.get(r.job_id, 0) + 1
    actions: list[DrainAction] = []
    waiting: list[str] = []
    for r in ordered:
        budget = jobs.get(r.job_id, _NO_SLA)
        if r.ending:
            waiting.append(f"{r.name}: being killed")
        elif r.job_type == JobType.DAEMON:
            _daemon(r, others, actions, waiting)
        elif forced:
            actions.append(_kill(r, "the maintenance deadline has passed"))
        elif r.job_type == JobType.SERVICE and replace_first:
            _service(r, budget, starting, actions, waiting)
        else:
            _within_budget(r, budget, spent, actions, waiting)
    return DrainPlan(host, tuple(actions), False, tuple(waiting))


def _kill(r: HostRun, why: str) -> DrainAction:
    return DrainAction(DrainActionKind.KILL, r.job_id, r.instance, why)


def _daemon(r: HostRun, others: int, actions: list[DrainAction], waiting: list[str]) -> None:
    if others:
        waiting.append(f"{r.name}: a daemon stops last ({others} other run(s) still on "
                       "the host)")
    else:
        actions.append(_kill(r, "daemon: the rest of the host is drained"))


def _service(r: HostRun, budget: JobBudget, starting: dict[str, int],
             actions: list[DrainAction], waiting: list[str]) -> None:
    if r.replacement is Replacement.HEALTHY:
        actions.append(_kill(r, "its replacement runs healthily elsewhere"))
        return
    if r.replacement is Replacement.STARTING:
        waiting.append(f"{r.name}: its replacement is starting elsewhere")
        return
    cap = None if budget.max_unavailable is None else max(1, budget.max_unavailable)
    now = starting.get(r.job_id, 0)
    if cap is not None and now >= cap:
        waiting.append(f"{r.name}: {now} replacement(s) of job {r.job_id} starting "
                       f"already (at most {cap} at once)")
        return
    starting[r.job_id] = now + 1
    actions.append(DrainAction(DrainActionKind.START_REPLACEMENT, r.job_id, r.instance,
                               "start a replacement elsewhere before the old run stops"))


def _within_budget(r: HostRun, budget: JobBudget, spent: dict[str, int],
                   actions: list[DrainAction], waiting: list[str]) -> None:
    used = budget.unavailable + spent.get(r.job_id, 0)
    if budget.max_unavailable is not None and used >= budget.max_unavailable:
        where = " (its volume is on this host)" if r.job_type == JobType.STATEFUL else ""
        waiting.append(f"{r.name}{where}: job {r.job_id} has {used} instance(s) "
                       f"unavailable, its SLA allows {budget.max_unavailable}")
        return
    spent[r.job_id] = spent.get(r.job_id, 0) + 1
    why = {JobType.STATEFUL: "stateful: stops here, comes back to this host after the "
                             "maintenance",
           JobType.SERVICE: "service: restarts elsewhere"}.get(r.job_type,
                                                              "batch: retried elsewhere")
    actions.append(_kill(r, why))
