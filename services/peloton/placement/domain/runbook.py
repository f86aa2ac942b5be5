"""The runs the placement service knows about, folded in any cross-topic order (pure).

Facts about one run reach placement on five topics (tasks-admitted, placement-made,
placement-rejected, task-launch-requested, job-events); Kafka orders each topic's
partition, never the five together. Every transition here is therefore judged by what
the fact proves, never by what arrived before it:

- Ended (a TaskStateChanged into `LEAVES_PLACEMENT`) is final, and it covers every
  earlier run of the instance too: runs of one instance are sequential (run r+1 is
  created only after run r ended), so one integer per instance (`ended`) remembers every
  ended run, and any later fact about one of them is ignored. Ended runs keep no record.
- A placement is identified by its round. PlacementMade(round r) places a run unless a
  rejection of round >= r or its launch was already seen; PlacementRejected(round r)
  sends a run placed in a round <= r back to waiting (a rejection of an older round is
  stale), and a rejection seen before its placement is remembered (`rejected`) so the
  placement, when it arrives, is not taken for live.
- TaskLaunchRequested (or a TaskStateChanged into an on-host state) proves the run
  reached its host: it never waits again, whatever placement facts arrive after it.
- Admission and give-back: a run holds an allocation from its admission until jobmgr
  gives it back (placement timeout: a TaskStateChanged READY/PLACING/PLACED -> PENDING of
  the same run), and resmgr may admit the same run again later. By event time: the run
  holds an allocation when its latest admission is not older than its latest give-back
  (ties go to the admission, which resmgr makes after reading the give-back). A
  placement, rejection or launch proves an admission (of unknown time, 0).
- A run is queued (`queue`, in arrival order) when it waits, holds an allocation and has
  not ended. A run never leaves the queue but by one of the facts above.
- A run's pin (`pinned_host`, TasksAdmitted v2) holds for the whole run: the first pin
  said about it is kept (later admissions of the run carry none or the same). A newer
  run of the instance has its own record, so it is pinned only if its admission says so.
- A run's config version (`config_version`, TasksAdmitted v2, PlacementMade v2,
  TaskLaunchRequested v3: the job spec version it runs) is the same in every fact that
  says it; the first said is kept. A run no fact has said it of yet (e.g. made by a
  rejection read before its admission) has None, and the board does not place it until
  its admission is read.

Records of runs that wait, are placed or run on a host stay while they do (bounded by
the live work); the board drops the records of a finished job's runs with the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from peloton.placement.domain.snapshotdata import as_dict, as_list, as_row

__all__ = ["RunBook", "Run", "Where", "RunKey"]

RunKey = tuple[str, int, int]
_OLD_FIELDS = 7  # a Run's row before runs kept their pin (8 since, 9 with their version)
_FIELDS = 9


class Where(IntEnum):
    """Where a run is, as far as placement knows (ordered: a run only moves forward,
    except a rejected placement that goes back to WAITING)."""

    WAITING = 0
    PLACED = 1
    ON_HOST = 2


@dataclass(slots=True)
class Run:
    where: Where
    round: int = 0
    """The round of its placement (PLACED) or launch (ON_HOST), 0 if unknown."""
    rejected: int = 0
    """The highest round of a rejection seen for it."""
    admitted_at: int = -1
    """Event time of its latest admission (-1: none seen; 0: proved, time unknown)."""
    returned_at: int = -1
    """Event time of its latest give-back (placement timeout), -1 if none."""
    since: int = 0
    """The board's clock when the record was made (orphans are dropped by it)."""
    launch_seen: bool = False
    pinned_host: str | None = None
    """The only host the run may be placed on (None: any host)."""
    config_version: int | None = None
    """The job config version the run runs (None: no fact said it yet)."""

    def say_version(self, version: int | None) -> bool:
        """A fact said the run's config version; True if it was not known before."""
        if self.config_version is None and version is not None:
            self.config_version = version
            return True
        return False

    @property
    def holds_allocation(self) -> bool:
        return self.admitted_at >= 0 and self.admitted_at >= self.returned_at

    def to_row(self) -> list[Any]:
        return [int(self.where), self.round, self.rejected, self.admitted_at,
                self.returned_at, self.since, self.launch_seen, self.pinned_host,
                self.config_version]

    @classmethod
    def from_row(cls, row: list[Any]) -> Run:
        """A run from `to_row`, or from the 7 fields of a snapshot written before runs
        kept their pin (then unpinned, version 1) or the 8 of one written before they kept
        their config version (then version 1)."""
        if len(row) < _FIELDS:
            row = [*row, None, 1] if len(row) == _OLD_FIELDS else [*row, 1]
        where, round_, rejected, admitted, returned, since, launch_seen, pinned, version = row
        if pinned is not None and not isinstance(pinned, str):
            raise TypeError(f"placement snapshot: a pin must be a string, got {pinned!r}")
        return cls(Where(int(where)), int(round_), int(rejected), int(admitted),
                   int(returned), int(since), bool(launch_seen), pinned,
                   None if version is None else int(version))


