"""A real minicluster for end-to-end tests: Tansu, etcd, every service, agents running
real processes. `minicluster_factory(**layout)` starts one with free ports in a temporary
directory; `minicluster` is the default one (3 agents x 4 cpus, 5 s heartbeat timeout).
Both live for one test module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e_helpers import api_client

from peloton.minicluster.cluster import Cluster, Layout, down, up

Factory = Callable[..., Cluster]


@pytest.fixture(scope="module")
def minicluster_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Factory]:
    """Clusters of one test module, stopped when the module ends: only one minicluster
    runs at a time (idle services still cost CPU, and the machine has 2 cores)."""
    started: list[Path] = []

    def make(**layout: Any) -> Cluster:
        run_dir = tmp_path_factory.mktemp("minicluster")
        opts: dict[str, Any] = {"agents": 3, "cpu": 4.0, "heartbeat_timeout_s": 5.0,
                                "entitlement_cycle_s": 2.0}
        opts.update(layout)
        lay = Layout.local(run_dir, free=True, detach=False, **opts)
        started.append(run_dir)
        try:
            return up(lay)
        except Exception:
            _dump_logs(run_dir)
            raise

    yield make
    for run_dir in started:
        down(run_dir)


@pytest.fixture(scope="module")
def minicluster(minicluster_factory: Factory) -> Cluster:
    return minicluster_factory()


@pytest.fixture()
def api(minicluster: Cluster) -> Iterator[httpx.Client]:
    with api_client(minicluster) as client:
        yield client


def _dump_logs(run_dir: Path) -> None:
    for log in sorted((run_dir / "logs").glob("*.log")):
        print(f"===== {log.name}\n{log.read_text(errors='replace')[-3000:]}")
