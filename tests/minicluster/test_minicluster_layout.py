"""The local cluster's layout: its hosts share one machine, so what they hand out to
tasks must not collide (a port given by two "hosts" at once fails to bind)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from peloton.minicluster.cluster import Cluster, Layout, load


def test_each_agent_hands_out_its_own_port_range(tmp_path: Path) -> None:
    lay = Layout.local(tmp_path, agents=4, free=True)
    ranges = [a.port_range for a in lay.agents]
    ports = [set(range(lo, hi + 1)) for lo, hi in ranges]
    assert all(not (a & b) for i, a in enumerate(ports) for b in ports[i + 1:])
    cluster = Cluster(lay)
    argv = cluster.service_argv("agent-host-2")
    assert argv[argv.index("--port-range") + 1] == f"{ranges[1][0]}-{ranges[1][1]}"


def test_the_state_file_keeps_the_port_ranges(tmp_path: Path) -> None:
    lay = Layout.local(tmp_path, agents=2, free=True)
    Cluster(lay).save()
    again = load(tmp_path)
    assert again is not None
    assert [a.port_range for a in again.layout.agents] == [a.port_range for a in lay.agents]
    data = json.loads((tmp_path / "cluster.json").read_text())
    del data["layout"]["agents"][0]["port_range"]  # a state file written before ranges
    (tmp_path / "cluster.json").write_text(json.dumps(data))
    older = load(tmp_path)
    assert older is not None and older.layout.agents[0].port_range == (31000, 31999)


def test_the_layout_s_environment_reaches_the_spawned_processes(tmp_path: Path) -> None:
    key = "PELOTON_KAFKA_SESSION_TIMEOUT_S"
    lay = Layout.local(tmp_path, agents=0, free=True, detach=False, env={key: "10"})
    cluster = Cluster(lay)
    proc = cluster.spawn("probe", [sys.executable, "-c",
                                   f"import os; print(os.environ[{key!r}])"])
    deadline = time.monotonic() + 20
    while (out := Path(proc.log).read_text().strip()) == "":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert out == "10" and os.environ.get(key) != "10"  # the caller's own is untouched
    again = load(tmp_path)  # and the state file keeps it
    assert again is not None and again.layout.env == {key: "10"}


def test_the_topics_are_made_for_the_environment_the_processes_get(tmp_path: Path) -> None:
    from peloton.bus.catalog import partitioned_for
    from peloton.bus.partitions import ENV

    lay = Layout.local(tmp_path, agents=0, free=True, env={ENV: "job-events=1"})
    env = lay.process_env()
    assert env[ENV] == "job-events=1" and env["PATH"] == os.environ["PATH"]
    counts = {t.name: t.partitions for t in partitioned_for(env)}
    assert counts["job-events"] == 1 and counts["job-submitted"] == 4
    assert counts["jobmgr-inbox"] == 4  # the partitioned services' inboxes too
    # the catalog's defaults underneath, not this process's own setting
    assert {t.name: t.partitions for t in partitioned_for({})}["job-events"] == 4
