"""The host manager service: the HostBook core inside the common service shell."""

from __future__ import annotations

from typing import Any

from peloton.hostmgr.domain.hosts import HostBook
from peloton.model.event import Event

__all__ = ["HostManagerCore"]


class HostManagerCore:
    inputs: tuple[str, ...] = ("host-registered", "task-status-reported",
              "placement-made", "task-launch-requested", "placement-rejected",
              "offer-received", "job-events")
    replay: tuple[str, ...] = inputs

    def __init__(self, heartbeat_timeout_s: float = 5.0, tick_interval: float = 0.05) -> None:
        self.book = HostBook(int(heartbeat_timeout_s * 1000))
        self.tick_interval: float | None = tick_interval

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        self.book.fold(etype, body)

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        self.book.fold(etype, body, received_ms=now)
        return []

    def tick(self, now: int) -> list[Event]:
        return self.book.tick(now)

    def after_replay(self, now: int) -> list[Event]:
        # heartbeats in the log are old by now: give every host a fresh timeout window
        for host in self.book.hosts.values():
            host.last_seen_ms = max(host.last_seen_ms, now)
        return []
