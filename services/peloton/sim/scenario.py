"""A simulation scenario: hosts, pool tree, scheduler knobs and workload, as plain values.

Every number of the workload model is a field here, never a constant in the simulator:
the defaults are the published fits of Google's 2019 cluster trace (Borg cell a, free
and best-effort batch tiers), see docs/sim.md. `scenario_parser.parse_scenario` builds a
`Scenario` from a YAML/JSON mapping.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from peloton.model.resources import Resources
from peloton.resmgr.domain import PoolConfig, PoolTree

__all__ = [
    "ScenarioError",
    "HostGroup",
    "SchedulerParams",
    "FailureParams",
    "LogNormal",
    "Diurnal",
    "Tier",
    "BatchParams",
    "ServiceParams",
    "ExplicitJob",
    "Scenario",
]


class ScenarioError(ValueError):
    """A scenario document that cannot be used; the message names the field and why."""


@dataclass(frozen=True, slots=True)
class HostGroup:
    """`count` identical hosts named `<prefix>-<n>`, labelled zone=zone-<n mod zones>."""

    count: int
    prefix: str
    resources: Resources
    zones: int = 1


@dataclass(frozen=True, slots=True)
class SchedulerParams:
    """How often the simulated scheduler runs, and its policy switches.

    One scheduling cycle (entitlement, admission, one placement round) runs every
    `cycle_s`; preemption is planned every `entitlement_cycle_s` and a pool is processed
    after `sustained_cycles` consecutive over-entitlement cycles. `admission_window`
    bounds how many pending jobs per pool one admission scan looks at (Peloton's dequeue
    limit); `max_round_tasks` bounds a placement round (0: no bound). A READY task not
    placed within `ready_timeout_s` goes back to PENDING and releases its allocation.
    """

    cycle_s: float = 10.0
    entitlement_cycle_s: float = 60.0
    preemption: bool = True
    in_pool_preemption: bool = True
    sustained_cycles: int = 5
    admission_window: int = 200
    max_round_tasks: int = 0
    ready_timeout_s: float = 600.0
    sample_s: float = 60.0


@dataclass(frozen=True, slots=True)
class FailureParams:
    """Each host fails after an exponential time of mean `host_mtbf_s` (0: never) and
    returns after an exponential repair time of mean `repair_s`."""

    host_mtbf_s: float = 0.0
    repair_s: float = 3600.0


@dataclass(frozen=True, slots=True)
class LogNormal:
    """Lognormal with the given median and sigma (of the log), clipped to [low, high]."""

    median: float
    sigma: float
    low: float = 0.0
    high: float = float("inf")


@dataclass(frozen=True, slots=True)
class Diurnal:
    """Arrival rate factor 1 + amplitude * cos(2 pi (t - peak_s) / period_s)."""

    amplitude: float = 0.0
    period_s: float = 86_400.0
    peak_s: float = 50_400.0


@dataclass(frozen=True, slots=True)
class Tier:
    """A priority tier: jobs drawn with `weight`, run at `priority`."""

    name: str
    priority: int
    weight: float = 1.0
    preemptible: bool = True


@dataclass(frozen=True, slots=True)
class BatchParams:
    """The generated batch stream (defaults: Google 2019 trace fits, see docs/sim.md)."""

    pools: tuple[tuple[str, float], ...]
    tiers: tuple[Tier, ...]
    arrival_shape: float = 0.54
    arrival_scale_s: float = 33.0
    diurnal: Diurnal = Diurnal()
    tasks_mean: float = 52.5
    tasks_median: int = 1
    tasks_max: int = 10_000
    duration_s: LogNormal = LogNormal(105.0, 1.74, 1.0, 7 * 86_400.0)
    cpu: LogNormal = LogNormal(0.5, 0.81, 0.01, 16.0)
    memory_mb: LogNormal = LogNormal(1024.0, 0.95, 16.0, 65_536.0)
    usage_min: float = 0.2
    usage_max: float = 0.4
    gang_fraction: float = 0.03
    gang_max_tasks: int = 64
    gpu_fraction: float = 0.0
    gpu_per_task: tuple[int, ...] = (1,)
    gpu_max_tasks: int = 16
    start_s: float = 0.0
    stop_s: float = float("inf")
    max_jobs: int = 10**9
    max_tasks: int = 10**9


@dataclass(frozen=True, slots=True)
class ServiceParams:
    """Long-running services: `jobs` jobs submitted uniformly over `submit_over_s`, each
    living an exponential lifetime of mean `lifetime_mean_s` (days, typically)."""

    pools: tuple[tuple[str, float], ...]
    jobs: int
    tier: Tier = Tier("prod", 200, 1.0, False)
    submit_over_s: float = 600.0
    instances: LogNormal = LogNormal(10.0, 1.0, 1.0, 500.0)
    cpu: LogNormal = LogNormal(2.0, 0.5, 0.1, 16.0)
    memory_mb: LogNormal = LogNormal(4096.0, 0.6, 64.0, 65_536.0)
    lifetime_mean_s: float = 3 * 86_400.0
    usage_min: float = 0.2
    usage_max: float = 0.4


@dataclass(frozen=True, slots=True)
class ExplicitJob:
    """One job given literally (tests, reproductions of known situations)."""

    name: str
    pool: str
    submit_s: float
    instances: int
    resources: Resources
    duration_s: float
    tier: Tier
    service: bool = False
    gang: bool = False
    usage: float = 0.3


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: int
    duration_s: float
    hosts: tuple[HostGroup, ...]
    pools: tuple[tuple[str, PoolConfig], ...]
    tree: PoolTree
    scheduler: SchedulerParams = SchedulerParams()
    failures: FailureParams = FailureParams()
    batch: BatchParams | None = None
    services: ServiceParams | None = None
    jobs: tuple[ExplicitJob, ...] = ()
    tiers: tuple[Tier, ...] = field(default=())

    @property
    def host_count(self) -> int:
        return sum(g.count for g in self.hosts)

    @property
    def capacity(self) -> Resources:
        total = Resources()
        for g in self.hosts:
            total = total + g.resources.scale(g.count)
        return total

    def with_seed(self, seed: int) -> Scenario:
        return Scenario(self.name, seed, self.duration_s, self.hosts, self.pools, self.tree,
                        self.scheduler, self.failures, self.batch, self.services, self.jobs,
                        self.tiers)
