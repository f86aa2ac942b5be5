"""The hosts as the job manager knows them: the host manager's HostStateChanged facts.

The job manager needs the host list for two decisions: where daemon instances run (one
per UP host that matches) and which runs leave a host in maintenance (drains). Every
HostStateChanged carries the host's whole view (state, presence, labels, deadline), so
the fold keeps the newest per host (event time; a tie keeps the later record) and order
across hosts does not matter. Pure; `to_data`/`from_data` for snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from peloton.model.hoststate import HostState

__all__ = ["HostView", "HostTable"]


@dataclass(frozen=True, slots=True)
class HostView:
    name: str
    state: HostState = HostState.UP
    present: bool = True
    labels: dict[str, str] = field(default_factory=dict)
    deadline_ms: int | None = None
    at: int = 0

    def to_row(self) -> list[Any]:
        return [self.state.value, self.present, dict(self.labels), self.deadline_ms,
                self.at]


class HostTable:
    def __init__(self) -> None:
        self.views: dict[str, HostView] = {}
        self._draining: set[str] = set()  # kept on apply: `draining` is asked per change

    def _put(self, view: HostView) -> None:
        self.views[view.name] = view
        if view.state is HostState.DRAINING:
            self._draining.add(view.name)
        else:
            self._draining.discard(view.name)

    def apply(self, body: dict[str, Any]) -> bool:
        """Fold one HostStateChanged; True when it changed the table."""
        name, at = body["host"], int(body["at"])
        old = self.views.get(name)
        if old is not None and at < old.at:
            return False  # an older view read late
        view = HostView(name, HostState(body["state"]), bool(body["present"]),
                        dict(body.get("labels") or {}), body.get("deadline_ms"), at)
        self._put(view)
        return view != old

    def draining(self) -> list[HostView]:
        """The DRAINING hosts by name (O(draining hosts), not O(hosts))."""
        return [self.views[name] for name in sorted(self._draining)]

    def to_data(self) -> dict[str, list[Any]]:
        return {name: v.to_row() for name, v in sorted(self.views.items())}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> HostTable:
        table = cls()
        for name, (state, present, labels, deadline, at) in data.items():
            table._put(HostView(
                str(name), HostState(state), bool(present),
                {str(k): str(v) for k, v in dict(labels).items()},
                None if deadline is None else int(deadline), int(at)))
        return table
