"""Test fixtures named by their shape: `n_hosts(4, cpu=32)`, `job("web", 3, cpu=1)`."""

from __future__ import annotations

from collections.abc import Mapping

from peloton.model.constraint import Constraint
from peloton.model.resources import Resources
from peloton.placement.domain import HostView, Strategy, TaskRequest


def host(
    name: str, cpu: float = 32, memory: float = 131072, disk: float = 1_000_000,
    gpu: float = 0, *, free: Resources | None = None, slack: Resources | None = None,
    labels: Mapping[str, str] | None = None, tasks: Mapping[str, int] | None = None,
    ports: tuple[tuple[int, int], ...] = ((31000, 31999),),
) -> HostView:
    cap = Resources(cpu, memory, disk, gpu)
    return HostView(name, cap, free if free is not None else cap, slack or Resources(),
                    dict(labels or {}), dict(tasks or {}), ports)


def n_hosts(n: int, prefix: str = "h", **kw: object) -> list[HostView]:
    """n identical hosts named h0..h(n-1) (zero-padded so names sort by number)."""
    width = len(str(n - 1))
    return [host(f"{prefix}{i:0{width}d}", **kw) for i in range(n)]  # type: ignore[arg-type]


def job(
    job_id: str, n: int, cpu: float = 1, memory: float = 1024, disk: float = 0,
    gpu: float = 0, *, ports: tuple[str, ...] = (), constraint: Constraint | None = None,
    labels: Mapping[str, str] | None = None, gang: bool = False,
    strategy: Strategy = Strategy.PACK, revocable: bool = False, priority: int = 0,
) -> list[TaskRequest]:
    res = Resources(cpu, memory, disk, gpu)
    return [
        TaskRequest(f"{job_id}-{i}", job_id, res, ports, constraint, dict(labels or {}),
                    job_id if gang else None, n if gang else 1, strategy, revocable, priority)
        for i in range(n)
    ]


def where(result_placements: list, task_prefix: str = "") -> dict[str, str]:  # type: ignore[type-arg]
    """task id -> host name, for tasks whose id starts with task_prefix."""
    return {p.task_id: p.host for p in result_placements if p.task_id.startswith(task_prefix)}


def cycle(hosts: list[HostView], tasks: list[TaskRequest], **config: object):  # type: ignore[no-untyped-def]
    """(CycleState, groups in placement order) for driving one plugin directly."""
    from peloton.placement.domain.framework import CycleState, PlacementConfig
    from peloton.placement.domain.grouping import build_units
    from peloton.placement.domain.hostindex import HostTable

    table = HostTable(hosts)
    state = CycleState(table, PlacementConfig(**config))  # type: ignore[arg-type]
    units, invalid = build_units(tasks, table.capacity.max(axis=1))
    assert not invalid, invalid
    return state, [g for u in units for g in u.groups]
