"""An in-memory runner of the real service cores: no Kafka, the same topics and rules.

Contract (`MemoryRunner`):
- Topics and partitions come from the catalog (`peloton.bus.catalog`); each partition is
  an ordered log of records. A published event is encoded by the real codec (a body that
  does not match its schema raises `EncodeError` at once) and appended to the partition
  its key (`Event.key`) hashes to with Kafka's own partitioner (murmur2).
- Every service process (`add_service(name, factory)`, `add_agent(host, ...)`) consumes
  its core's input topics with its own positions. Within a partition records arrive in
  order; the order across partitions, topics and services is drawn from a seeded
  `random.Random`, so a run is deterministic for its seed and different seeds explore
  different interleavings. Each service takes at most `rate_per_s` records per simulated
  second, so a burst builds real backlogs and facts about one run reach a service in any
  order across topics (as on Kafka).
- An agent reads only the records of its inputs (launches, kills) keyed by its host, in
  their partition's order: a launch reaches the agent of its host and no other, and an
  agent with nothing for it costs nothing per step (issue 10, item 3 does the same on
  Kafka). A record for a host no agent serves waits for that host's agent (a note says
  so).
- The shell is modelled as `bus/service.py` runs it: decode (undecodable or misplaced
  records are dead-lettered), `core.handle(etype, body, now)`, publish what it returns;
  `core.tick(now)` every `tick_interval`; a core that raises is dead-lettered, and in
  `strict` mode (the default) `HandlerFailed` is raised so a test sees the bug.
- Simulated time (ms) advances in `step_ms` steps. Agents are `AgentCore`s in simulated
  mode on an event loop whose clock is the simulated one: a run ends after its simulated
  duration (`sleep N` in its command), reported at the agent's next tick.
- `kill(name)` is a kill -9: the core and the shell's positions are gone; the consumer
  group's offsets committed every `commit_interval_ms` survive. `start(name)` builds a
  new core, folds its `replay` topics from the start to their end, publishes
  `after_replay`, then consumes from the committed offsets (records after the last commit
  are delivered again, those replay folded are skipped). A killed agent's runs die; it
  comes back as a new incarnation.
- `take_snapshot(name)` stores a core's snapshot with its replay positions (as the shell
  does every `snapshot_interval_ms`); `reload(name)` swaps a live core for a new one
  restored from the JSON round trip of its snapshot, positions kept (an exact restore
  leaves the log unchanged).
- `redeliver` (0..1): the chance that a record is delivered once more later (at-least-once).
- `watch` (`peloton.runner.watch.Watch`) folds the log as a bystander: job states, latest
  task runs, and runs alive on agents with a check that no task runs twice at once.

Example::

    from peloton.runner import batch_job, cluster

    runner = cluster(seed=1, hosts=4)
    runner.submit([batch_job(f"job-{i}", instances=2, duration_s=0.5) for i in range(10)])
    assert runner.run_until(runner.watch.all_terminal, max_ms=30_000)
    assert runner.watch.states() == {"SUCCEEDED": 10} and not runner.watch.violations
    runner.restart("jobmgr")  # kill -9 and start again, then keep running
"""

from peloton.runner.cluster import SERVICES, batch_job, cluster
from peloton.runner.footprint import footprint, footprints
from peloton.runner.memory import Delivery, HandlerFailed, MemoryRunner, Record, partition_for
from peloton.runner.watch import TaskView, Watch

__all__ = [
    "MemoryRunner", "Record", "Delivery", "HandlerFailed", "partition_for", "Watch",
    "TaskView", "cluster", "batch_job", "SERVICES", "footprint", "footprints",
]
