"""The placement engine's pure core: hosts and admitted tasks in, placements out.

Public surface::

    place(hosts, tasks, config=DEFAULT_CONFIG) -> RoundResult
    HostView, TaskRequest, Placement, RoundResult, Strategy, Code
    PlacementConfig, HostTable, PlacementInputError

See engine.py for the round's guarantees and framework.py for the extension points.
"""

from peloton.placement.domain.engine import DEFAULT_CONFIG, place
from peloton.placement.domain.framework import PlacementConfig
from peloton.placement.domain.hostindex import HostTable
from peloton.placement.domain.types import (
    Code,
    HostView,
    Placement,
    PlacementInputError,
    RoundResult,
    Strategy,
    TaskRequest,
)

__all__ = [
    "place",
    "DEFAULT_CONFIG",
    "PlacementConfig",
    "HostTable",
    "HostView",
    "TaskRequest",
    "Placement",
    "RoundResult",
    "Strategy",
    "Code",
    "PlacementInputError",
]
