"""The resource manager's provisional admissions that count as held, kept as they change
(pure), so a tick does not visit every admission it decided that is not back yet.

In a burst the resource manager admits thousands of runs whose TasksAdmitted it reads
back only seconds later (its own decisions queue behind the burst's other facts): 11,000
at once in a 100,000-task wave on 10,000 hosts. The ledger files each as PENDING (demand);
this instance holds it as admitted. `usage()` and `_pending()` used to find them by
visiting every provisional admission two or three times a tick (120 ms a tick with
11,000 of them, while the service's loop waited), so the ticks grew with the burst and
the resource manager read its own decisions back ever later.

A provisional admission of run (job, instance, run) *counts* when the ledger's current
run of that task is that run, is filed as PENDING (`Ledger.filed`), and has been requeued
as often as when it was decided (no requeue used the admission up since). A counted run
moves from PENDING to HELD in `usage()`, and `_pending()` skips it. Whether it counts
changes only when the decision changes (made, confirmed by its fact, dropped, or every
decision put back by `discard_unpublished`/`restore`; a run requeued and admitted again
is decided again under the same key) or when the ledger files the run in another class (a
new run, a new state, a requeue, new resources: each refiles it). The first the cycle
tells the tally (`added`, `changed`, `removed`, `rebuild`); the second the ledger records
in `Ledger.touched` for the tasks the tally watches (`Ledger.watched`). `refresh`
re-decides those tasks only: O(changes), not O(provisional admissions).
"""

from __future__ import annotations

from peloton.resmgr.domain.ledger import (
    PENDING,
    Bucket,
    Cell,
    Ledger,
    TaskKey,
    bucket,
    count,
    micro,
)

__all__ = ["ProvisionalTally", "RunKey", "Admissions"]

RunKey = tuple[str, int, int]
#: provisional admissions: run -> (when decided, requeues of the run then)
Admissions = dict[RunKey, tuple[int, int]]


class ProvisionalTally:
    """Which tasks' provisional admissions count now, and the totals of those per
    bucket (integer micro-units, as `Ledger.sums`)."""

    def __init__(self, ledger: Ledger | None = None) -> None:
        self._reset(ledger if ledger is not None else Ledger())

    def _reset(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.counted: dict[TaskKey, tuple[Bucket, tuple[int, int, int, int]]] = {}
        self.cells: dict[Bucket, Cell] = {}
        self.watched: dict[TaskKey, int] = {}  # task -> its provisional admissions
        self._dirty: set[TaskKey] = set()
        self.ledger.watched, self.ledger.touched = self.watched, set()

    def added(self, key: RunKey) -> None:
        """A provisional admission of `key` was made (it was not one before)."""
        task = (key[0], key[1])
        self.watched[task] = self.watched.get(task, 0) + 1
        self._dirty.add(task)

    def changed(self, key: RunKey) -> None:
        """The provisional admission of `key` was made again (a new decision replaced it)."""
        self._dirty.add((key[0], key[1]))

    def removed(self, key: RunKey) -> None:
        """The provisional admission of `key` is gone (confirmed or dropped)."""
        task = (key[0], key[1])
        left = self.watched.get(task, 0) - 1
        if left > 0:
            self.watched[task] = left
        else:
            self.watched.pop(task, None)
        self._dirty.add(task)

    def rebuild(self, ledger: Ledger, admissions: Admissions) -> None:
        """Start again from every provisional admission (a restore, or a tick's decisions
        put back): O(them)."""
        self._reset(ledger)
        for key in admissions:
            self.added(key)
        self.refresh(admissions)

    def refresh(self, admissions: Admissions) -> None:
        """Re-decide the tasks whose admission or filing changed since the last refresh."""
        ledger = self.ledger
        if ledger.touched:
            self._dirty |= ledger.touched
            ledger.touched.clear()
        if not self._dirty:
            return
        for task in self._dirty:
            self._settle(task, admissions)
        self._dirty.clear()

    def _settle(self, task: TaskKey, admissions: Admissions) -> None:
        ledger = self.ledger
        entry = ledger.tasks.get(task)
        now = None
        if entry is not None and ledger.filed.get(task) == PENDING:
            mine = admissions.get((task[0], task[1], entry.run))
            if mine is not None and mine[1] == entry.requeues:
                now = (bucket(entry), micro(entry.resources))
        old = self.counted.get(task)
        if old == now:
            return
        if old is not None:
            del self.counted[task]
            count(self.cells, old[0], old[1], -1)
        if now is not None:
            self.counted[task] = now
            count(self.cells, now[0], now[1], 1)
