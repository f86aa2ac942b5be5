"""A discrete-event cluster simulator over the production scheduling cores.

Borg, Omega and Armada each run their real scheduler under simulated time to judge it
on a workload; this package does the same for Peloton-py. Hosts, a pool tree and a
seeded workload come from a scenario file; every decision is made by the same pure
cores the services run (pool tree and entitlement, admission and preemption from
`peloton.resmgr.domain`, placement from `peloton.placement.domain`, the task state
machine from `peloton.jobmgr.domain.states`), without Kafka.

Modules, one concept each:
- `scenario`, `scenario_parser`: the scenario as values, and its parser;
- `loader`: reading a scenario file (YAML);
- `distributions`, `workload`: the workload model (Google 2019 trace fits) drawn from a
  numpy Generator passed in;
- `events`: the (time, priority, sequence) event heap;
- `tasktable`, `hostbook`, `state`: the books (tasks as columns, hosts, pools, queues)
  and the only operations that change them;
- `scheduler`: one scheduling cycle made of the cores;
- `metrics`: utilization, fairness, time to entitlement, queueing delay, preemption;
- `simulation`: the event loop (`Simulation`, `SimResult`);
- `report`: metrics.json and PNG plots;
- `runner_engine`, `runner_ledger`: the same scenario on the production services end to
  end (the in-memory runner, `peloton sim run --engine runner`), and the bystander that
  folds their log into the same metrics; `mixed`: every job type on the runner.

Everything but `loader`, `report` and the runner modules (which drive the services'
shells on a simulated-time event loop) is pure: no I/O, no clock (wall time is read only
through a `clock` callable the shell passes in, for performance figures), no randomness
except the Generator passed in. Same scenario and seed, same metrics. See docs/sim.md.
"""

from .loader import load_scenario
from .report import REPORT_FILES, write_metrics, write_report
from .scenario import Scenario, ScenarioError
from .scenario_parser import parse_scenario
from .simulation import SimResult, Simulation

__all__ = [
    "REPORT_FILES",
    "Scenario",
    "ScenarioError",
    "SimResult",
    "Simulation",
    "load_scenario",
    "parse_scenario",
    "write_metrics",
    "write_report",
]
