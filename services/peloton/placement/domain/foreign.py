"""Runs another placement engine placed, known only from the host side (pure).

One of several engines (placement/shard.py) reads job-events of its own partition only:
it never sees the specs, task changes or ends of another engine's jobs. It still reads
every engine's placements and the host manager's answers to them (placement-made,
placement-rejected, task-launch-requested, offer-received are read whole), and must count
what the others placed, so its host views do not offer room another engine just took.
Such a run holds room on its host in the views (hostviews.py) as one of the engine's own
runs does, but its record here is small and short-lived:

- PlacementMade (round r): the run holds its host unless a launch of it was seen or a
  rejection of round >= r was (facts come in any order across topics), or it already
  holds a placement of round >= r.
- PlacementRejected (round r): a placement of round <= r not launched holds nothing.
- TaskLaunchRequested: the run holds its host as a launched run, until an offer that
  counts the launch arrives (hostviews.py drops the hold then).
- Every record, with whatever it holds, is forgotten `ttl_ms` of event time after it was
  made (the board's clock: the newest `at` of any fact), and a fact older than that is
  not taken at all. The host manager answers a placement within its hold window (10 s by
  default) and makes the offer that counts a launch in the same tick as the launch, so a
  record outlives what it is for by the consumer lag at most; what it cannot see are the
  ends of the other engine's runs, so a placement withdrawn by a kill (the host manager
  then answers nothing) holds its room in this engine's views until the record expires.
  Either way a mistake costs a collision or an idle slot of room for a while, never a
  double booking: the host manager validates every placement against the host's own
  allocation.

So the state is bounded by the rate of other engines' placements times `ttl_ms`, whatever
the runs do afterwards. Records are kept in the order they were made (the board's clock
never goes back), so expiry pops from the front.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from peloton.placement.domain.runbook import RunKey
from peloton.placement.domain.snapshotdata import as_list, as_row

__all__ = ["ForeignRuns", "Foreign", "FOREIGN_TTL_MS"]

FOREIGN_TTL_MS = 30_000


@dataclass(slots=True)
class Foreign:
    since: int
    """The board's clock when the record was made (it expires `ttl_ms` later)."""
    round: int = 0
    """The round of the placement it holds (0: none)."""
    rejected: int = 0
    """The highest round of a rejection seen for it."""
    launched: bool = False


class ForeignRuns:
    """Other engines' runs by key (see the module doc). Every method returns whether the
    run's hold must change; all are idempotent."""

    def __init__(self, ttl_ms: int = FOREIGN_TTL_MS) -> None:
        self.ttl_ms = ttl_ms
        self.runs: dict[RunKey, Foreign] = {}

    def _run(self, key: RunKey, at: int, clock: int) -> Foreign | None:
        run = self.runs.get(key)
        if run is None and at > clock - self.ttl_ms:
            run = self.runs[key] = Foreign(clock)
        return run

    def placed(self, key: RunKey, round_: int, at: int, clock: int) -> bool:
        """PlacementMade in `round_` (at `at`). True if the run now holds that placement."""
        run = self._run(key, at, clock)
        if run is None or run.launched or round_ <= run.rejected or round_ <= run.round:
            return False
        run.round = round_
        return True

    def rejected(self, key: RunKey, round_: int, at: int, clock: int) -> bool:
        """PlacementRejected of `round_`. True if its placement was undone (drop its hold)."""
        run = self._run(key, at, clock)
        if run is None:
            return False
        if round_ < 0:  # a v1 record without its round: it rejects what the run holds
            round_ = run.round
        run.rejected = max(run.rejected, round_)
        if run.launched or not run.round or run.round > round_:
            return False
        run.round = 0
        return True

    def launched(self, key: RunKey, at: int, clock: int) -> bool:
        """TaskLaunchRequested. True the first time (it holds a launch hold now)."""
        run = self._run(key, at, clock)
        if run is None or run.launched:
            return False
        run.launched = True
        return True

    def expire(self, clock: int) -> list[RunKey]:
        """Forget the records made `ttl_ms` or more before `clock`; returns their keys
        (the board drops what they hold)."""
        horizon, gone = clock - self.ttl_ms, []
        for key, run in self.runs.items():
            if run.since > horizon:
                break
            gone.append(key)
        for key in gone:
            del self.runs[key]
        return gone

    # ---- snapshot -------------------------------------------------------------------
    def to_data(self) -> list[list[Any]]:
        return [[*key, r.since, r.round, r.rejected, r.launched] for key, r in self.runs.items()]

    @classmethod
    def from_data(cls, rows: Any, ttl_ms: int = FOREIGN_TTL_MS) -> ForeignRuns:
        runs = cls(ttl_ms)
        since = None
        for row in as_list(rows, "foreign runs"):
            job, instance, run, made, round_, rejected, launched = as_row(row, 7, "a foreign run")
            if since is not None and int(made) < since:
                raise ValueError("placement snapshot: foreign runs out of order")
            since = int(made)
            runs.runs[(str(job), int(instance), int(run))] = Foreign(
                since, int(round_), int(rejected), bool(launched))
        return runs
