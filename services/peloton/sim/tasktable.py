"""Every simulated task as columns (struct of arrays), driven by the job manager's state
machine.

A task is a row index. Columns: job, instance, state (a code into `STATES`), run
(attempt number), host (-1: none), when its run was queued / became READY / started,
its placement sequence number (for "most recently started" preemption order), its
duration (inf: until its job ends), its actual usage fraction, and whether it is a
member of a gang in this run.

`move(rows, target)` applies `peloton.jobmgr.domain.states.transition` to every row:
rows are grouped by current state and each distinct (state, target) pair is checked
with `transition`, so a batch move of a million rows still exercises the table for
every task and raises `IllegalTransition` on any undefined pair. A retried task starts a
new run at INITIALIZED (`new_run`), as in the job manager.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from peloton.jobmgr.domain.states import TERMINAL, TaskState, transition

__all__ = ["STATES", "CODE", "TaskTable", "IntArray"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

STATES: tuple[TaskState, ...] = tuple(TaskState)
CODE: dict[TaskState, int] = {s: i for i, s in enumerate(STATES)}
_TERMINAL_CODES = np.array(sorted(CODE[s] for s in TERMINAL), dtype=np.int8)


class TaskTable:
    """Growable columns; `size` rows are in use."""

    _COLUMNS: dict[str, tuple[type, object]] = {
        "job": (np.int32, 0),
        "instance": (np.int32, 0),
        "state": (np.int8, CODE[TaskState.INITIALIZED]),
        "run": (np.int32, 1),
        "host": (np.int32, -1),
        "queued_at": (np.float64, 0.0),
        "ready_at": (np.float64, 0.0),
        "started_at": (np.float64, 0.0),
        "started_seq": (np.int64, 0),
        "duration": (np.float64, np.inf),
        "usage": (np.float64, 0.0),
        "gang": (np.bool_, False),
    }

    def __init__(self, capacity: int = 1024) -> None:
        self.size = 0
        self.transitions = 0
        self.job = np.zeros(0, np.int32)
        self.instance = np.zeros(0, np.int32)
        self.state = np.zeros(0, np.int8)
        self.run = np.zeros(0, np.int32)
        self.host = np.zeros(0, np.int32)
        self.queued_at = np.zeros(0)
        self.ready_at = np.zeros(0)
        self.started_at = np.zeros(0)
        self.started_seq = np.zeros(0, np.int64)
        self.duration = np.zeros(0)
        self.usage = np.zeros(0)
        self.gang = np.zeros(0, np.bool_)
        self._grow(capacity)

    def _grow(self, capacity: int) -> None:
        for name, (dtype, fill) in self._COLUMNS.items():
            old = getattr(self, name)
            new: np.ndarray = np.full(capacity, fill, dtype=dtype)
            new[: old.size] = old
            setattr(self, name, new)

    def add(self, job: int, durations: FloatArray, usage: FloatArray, gang: bool) -> IntArray:
        """Rows for a new job's tasks (instances 0..n-1), state INITIALIZED, run 1."""
        n = int(durations.size)
        first = self.size
        if first + n > self.job.size:
            self._grow(max(2 * self.job.size, first + n))
        rows = np.arange(first, first + n, dtype=np.int64)
        self.job[rows] = job
        self.instance[rows] = np.arange(n)
        self.duration[rows] = durations
        self.usage[rows] = usage
        self.gang[rows] = gang
        self.size = first + n
        return rows

    def move(self, rows: IntArray, target: TaskState) -> None:
        """Move every row to `target` through `transition` (see module docstring)."""
        if rows.size == 0:
            return
        current = self.state[rows]
        lo, hi = int(current.min()), int(current.max())
        for code in ([lo] if lo == hi else np.unique(current).tolist()):
            transition(STATES[code], target)
        self.state[rows] = CODE[target]
        self.transitions += int(rows.size)

    def new_run(self, rows: IntArray) -> None:
        """Start a new attempt of finished rows: run + 1, INITIALIZED, off any host."""
        if rows.size == 0:
            return
        if not np.isin(self.state[rows], _TERMINAL_CODES).all():
            raise ValueError("a new run starts only after the previous one ended")
        self.run[rows] += 1
        self.state[rows] = CODE[TaskState.INITIALIZED]
        self.host[rows] = -1
        self.gang[rows] = False

    def in_state(self, state: TaskState) -> IntArray:
        """Rows currently in `state`, ascending."""
        return np.flatnonzero(self.state[: self.size] == CODE[state]).astype(np.int64)

    def counts(self) -> dict[str, int]:
        """How many rows are in each state (states with none are left out)."""
        counts = np.bincount(self.state[: self.size], minlength=len(STATES))
        return {STATES[i].value: int(c) for i, c in enumerate(counts.tolist()) if c}
