"""The placement service: the PlacementBoard core inside the common service shell.

Metrics (this shell records them, not the pure board; see peloton.bus.metrics): the
duration of every tick that ran a round, and every `PENDING_SAMPLE_S` the runs waiting
for a host by pool and reason class (the board's last PlacementFailed reason; "none":
not tried yet).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from peloton.bus.metrics import PLACEMENT_ROUND_SECONDS, reason_class, record_pending
from peloton.bus.routing import partition_of
from peloton.model.event import Event
from peloton.placement.domain.board import DEFAULT_RETENTION_MS, PlacementBoard

__all__ = ["PlacementCore"]

PENDING_SAMPLE_S = 5.0


class PlacementCore:
    inputs: tuple[str, ...] = ("job-events", "tasks-admitted", "placement-made",
                               "placement-rejected", "task-launch-requested", "offer-received")
    replay: tuple[str, ...] = inputs
    snapshot_version: int = 3
    """Bump whenever the shape of `snapshot()` changes (PlacementBoard.snapshot).
    2: a run's row carries its pinned_host. 3: its config_version; jobs' later versions."""

    def __init__(self, tick_interval: float = 0.05,
                 retention_ms: int = DEFAULT_RETENTION_MS) -> None:
        self.board = PlacementBoard(retention_ms)
        # one record per partition of its jobs, as the job manager's shards read them
        self._shard_of_job = self.board.shard_of_job = partition_of("placement-made")
        self.tick_interval: float | None = tick_interval
        self._pending_sampled = -PENDING_SAMPLE_S

    def partitions_known(self, counts: Mapping[str, int]) -> None:
        """The broker's partition counts of our inputs (the shell, at each rebuild): a round
        puts in one record only jobs of one partition of placement-made as the broker has
        it (where the records land), which is the catalog's unless the topic was created
        with another (`peloton.bus.brokercounts`)."""
        count = counts.get("placement-made")
        if count is not None:
            self._shard_of_job = self.board.shard_of_job = partition_of("placement-made", count)

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        self.board.fold(etype, body)

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        self.board.fold(etype, body)
        return []

    def tick_wanted(self) -> bool:
        return self.board.tick_wanted()

    def tick(self, now: int) -> list[Event]:
        round_, started = self.board.round, time.perf_counter()
        events = self.board.next_round(now)
        if self.board.round != round_:
            PLACEMENT_ROUND_SECONDS.observe(time.perf_counter() - started)
        if time.monotonic() - self._pending_sampled >= PENDING_SAMPLE_S:
            self._pending_sampled = time.monotonic()
            self._record_pending()
        return events

    def _record_pending(self) -> None:
        board = self.board
        pending: Counter[tuple[str, str]] = Counter()
        for key in board.queue:
            spec = board.jobs.get(key[0])
            pending[(spec.respool if spec else "", reason_class(board.reasons.get(key)))] += 1
        record_pending("placement", pending)

    def after_replay(self, now: int) -> list[Event]:
        return []

    def snapshot(self) -> dict[str, Any]:
        """The board's state as plain JSON-able data (caches and host table left out)."""
        return self.board.snapshot()

    def restore(self, state: dict[str, Any]) -> None:
        """Replace the board by the snapshot's; KeyError/TypeError/ValueError (and the
        core unchanged) if it cannot be read."""
        if not isinstance(state, dict):
            raise TypeError(f"placement snapshot: expected an object, got {type(state).__name__}")
        try:
            self.board = PlacementBoard.from_snapshot(state)
            self.board.shard_of_job = self._shard_of_job
        except OverflowError as exc:  # an infinite number where an integer belongs
            raise ValueError(f"placement snapshot: {exc}") from exc
