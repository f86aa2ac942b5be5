"""Running a scenario event by event and watching the pools (test helper)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from peloton.sim import Scenario, Simulation
from peloton.sim.events import Kind
from peloton.sim.scheduler import entitlement_cpu


@dataclass
class Trace:
    """Per cycle: time, and per pool running cpu, entitlement cpu and demand cpu."""

    t: list[float] = field(default_factory=list)
    running: list[list[float]] = field(default_factory=list)
    entitled: list[list[float]] = field(default_factory=list)
    demand: list[list[float]] = field(default_factory=list)

    def at(self, time: float) -> int:
        return max(i for i, t in enumerate(self.t) if t <= time)


def run_traced(scenario: Scenario, seed: int | None = None) -> tuple[Simulation, Trace]:
    sim = Simulation(scenario, np.random.default_rng(scenario.seed if seed is None else seed))
    trace = Trace()
    pools = sim.state.pools
    while (event := sim.step()) is not None:
        if event.kind is Kind.CYCLE:
            trace.t.append(sim.now)
            trace.running.append(pools.running[:, 0].tolist())
            trace.entitled.append(entitlement_cpu(sim.scheduler.entitlements, pools.paths))
            trace.demand.append((pools.pending[:, 0] + pools.holding[:, 0]).tolist())
    return sim, trace