class RunBook:
    """Runs by key, the queue of runs to place, and the ended runs per instance.

    Every method returns whether the run's host accounting must change (the board keeps
    the holds on hosts); all are idempotent."""

    def __init__(self) -> None:
        self.runs: dict[RunKey, Run] = {}
        self.queue: dict[RunKey, int] = {}  # run -> arrival order (also the dict's order)
        self.ended: dict[str, dict[int, int]] = {}  # job -> instance -> highest ended run
        self.arrivals = 0
        self.superseded: list[RunKey] = []
        """Runs ended by `_supersede` since the board last looked (it drops their holds)."""

    def is_ended(self, key: RunKey) -> bool:
        return key[2] <= self.ended.get(key[0], {}).get(key[1], 0)

    def _run(self, key: RunKey, now: int, where: Where = Where.WAITING) -> Run:
        run = self.runs.get(key)
        if run is None:
            run = self.runs[key] = Run(where, since=now)
            if key[2] > 1:
                self._supersede(key)
        return run

    def _supersede(self, key: RunKey) -> None:
        """A fact about run r proves every earlier run of the instance ended (runs are
        sequential): they end here, whatever facts about them are still to come."""
        self._end_upto(key[0], key[1], key[2] - 1)

    def _end_upto(self, job: str, instance: int, run: int) -> None:
        per_job = self.ended.setdefault(job, {})
        done = per_job.get(instance, 0)
        if done >= run:
            return
        per_job[instance] = run
        for earlier in range(done + 1, run + 1):
            old = (job, instance, earlier)
            if old in self.runs:
                del self.runs[old]
                self.queue.pop(old, None)
                self.superseded.append(old)

    def _requeue(self, key: RunKey, run: Run) -> bool:
        """Queue the run if it should wait in the queue; True if it was added."""
        if run.where is Where.WAITING and run.holds_allocation:
            if key not in self.queue:
                self.arrivals += 1
                self.queue[key] = self.arrivals
                return True
        else:
            self.queue.pop(key, None)
        return False

    # ---- facts ----------------------------------------------------------------------
    def admit(self, key: RunKey, at: int, now: int, pinned_host: str | None = None,
              version: int | None = 1) -> bool:
        """TasksAdmitted (with the run's pin, if any, and its config version). True if the
        run joined the queue, or waits in it and its version was not known before."""
        if self.is_ended(key):
            return False
        run = self._run(key, now)
        run.admitted_at = max(run.admitted_at, at)
        if run.pinned_host is None:
            run.pinned_host = pinned_host
        said = run.say_version(version)
        return self._requeue(key, run) or (said and key in self.queue)

    def give_back(self, key: RunKey, at: int, now: int) -> None:
        """A placement timeout (TaskStateChanged -> PENDING from a queued state)."""
        if self.is_ended(key):
            return
        run = self._run(key, now)
        run.returned_at = max(run.returned_at, at)
        self._requeue(key, run)

    def placed(self, key: RunKey, round_: int, now: int, version: int | None = None) -> bool:
        """PlacementMade in `round_`. True if the run is now placed there (take a hold)."""
        if self.is_ended(key):
            return False
        run = self._run(key, now, Where.PLACED)
        run.admitted_at = max(run.admitted_at, 0)
        run.say_version(version)
        if run.where is Where.ON_HOST or round_ <= run.rejected:
            return False
        if run.where is Where.PLACED and run.round >= round_ and run.round:
            return False
        run.where, run.round = Where.PLACED, round_
        self.queue.pop(key, None)
        return True

    def rejected(self, key: RunKey, round_: int, now: int) -> bool:
        """PlacementRejected of `round_`. True if the run's placement was undone (drop its
        hold); the run then waits (queued if it still holds an allocation)."""
        if self.is_ended(key):
            return False
        run = self._run(key, now)
        run.admitted_at = max(run.admitted_at, 0)
        if round_ < 0:  # a v1 record without its round: it rejects what the run holds
            round_ = run.round
        run.rejected = max(run.rejected, round_)
        undone = run.where is Where.PLACED and run.round <= round_
        if undone:
            run.where, run.round = Where.WAITING, 0
        self._requeue(key, run)
        return undone

    def launched(self, key: RunKey, round_: int, now: int,
                 version: int | None = None) -> bool:
        """TaskLaunchRequested. True the first time (move its hold to a launch hold)."""
        if self.is_ended(key):
            return False
        run = self._run(key, now, Where.ON_HOST)
        run.admitted_at = max(run.admitted_at, 0)
        run.say_version(version)
        if run.launch_seen:
            return False
        run.where, run.round, run.launch_seen = Where.ON_HOST, round_, True
        self.queue.pop(key, None)
        return True

    def on_host(self, key: RunKey, now: int) -> None:
        """jobmgr says the run is on a host: it never needs a placement again. A placed
        run keeps its hold until its TaskLaunchRequested arrives."""
        if self.is_ended(key):
            return
        run = self._run(key, now, Where.ON_HOST)
        run.admitted_at = max(run.admitted_at, 0)
        if run.where is Where.WAITING:
            run.where = Where.ON_HOST
            self.queue.pop(key, None)

    def end(self, key: RunKey) -> None:
        """The run left placement for good (and so did every earlier run of it). Its
        record (and any earlier one's) goes to `superseded`."""
        self._end_upto(*key)

    def seen(self, key: RunKey) -> None:
        """Any other fact about the run: its earlier runs ended."""
        if key[2] > 1:
            self._supersede(key)

    def forget_runs(self, keys: list[RunKey]) -> None:
        for key in keys:
            self.runs.pop(key, None)
            self.queue.pop(key, None)

    def forget_job(self, job_id: str, keys: list[RunKey]) -> None:
        self.forget_runs(keys)
        self.ended.pop(job_id, None)

    # ---- snapshot -------------------------------------------------------------------
    def to_data(self) -> dict[str, Any]:
        return {
            "runs": [[*key, *run.to_row()] for key, run in self.runs.items()],
            "queue": [[*key, order] for key, order in self.queue.items()],
            "ended": {job: [[i, r] for i, r in sorted(per.items())]
                      for job, per in self.ended.items()},
            "arrivals": self.arrivals,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> RunBook:
        book = cls()
        for row in as_list(data["runs"], "book.runs"):
            row = as_list(row, "a run")
            if len(row) not in (3 + _OLD_FIELDS, 4 + _OLD_FIELDS):  # older rows: see Run
                row = as_row(row, 3 + _FIELDS, "a run")
            book.runs[(str(row[0]), int(row[1]), int(row[2]))] = Run.from_row(row[3:])
        for job, instance, run, order in as_list(data["queue"], "book.queue"):
            key = (str(job), int(instance), int(run))
            if key not in book.runs or book.runs[key].where is not Where.WAITING:
                raise ValueError(f"placement snapshot: queued run {key} is not waiting")
            book.queue[key] = int(order)
        book.ended = {str(job): {int(i): int(r) for i, r in as_list(pairs, "ended runs")}
                      for job, pairs in as_dict(data["ended"], "book.ended").items()}
        for key in book.runs:
            if book.is_ended(key):  # a later fact would end it again without dropping it
                raise ValueError(f"placement snapshot: run {key} is both live and ended")
        book.arrivals = int(data["arrivals"])
        return book
