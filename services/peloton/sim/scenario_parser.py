"""Parsing a scenario mapping (already read from YAML/JSON) into a `Scenario`.

`parse_scenario(doc)` raises `ScenarioError` naming the field and the reason. Pool
documents are parsed by the resource manager's own `parse_pool_config` (plus a `parent`
path), and the tree is validated by `build_tree` against the hosts' capacity. Every
field is described in docs/sim.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from peloton.model.resources import KINDS, Resources
from peloton.resmgr.domain import (
    ROOT,
    PoolConfig,
    PoolConfigError,
    PoolTree,
    build_tree,
    parse_pool_config,
)

from .scenario import (
    BatchParams,
    Diurnal,
    ExplicitJob,
    FailureParams,
    HostGroup,
    LogNormal,
    Scenario,
    ScenarioError,
    SchedulerParams,
    ServiceParams,
    Tier,
)

__all__ = ["parse_scenario"]

_TOP = {"name", "seed", "duration_s", "hosts", "pools", "scheduler", "failures",
        "workload", "jobs", "description"}


def parse_scenario(doc: Any) -> Scenario:
    """Parse and validate a scenario mapping (see docs/sim.md for every field)."""
    m = _map(doc, "scenario")
    _no_unknown(m, _TOP, "scenario")
    name = _str(m.get("name", "scenario"), "name")
    seed = _int(m.get("seed", 0), "seed", low=0)
    duration = _num(m.get("duration_s"), "duration_s", low=1e-9)
    hosts = tuple(_host_group(h, f"hosts[{i}]") for i, h in enumerate(_list(m.get("hosts"),
                                                                             "hosts")))
    if not hosts:
        raise ScenarioError("hosts: at least one host group is needed")
    pools = tuple(_pool(p, f"pools[{i}]") for i, p in enumerate(_list(m.get("pools"), "pools")))
    capacity = Resources()
    for g in hosts:
        capacity = capacity + g.resources.scale(g.count)
    try:
        tree, errors = build_tree(pools, capacity)
    except PoolConfigError as exc:
        raise ScenarioError(f"pools: {exc}") from None
    if errors:
        raise ScenarioError("pools: " + "; ".join(errors))
    leaves = set(tree.leaves())
    scheduler = _scheduler(m.get("scheduler", {}))
    failures = _failures(m.get("failures", {}))
    workload = _map(m.get("workload", {}), "workload")
    _no_unknown(workload, {"tiers", "batch", "services"}, "workload")
    tiers = tuple(_tier(t, f"workload.tiers[{i}]")
                  for i, t in enumerate(_list(workload.get("tiers", []), "workload.tiers")))
    batch = None
    if "batch" in workload:
        if not tiers:
            raise ScenarioError("workload.tiers: batch jobs need at least one tier")
        batch = _batch(workload["batch"], tiers, tree, leaves)
    services = None
    if "services" in workload:
        services = _services(workload["services"], tree, leaves)
    tier_by_name = {t.name: t for t in tiers}
    if services is not None:
        tier_by_name.setdefault(services.tier.name, services.tier)
    jobs = tuple(_job(j, f"jobs[{i}]", tree, leaves, tier_by_name)
                 for i, j in enumerate(_list(m.get("jobs", []), "jobs")))
    if batch is None and services is None and not jobs:
        raise ScenarioError("scenario: no work (give workload.batch, workload.services or jobs)")
    all_tiers = list(tiers)
    for t in [services.tier] if services else []:
        if t.name not in {x.name for x in all_tiers}:
            all_tiers.append(t)
    for j in jobs:
        if j.tier.name not in {x.name for x in all_tiers}:
            all_tiers.append(j.tier)
    return Scenario(name, seed, duration, hosts, pools, tree, scheduler, failures, batch,
                    services, jobs, tuple(all_tiers))


def _host_group(raw: Any, where: str) -> HostGroup:
    m = _map(raw, where)
    _no_unknown(m, {"count", "prefix", "zones", *KINDS}, where)
    res = Resources(*(_num(m.get(k, 0.0), f"{where}.{k}", low=0.0) for k in KINDS))
    if res.cpu <= 0:
        raise ScenarioError(f"{where}.cpu: hosts need cpus")
    return HostGroup(
        count=_int(m.get("count", 1), f"{where}.count", low=1),
        prefix=_str(m.get("prefix", f"host{where[6:-1]}"), f"{where}.prefix"),
        resources=res,
        zones=_int(m.get("zones", 1), f"{where}.zones", low=1),
    )


def _pool(raw: Any, where: str) -> tuple[str, PoolConfig]:
    m = dict(_map(raw, where))
    parent = m.pop("parent", ROOT)
    if parent == "root":
        parent = ROOT
    if not isinstance(parent, str) or not parent.startswith("/"):
        raise ScenarioError(f"{where}.parent: must be a path like / or /team, got {parent!r}")
    try:
        return parent.rstrip("/") or ROOT, parse_pool_config(m, where=where)
    except PoolConfigError as exc:
        raise ScenarioError(str(exc)) from None


_SCHED = {f for f in SchedulerParams.__dataclass_fields__}


def _scheduler(raw: Any) -> SchedulerParams:
    m = _map(raw, "scheduler")
    _no_unknown(m, _SCHED, "scheduler")
    d = SchedulerParams()
    cycle = _num(m.get("cycle_s", d.cycle_s), "scheduler.cycle_s", low=1e-3)
    ent = _num(m.get("entitlement_cycle_s", d.entitlement_cycle_s),
               "scheduler.entitlement_cycle_s", low=cycle)
    return SchedulerParams(
        cycle_s=cycle,
        entitlement_cycle_s=ent,
        preemption=_bool(m.get("preemption", d.preemption), "scheduler.preemption"),
        in_pool_preemption=_bool(m.get("in_pool_preemption", d.in_pool_preemption),
                                 "scheduler.in_pool_preemption"),
        sustained_cycles=_int(m.get("sustained_cycles", d.sustained_cycles),
                              "scheduler.sustained_cycles", low=1),
        admission_window=_int(m.get("admission_window", d.admission_window),
                              "scheduler.admission_window", low=1),
        max_round_tasks=_int(m.get("max_round_tasks", d.max_round_tasks),
                             "scheduler.max_round_tasks", low=0),
        ready_timeout_s=_num(m.get("ready_timeout_s", d.ready_timeout_s),
                             "scheduler.ready_timeout_s", low=0.0),
        sample_s=_num(m.get("sample_s", d.sample_s), "scheduler.sample_s", low=cycle),
    )


def _failures(raw: Any) -> FailureParams:
    m = _map(raw, "failures")
    _no_unknown(m, {"host_mtbf_s", "repair_s"}, "failures")
    return FailureParams(
        host_mtbf_s=_num(m.get("host_mtbf_s", 0.0), "failures.host_mtbf_s", low=0.0),
        repair_s=_num(m.get("repair_s", 3600.0), "failures.repair_s", low=1e-3),
    )


def _tier(raw: Any, where: str) -> Tier:
    m = _map(raw, where)
    _no_unknown(m, {"name", "priority", "weight", "preemptible"}, where)
    return Tier(
        name=_str(m.get("name"), f"{where}.name"),
        priority=_int(m.get("priority", 0), f"{where}.priority"),
        weight=_num(m.get("weight", 1.0), f"{where}.weight", low=0.0),
        preemptible=_bool(m.get("preemptible", True), f"{where}.preemptible"),
    )


def _weights(
    raw: Any, where: str, tree: PoolTree, leaves: set[str]
) -> tuple[tuple[str, float], ...]:
    m = _map(raw, where)
    if not m:
        raise ScenarioError(f"{where}: name at least one leaf pool")
    out = []
    for ref, w in m.items():
        path = _leaf(ref, f"{where}.{ref}", tree, leaves)
        out.append((path, _num(w, f"{where}.{ref}", low=0.0)))
    if sum(w for _, w in out) <= 0:
        raise ScenarioError(f"{where}: weights must not all be 0")
    return tuple(out)


def _leaf(ref: Any, where: str, tree: PoolTree, leaves: set[str]) -> str:
    path = tree.resolve(_str(ref, where))
    if path is None or path not in leaves:
        raise ScenarioError(f"{where}: {ref!r} is not a leaf pool of the tree")
    return path


def _lognormal(raw: Any, where: str, default: LogNormal) -> LogNormal:
    if raw is None:
        return default
    m = _map(raw, where)
    _no_unknown(m, {"median", "sigma", "min", "max"}, where)
    low = _num(m.get("min", default.low), f"{where}.min", low=0.0)
    high = _num(m.get("max", default.high), f"{where}.max", low=low)
    return LogNormal(
        median=_num(m.get("median", default.median), f"{where}.median", low=1e-12),
        sigma=_num(m.get("sigma", default.sigma), f"{where}.sigma", low=0.0),
        low=low,
        high=high,
    )


_BATCH = {"pools", "arrival", "diurnal", "tasks_per_job", "duration_s", "cpu", "memory_mb",
          "usage", "gang", "gpu", "start_s", "stop_s", "max_jobs", "max_tasks"}


def _batch(raw: Any, tiers: tuple[Tier, ...], tree: PoolTree, leaves: set[str]) -> BatchParams:
    w = "workload.batch"
    m = _map(raw, w)
    _no_unknown(m, _BATCH, w)
    d = BatchParams((), tiers)
    arrival = _map(m.get("arrival", {}), f"{w}.arrival")
    _no_unknown(arrival, {"weibull_shape", "weibull_scale_s"}, f"{w}.arrival")
    diurnal = _map(m.get("diurnal", {}), f"{w}.diurnal")
    _no_unknown(diurnal, {"amplitude", "period_s", "peak_s"}, f"{w}.diurnal")
    amplitude = _num(diurnal.get("amplitude", 0.0), f"{w}.diurnal.amplitude", low=0.0)
    if amplitude >= 1.0:
        raise ScenarioError(f"{w}.diurnal.amplitude: must be below 1, got {amplitude:g}")
    tpj = _map(m.get("tasks_per_job", {}), f"{w}.tasks_per_job")
    _no_unknown(tpj, {"mean", "median", "max"}, f"{w}.tasks_per_job")
    usage = _map(m.get("usage", {}), f"{w}.usage")
    _no_unknown(usage, {"min", "max"}, f"{w}.usage")
    gang = _map(m.get("gang", {}), f"{w}.gang")
    _no_unknown(gang, {"fraction", "max_tasks"}, f"{w}.gang")
    gpu = _map(m.get("gpu", {}), f"{w}.gpu")
    _no_unknown(gpu, {"fraction", "per_task", "max_tasks"}, f"{w}.gpu")
    per_task = tuple(_int(x, f"{w}.gpu.per_task", low=1)
                     for x in _list(gpu.get("per_task", [1]), f"{w}.gpu.per_task"))
    mean = _num(tpj.get("mean", d.tasks_mean), f"{w}.tasks_per_job.mean", low=1.0)
    median = _int(tpj.get("median", d.tasks_median), f"{w}.tasks_per_job.median", low=1)
    if median > mean:
        raise ScenarioError(f"{w}.tasks_per_job: median {median} above mean {mean:g}")
    u_min = _num(usage.get("min", d.usage_min), f"{w}.usage.min", low=0.0)
    return BatchParams(
        pools=_weights(m.get("pools"), f"{w}.pools", tree, leaves),
        tiers=tiers,
        arrival_shape=_num(arrival.get("weibull_shape", d.arrival_shape),
                           f"{w}.arrival.weibull_shape", low=1e-3),
        arrival_scale_s=_num(arrival.get("weibull_scale_s", d.arrival_scale_s),
                             f"{w}.arrival.weibull_scale_s", low=1e-9),
        diurnal=Diurnal(
            amplitude=amplitude,
            period_s=_num(diurnal.get("period_s", 86_400.0), f"{w}.diurnal.period_s",
                          low=1.0),
            peak_s=_num(diurnal.get("peak_s", 50_400.0), f"{w}.diurnal.peak_s"),
        ),
        tasks_mean=mean,
        tasks_median=median,
        tasks_max=_int(tpj.get("max", d.tasks_max), f"{w}.tasks_per_job.max", low=1),
        duration_s=_lognormal(m.get("duration_s"), f"{w}.duration_s", d.duration_s),
        cpu=_lognormal(m.get("cpu"), f"{w}.cpu", d.cpu),
        memory_mb=_lognormal(m.get("memory_mb"), f"{w}.memory_mb", d.memory_mb),
        usage_min=u_min,
        usage_max=_num(usage.get("max", d.usage_max), f"{w}.usage.max", low=u_min),
        gang_fraction=_num(gang.get("fraction", d.gang_fraction), f"{w}.gang.fraction",
                           low=0.0, high=1.0),
        gang_max_tasks=_int(gang.get("max_tasks", d.gang_max_tasks), f"{w}.gang.max_tasks",
                            low=2),
        gpu_fraction=_num(gpu.get("fraction", 0.0), f"{w}.gpu.fraction", low=0.0, high=1.0),
        gpu_per_task=per_task or (1,),
        gpu_max_tasks=_int(gpu.get("max_tasks", d.gpu_max_tasks), f"{w}.gpu.max_tasks",
                           low=1),
        start_s=_num(m.get("start_s", 0.0), f"{w}.start_s", low=0.0),
        stop_s=_num(m.get("stop_s", float("inf")), f"{w}.stop_s", low=0.0),
        max_jobs=_int(m.get("max_jobs", d.max_jobs), f"{w}.max_jobs", low=0),
        max_tasks=_int(m.get("max_tasks", d.max_tasks), f"{w}.max_tasks", low=0),
    )


_SERVICES = {"pools", "jobs", "tier", "submit_over_s", "instances", "cpu", "memory_mb",
             "lifetime_mean_s", "usage"}


def _services(raw: Any, tree: PoolTree, leaves: set[str]) -> ServiceParams:
    w = "workload.services"
    m = _map(raw, w)
    _no_unknown(m, _SERVICES, w)
    d = ServiceParams((), 0)
    usage = _map(m.get("usage", {}), f"{w}.usage")
    _no_unknown(usage, {"min", "max"}, f"{w}.usage")
    u_min = _num(usage.get("min", d.usage_min), f"{w}.usage.min", low=0.0)
    tier = _tier(m["tier"], f"{w}.tier") if "tier" in m else d.tier
    return ServiceParams(
        pools=_weights(m.get("pools"), f"{w}.pools", tree, leaves),
        jobs=_int(m.get("jobs", 0), f"{w}.jobs", low=0),
        tier=tier,
        submit_over_s=_num(m.get("submit_over_s", d.submit_over_s), f"{w}.submit_over_s",
                           low=0.0),
        instances=_lognormal(m.get("instances"), f"{w}.instances", d.instances),
        cpu=_lognormal(m.get("cpu"), f"{w}.cpu", d.cpu),
        memory_mb=_lognormal(m.get("memory_mb"), f"{w}.memory_mb", d.memory_mb),
        lifetime_mean_s=_num(m.get("lifetime_mean_s", d.lifetime_mean_s),
                             f"{w}.lifetime_mean_s", low=1e-3),
        usage_min=u_min,
        usage_max=_num(usage.get("max", d.usage_max), f"{w}.usage.max", low=u_min),
    )


_JOB = {"name", "pool", "submit_s", "instances", "duration_s", "tier", "priority",
        "preemptible", "service", "gang", "usage", *KINDS}


def _job(raw: Any, where: str, tree: PoolTree, leaves: set[str],
         tiers: Mapping[str, Tier]) -> ExplicitJob:
    m = _map(raw, where)
    _no_unknown(m, _JOB, where)
    if "tier" in m:
        name = _str(m["tier"], f"{where}.tier")
        if name not in tiers:
            raise ScenarioError(f"{where}.tier: unknown tier {name!r}")
        tier = tiers[name]
    else:
        priority = _int(m.get("priority", 0), f"{where}.priority")
        tier = Tier(f"priority-{priority}", priority, 1.0, True)
    if "preemptible" in m:
        tier = Tier(tier.name, tier.priority, tier.weight,
                    _bool(m["preemptible"], f"{where}.preemptible"))
    res = Resources(*(_num(m.get(k, 0.0), f"{where}.{k}", low=0.0) for k in KINDS))
    return ExplicitJob(
        name=_str(m.get("name", where), f"{where}.name"),
        pool=_leaf(m.get("pool"), f"{where}.pool", tree, leaves),
        submit_s=_num(m.get("submit_s", 0.0), f"{where}.submit_s", low=0.0),
        instances=_int(m.get("instances", 1), f"{where}.instances", low=1),
        resources=res,
        duration_s=_num(m.get("duration_s", float("inf")), f"{where}.duration_s", low=0.0),
        tier=tier,
        service=_bool(m.get("service", False), f"{where}.service"),
        gang=_bool(m.get("gang", False), f"{where}.gang"),
        usage=_num(m.get("usage", 0.3), f"{where}.usage", low=0.0, high=1.0),
    )


# ------------------------------------------------------------------- field helpers


def _map(raw: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ScenarioError(f"{where}: must be a mapping, got {type(raw).__name__}")
    return raw


def _list(raw: Any, where: str) -> Sequence[Any]:
    if not isinstance(raw, list):
        raise ScenarioError(f"{where}: must be a list, got {type(raw).__name__}")
    return raw


def _no_unknown(m: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = set(m) - known
    if unknown:
        raise ScenarioError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")


def _str(raw: Any, where: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise ScenarioError(f"{where}: must be a non-empty string, got {raw!r}")
    return raw


def _bool(raw: Any, where: str) -> bool:
    if not isinstance(raw, bool):
        raise ScenarioError(f"{where}: must be true or false, got {raw!r}")
    return raw


def _num(raw: Any, where: str, low: float | None = None, high: float | None = None) -> float:
    if raw == ".inf" or raw == "inf":
        raw = float("inf")
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw != raw:
        raise ScenarioError(f"{where}: must be a number, got {raw!r}")
    value = float(raw)
    if low is not None and value < low:
        raise ScenarioError(f"{where}: must be at least {low:g}, got {value:g}")
    if high is not None and value > high:
        raise ScenarioError(f"{where}: must be at most {high:g}, got {value:g}")
    return value


def _int(raw: Any, where: str, low: int | None = None) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ScenarioError(f"{where}: must be an integer, got {raw!r}")
    if low is not None and raw < low:
        raise ScenarioError(f"{where}: must be at least {low}, got {raw}")
    return raw
