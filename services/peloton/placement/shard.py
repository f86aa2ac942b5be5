"""Several placement engines over disjoint shares of the work: one `PlacementShardCore` per
partition of tasks-admitted.

Partitioned mode (issue 10; Peloton ran several placement engines at once): N instances
of the consumer group `peloton-placement` share the partitions of tasks-admitted (keyed
by job: the resource manager puts in one record only jobs of one partition), so each
job's admissions go to one engine, and a busy pool's runs are spread over all of them.
The engine of partition p reads partition p of job-events too (co-partitioned with
tasks-admitted: the specs, task changes and ends of its own jobs only) and every other
fact whole (every engine's placements and the host manager's refusals, launches, offers),
so its host views count what the other engines placed (their runs it knows from those
facts alone, `placement/domain/foreign.py`); it places only the runs of its share
(`PlacementBoard.share`: jobs whose id hashes to p). Two engines can still place onto the
same free room in the same instant: the host manager re-validates every placement against
the host's current resources and refuses the later one (PlacementRejected), and its
engine places the run again, as with one engine after a stale offer.

Taking turns: engines that place in the same instant see the same free room and collide.
So the engine of partition p places only in its time slot: rounds of `SLOT_MS`, slot
(now // SLOT_MS) % partitions == p; by its next turn each engine has read the others'
placements (its host views count them), so most collisions never happen. The cost: a run
waits at most one cycle of slots (partitions x SLOT_MS) longer for its round.

A run belongs to the share of its job (a gang, all of one job, stays with one engine). No
routing is needed: the co-partitioned topics are tasks-admitted and job-events (the
resource manager and the job manager key both by job).

Snapshots: an engine's snapshot holds only its share's jobs and runs, so one written
before engines read only their partition of job-events (every job's runs in its book,
whose ends it will no longer read) is passed over (`snapshot_version`) and the engine
replays its partition once.
"""

from __future__ import annotations

from peloton.bus.catalog import topic
from peloton.bus.routing import Route, partition_of
from peloton.model.event import Event
from peloton.placement.service import PlacementCore

__all__ = ["PLACEMENT_ROUTE", "PlacementShardCore", "SLOT_MS"]

SLOT_MS = 50

PLACEMENT_ROUTE = Route(service="placement", inbox=None, own=("tasks-admitted", "job-events"),
                        splits={})


class PlacementShardCore(PlacementCore):
    """The placement engine of the jobs whose admissions land in partition `partition`."""

    snapshot_version = PlacementCore.snapshot_version * 100 + 1  # see the module doc

    def __init__(self, partition: int, tick_interval: float = 0.05) -> None:
        super().__init__(tick_interval)
        self.partition = partition
        self.partitions = topic("tasks-admitted").partitions
        self._partition_of = partition_of("tasks-admitted")  # as the resource manager's
        self.board.share = self._mine

    def tick_wanted(self) -> bool:
        return False  # an engine places in its own time slots only (see `tick`)

    def tick(self, now: int) -> list[Event]:
        if (now // SLOT_MS) % self.partitions != self.partition:
            return []  # another engine's turn
        return super().tick(now)

    def _mine(self, job_id: str) -> bool:
        return self._partition_of(job_id) == self.partition

    def restore(self, state: dict) -> None:  # type: ignore[type-arg]
        super().restore(state)
        self.board.share = self._mine
