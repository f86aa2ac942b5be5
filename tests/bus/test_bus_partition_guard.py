"""A partitioned service refuses to start when its own topics have, on the broker, another
partition count than the one it cuts keys by (a topic keeps the count it was created with:
an older PELOTON_TOPIC_PARTITIONS made it). Without the guard its shards would each take
another shard's keys or none, and runs would be recorded nowhere (peloton.bus.brokercounts).
The pure judgment, then a real broker: the check, and `peloton serve jobmgr --partitioned`
exiting 2 with what to set."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from broker_topics import create_topic
from hypothesis import given
from hypothesis import strategies as st

from peloton.bus.brokercounts import PartitionCountMismatch, check_sharded, sharded_problem
from peloton.bus.catalog import topic
from peloton.bus.faustapp import ensure_topics
from peloton.hostmgr.shard import HOST_ROUTE
from peloton.jobmgr.shard import JOB_ROUTE
from peloton.placement.shard import PLACEMENT_ROUTE

ROUTES = {r.service: r for r in (JOB_ROUTE, HOST_ROUTE, PLACEMENT_ROUTE)}
JOB_TOPICS = sorted(JOB_ROUTE.sharded)


@given(route=st.sampled_from(sorted(ROUTES)), data=st.data())
def test_a_problem_names_exactly_the_topics_whose_count_differs(route: str,
                                                                data: st.DataObject) -> None:
    names = sorted(ROUTES[route].sharded)
    listed = data.draw(st.lists(st.sampled_from(names), unique=True))
    counts = {n: data.draw(st.integers(1, 64)) for n in listed}
    wrong = {n for n, c in counts.items() if c != topic(n).partitions}
    problem = sharded_problem(route, names, counts)
    if not wrong:
        assert problem is None  # unlisted topics are made with the catalog's count
        return
    assert problem is not None and problem.startswith(f"{route}: cannot run partitioned")
    for n in names:
        named = f"{n} has {counts.get(n)}" in problem
        assert named == (n in wrong), (n, problem)
    for n in wrong:  # what to set
        assert f"{n}={counts[n]}" in problem


def test_the_problem_says_what_to_set() -> None:
    name = "job-events"
    configured = topic(name).partitions
    problem = sharded_problem("jobmgr", JOB_TOPICS, {name: configured + 3})
    assert problem == (
        f"jobmgr: cannot run partitioned: it cuts its keys by the configured partition "
        f"counts ({name}={configured}), but on the broker {name} has {configured + 3}. "
        f"A topic keeps the count it was created with; give every process of the cluster "
        f"PELOTON_TOPIC_PARTITIONS with the broker's counts ({name}={configured + 3}, and "
        f"the same for the other topics partitioned with them), or run it unpartitioned.")


@pytest.mark.integration
async def test_the_check_passes_topics_made_by_this_setting(fresh_broker: str) -> None:
    await ensure_topics(fresh_broker)
    for route in ROUTES.values():
        await check_sharded(fresh_broker, route.service, route.sharded)


@pytest.mark.integration
async def test_the_check_refuses_a_topic_made_with_another_count(fresh_broker: str) -> None:
    other = topic("job-submitted").partitions + 2
    await create_topic(fresh_broker, "job-submitted", other)
    await ensure_topics(fresh_broker)  # the others made with the catalog's counts
    with pytest.raises(PartitionCountMismatch, match=f"job-submitted has {other}"):
        await check_sharded(fresh_broker, "jobmgr", JOB_ROUTE.sharded)
    # the host manager and placement do not cut by job-submitted: they may start
    await check_sharded(fresh_broker, "hostmgr", HOST_ROUTE.sharded)
    await check_sharded(fresh_broker, "placement", PLACEMENT_ROUTE.sharded)


@pytest.mark.integration
async def test_serve_partitioned_exits_2_saying_what_to_set(fresh_broker: str) -> None:
    other = topic("job-events").partitions + 1
    await create_topic(fresh_broker, "job-events", other)
    done = subprocess.run(
        [sys.executable, "-m", "peloton.serve", "jobmgr", "--partitioned", "--instance", "a",
         "--bootstrap", fresh_broker],
        env=dict(os.environ), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "peloton serve jobmgr: jobmgr: cannot run partitioned" in done.stderr
    assert f"job-events has {other}" in done.stderr
    assert f"PELOTON_TOPIC_PARTITIONS with the broker's counts (job-events={other}" in done.stderr
    assert "Traceback" not in done.stderr
