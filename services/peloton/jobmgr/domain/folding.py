"""Order-independent judgement of facts about a run (pure).

Kafka orders a partition, not the cluster: the job manager reads admissions, placements,
rejections, launch requests and agent reports from five topics, so facts about one run
arrive in any order. The rule, by `model.taskstate.STAGE`:
- a fact about another run than the task's current one is ignored (older runs ended;
  newer ones do not exist before the job manager starts them);
- a fact proving a LATER stage than the run's state moves the run there at once (the
  stages in between happened; their records are late): `moves_forward`;
- a fact about the same or an EARLIER stage is stale (or a duplicate) and is ignored;
- one stage in between is written out: a launch request or an agent's report about a run
  the job manager holds admitted but not yet placed (READY, PLACING) proves it was placed
  on that host, so the run is recorded PLACED there first (`placement_implied`): its
  history names where it was placed, whichever topic was read first. The other consumers
  of the run's changes see the order they see when nothing is late. (A run not yet
  admitted, PENDING, still jumps: the resource manager never held it.)
- placements are told apart by their round (a job's placements share one partition of
  placement-made, but a replay, a handover or a second engine after a failover may still
  put an older round after a newer one). A run is placed again only after
  its placement was rejected, so rounds only grow: a placement of a round no newer than
  the newest one seen for the run (`placed_round`, kept from the run's PLACED changes)
  is stale, and one of a NEWER round than the one a PLACED run holds supersedes it (the
  older one was rejected; that record is late): `supersedes`;
- the one backward fact, a placement rejection, applies only to the placement the run
  holds (same host, same round). A rejection of a round newer than any placement seen
  (the run is not placed yet, or holds an older round) is HELD (`HeldRejections`) and
  cancels that placement when it arrives, so no order loses it; a rejection of an older
  round is stale (its placement is, or will be, stale too). Held rejections are not in
  the job manager's log: snapshots carry them.
"""

from __future__ import annotations

from typing import Any

from peloton.jobmgr.domain.records import Pending
from peloton.jobmgr.domain.states import can_transition
from peloton.model.taskstate import STAGE, TERMINAL, TaskState

__all__ = ["moves_forward", "placement_implied", "supersedes", "RejectionVerdict",
           "judge_rejection", "HeldRejections"]

S = TaskState


def moves_forward(current: Pending, run: int, target: TaskState) -> bool:
    """True when a fact that `run` reached `target` moves the task's run forward."""
    if run != current.run or current.state in TERMINAL or target == current.state:
        return False
    return STAGE[target] > STAGE[current.state] and can_transition(current.state, target)


def placement_implied(current: Pending, run: int, target: TaskState, host: str | None) -> bool:
    """True when a fact that `run` reached `target` on `host` (a launch request, an agent's
    report) proves a placement on `host` the job manager has not read yet (module doc)."""
    return (bool(host) and run == current.run and current.state in (S.READY, S.PLACING)
            and STAGE[target] > STAGE[S.PLACED] and can_transition(current.state, S.PLACED))


def supersedes(current: Pending, run: int, round_: int) -> bool:
    """True when a placement of `run` in `round_` replaces the placement the run holds."""
    return (current.state == S.PLACED and run == current.run
            and round_ > current.round >= 0)


class RejectionVerdict:
    APPLY = "apply"  # the rejection is for the placement the run holds: back to READY
    HOLD = "hold"  # the run's placement has not been read yet: keep the rejection
    STALE = "stale"  # another run, another placement, or the run is past placement


def same_round(a: int, b: int) -> bool:
    return a == b or a < 0 or b < 0  # -1: a v1 record that did not name its round


def judge_rejection(current: Pending, run: int, host: str, round_: int) -> str:
    if run != current.run or current.state in TERMINAL:
        return RejectionVerdict.STALE
    if current.state == S.PLACED and current.host == host and same_round(current.round,
                                                                          round_):
        return RejectionVerdict.APPLY
    if round_ >= 0 and round_ <= current.placed_round:
        return RejectionVerdict.STALE  # its placement was seen, and replaced or rejected
    if STAGE[current.state] <= STAGE[S.PLACED]:
        return RejectionVerdict.HOLD  # rejects a placement not read yet
    return RejectionVerdict.STALE


Key = tuple[str, int]
Held = tuple[int, int, str]  # run, round, host


class HeldRejections:
    """Rejections read before the placement they reject, per task. An entry stays after
    it cancelled its placement, so a redelivery of that placement is cancelled too.
    Bounded: a task's entries go when its run changes or moves past placement, and all
    of a job's when the job leaves the book."""

    def __init__(self) -> None:
        self._held: dict[Key, set[Held]] = {}

    def hold(self, job_id: str, instance: int, run: int, round_: int, host: str) -> None:
        self._held.setdefault((job_id, instance), set()).add((run, round_, host))

    def take(self, job_id: str, instance: int, run: int, round_: int, host: str) -> bool:
        """True when a rejection of this placement was read before it (it is cancelled)."""
        held = self._held.get((job_id, instance))
        if not held:
            return False
        return any(entry[0] == run and entry[2] == host and same_round(entry[1], round_)
                   for entry in held)

    def drop_task(self, job_id: str, instance: int) -> None:
        """The task's run moved past placement: no placement of it can matter any more."""
        self._held.pop((job_id, instance), None)

    def run_changed(self, job_id: str, instance: int, run: int) -> None:
        held = self._held.get((job_id, instance))
        if held:
            held -= {e for e in held if e[0] < run}
            if not held:
                del self._held[(job_id, instance)]

    def drop_job(self, job_id: str, instances: int) -> None:
        for i in range(instances):
            self._held.pop((job_id, i), None)

    def __len__(self) -> int:
        return sum(len(v) for v in self._held.values())

    def to_data(self) -> list[list[Any]]:
        return [[job_id, instance, run, round_, host]
                for (job_id, instance), held in sorted(self._held.items())
                for run, round_, host in sorted(held)]

    @classmethod
    def from_data(cls, rows: list[list[Any]]) -> HeldRejections:
        out = cls()
        for job_id, instance, run, round_, host in rows:
            out.hold(str(job_id), int(instance), int(run), int(round_), str(host))
        return out
