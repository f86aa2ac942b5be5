"""High availability: leader election over etcd for the singleton services.

`LeaderElection` is imported on first use (it pulls in aetcd and gRPC), so that
`peloton.ha.liveness` stays cheap to import.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LeaderElection"]


def __getattr__(name: str) -> Any:
    if name == "LeaderElection":
        from peloton.ha.election import LeaderElection

        return LeaderElection
    raise AttributeError(name)
