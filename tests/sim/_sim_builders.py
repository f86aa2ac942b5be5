"""Scenario builders for the simulator tests, named by their shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from peloton.sim import Scenario, parse_scenario
from peloton.sim.loader import load_scenario

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


def example(name: str, **overrides: Any) -> Scenario:
    """examples/sim/<name>.yaml with top-level fields replaced (e.g. duration_s)."""
    scenario = load_scenario(EXAMPLES / f"{name}.yaml")
    if not overrides:
        return scenario
    import yaml

    doc = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    doc.update(overrides)
    return parse_scenario(doc)


def pool(name: str, cpu_reservation: float, cpu_limit: float, share: float = 1.0,
         memory: float = 1e6, memory_reservation: float = 0.0) -> dict[str, Any]:
    return {
        "name": name,
        "resources": {
            "cpu": {"reservation": cpu_reservation, "limit": cpu_limit, "share": share},
            "memory": {"reservation": memory_reservation, "limit": memory, "share": share},
        },
    }


def two_pools(
    *, hosts: int = 3, cpu_per_host: float = 4, a: tuple[float, float] = (6, 12),
    b: tuple[float, float] = (6, 12), shares: tuple[float, float] = (1, 1),
    jobs: list[dict[str, Any]] | None = None, duration_s: float = 1800,
    cycle_s: float = 1, entitlement_cycle_s: float = 10, sustained_cycles: int = 2,
    in_pool: bool = True,
) -> Scenario:
    """Pools /A and /B on `hosts` x `cpu_per_host` cpus with the given jobs."""
    memory = hosts * 16384
    return parse_scenario({
        "name": "two-pools",
        "seed": 1,
        "duration_s": duration_s,
        "scheduler": {"cycle_s": cycle_s, "entitlement_cycle_s": entitlement_cycle_s,
                      "sustained_cycles": sustained_cycles, "sample_s": entitlement_cycle_s,
                      "in_pool_preemption": in_pool},
        "hosts": [{"count": hosts, "prefix": "agent", "cpu": cpu_per_host, "memory": 16384}],
        "pools": [pool("A", a[0], a[1], shares[0], memory, memory / 2),
                  pool("B", b[0], b[1], shares[1], memory, memory / 2)],
        "jobs": jobs or [],
    })


def job(name: str, pool_path: str, instances: int, *, at: float = 0, cpu: float = 1,
        duration: float = 100_000, **extra: Any) -> dict[str, Any]:
    return {"name": name, "pool": pool_path, "submit_s": at, "instances": instances,
            "cpu": cpu, "memory": 128, "duration_s": duration, **extra}
