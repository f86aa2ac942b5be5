"""The placement service: the PlacementBoard core inside the common service shell."""

from __future__ import annotations

from typing import Any

from peloton.model.event import Event
from peloton.placement.domain.board import DEFAULT_RETENTION_MS, PlacementBoard

__all__ = ["PlacementCore"]


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
        self.tick_interval: float | None = tick_interval

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        self.board.fold(etype, body)

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        self.board.fold(etype, body)
        return []

    def tick(self, now: int) -> list[Event]:
        return self.board.next_round(now)

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
        self.board = PlacementBoard.from_snapshot(state)
