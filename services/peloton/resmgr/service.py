"""The resource manager service: the ResourceManager core inside the common service shell.

Every instance folds the whole log (a hot standby); only the etcd leader ticks and
publishes. A new leader therefore starts from the state the log describes.
"""

from __future__ import annotations

from typing import Any

from peloton.model.event import Event
from peloton.resmgr.domain.cycle import ResourceManager

__all__ = ["ResourceManagerCore"]


class ResourceManagerCore:
    inputs = ("job-events", "tasks-admitted", "offer-received")
    replay = inputs

    def __init__(
        self,
        entitlement_cycle_s: float = 10.0,
        preemption_cycles: int = 3,
        tick_interval: float = 0.1,
    ) -> None:
        self.manager = ResourceManager(int(entitlement_cycle_s * 1000))
        self.preemption_cycles = preemption_cycles
        self.tick_interval: float | None = tick_interval

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        self.manager.fold(etype, body)

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        self.manager.fold(etype, body)
        return []

    def tick(self, now: int) -> list[Event]:
        return self.manager.tick(now)

    def after_replay(self, now: int) -> list[Event]:
        return []
