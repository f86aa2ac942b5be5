"""The placement service: the PlacementBoard core inside the common service shell."""

from __future__ import annotations

from typing import Any

from peloton.model.event import Event
from peloton.placement.domain.board import PlacementBoard

__all__ = ["PlacementCore"]


class PlacementCore:
    inputs: tuple[str, ...] = ("job-events", "tasks-admitted", "placement-made",
                               "placement-rejected", "task-launch-requested", "offer-received")
    replay: tuple[str, ...] = inputs

    def __init__(self, tick_interval: float = 0.05) -> None:
        self.board = PlacementBoard()
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
