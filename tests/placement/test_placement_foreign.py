"""Another engine's runs, known from host-side facts only (placement/domain/foreign.py).

An engine of several (placement/shard.py) reads job-events of its share's jobs only. The
others' runs reach it as placements, refusals and launches: they must hold room in its
views as long as the host manager may still launch them or no offer counts the launch,
whatever the order the facts arrive in, and its state must stay bounded though it never
reads their ends.
"""

from __future__ import annotations

from itertools import permutations

import pytest
from event_bodies import (
    job_created,
    launch,
    launch_requested,
    offer,
    offer_received,
    placement,
    placement_made,
    placement_rejected,
    task_state_changed,
    tasks_admitted,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.placement.domain.board import PlacementBoard
from peloton.placement.domain.foreign import FOREIGN_TTL_MS, ForeignRuns
from peloton.placement.service import PlacementCore
from peloton.placement.shard import PLACEMENT_ROUTE, PlacementShardCore

KEY = ("theirs-1", 0, 1)


def board(hosts: int = 1, cpu: float = 4.0) -> PlacementBoard:
    """An engine whose share is the jobs named mine-*, with `hosts` empty hosts."""
    b = PlacementBoard()
    b.share = lambda job: job.startswith("mine")
    b.fold("OfferReceived", offer_received(*(offer(f"h{i}", cpu=cpu) for i in range(hosts))))
    return b


def placed_cpus(b: PlacementBoard, job: str, n: int, at: int) -> int:
    """Admit `n` one-cpu runs of own job `job` and run a round: how many were placed."""
    b.fold("JobCreated", job_created(job, n, cpu=1.0))
    b.fold("TasksAdmitted", tasks_admitted(job, *range(n), at=at))
    return sum(len(e.body["placements"]) for e in b.next_round(at) if e.type == "PlacementMade")


def test_another_engines_placement_holds_its_room_until_the_host_manager_refuses_it() -> None:
    b = board(cpu=4.0)
    b.fold("PlacementMade", placement_made(placement("theirs-1", 0, "h0", cpu=3.0),
                                           round_=10, at=10))
    assert b.hosts.holds[KEY].host == "h0" and not b.hosts.holds[KEY].revocable
    assert placed_cpus(b, "mine-1", 2, at=20) == 1  # 4 cpus, 3 held by the other engine
    b.fold("PlacementRejected", placement_rejected("theirs-1", 0, "h0", round_=10, at=30))
    assert KEY not in b.hosts.holds
    assert placed_cpus(b, "mine-2", 3, at=40) == 3  # 3 free again


def test_a_launch_holds_until_an_offer_counts_it() -> None:
    b = board(cpu=4.0)
    b.fold("PlacementMade", placement_made(placement("theirs-1", 0, "h0", cpu=3.0),
                                           round_=10, at=10))
    b.fold("TaskLaunchRequested", launch_requested("h0", launch("theirs-1", 0, cpu=3.0,
                                                                round_=10), at=20))
    assert b.hosts.holds[KEY].launched_at == 20
    assert placed_cpus(b, "mine-1", 2, at=25) == 1
    b.fold("OfferReceived", offer_received(offer("h0", cpu=4.0, free_cpu=0.0, generation=3),
                                           at=20))  # counts the launch and mine-1's
    assert KEY not in b.hosts.holds


def test_another_engines_job_facts_are_not_folded() -> None:
    b = board()
    b.fold("JobCreated", job_created("theirs-1", 2))
    b.fold("TaskStateChanged", task_state_changed("theirs-1", (0, "RUNNING"), previous="LAUNCHING"))
    assert "theirs-1" not in b.jobs and not b.book.runs
    b.fold("PlacementMade", placement_made(placement("theirs-1", 0, "h0"), round_=5, at=5))
    assert not b.book.runs and KEY in b.foreign.runs  # known from the host side only


def test_records_expire_and_old_facts_are_not_taken() -> None:
    b = board(hosts=2)
    b.fold("PlacementMade", placement_made(placement("theirs-1", 0, "h0"), round_=5, at=5))
    b.fold("TaskLaunchRequested", launch_requested("h1", launch("theirs-2", 0), at=6))
    assert len(b.hosts.holds) == 2
    later = 6 + FOREIGN_TTL_MS
    b.next_round(later)  # (a placement withdrawn by a kill is answered by nothing)
    assert not b.foreign.runs and not b.hosts.holds
    # a fact as old as that is stale: redelivered, it does not hold room again
    b.fold("PlacementMade", placement_made(placement("theirs-1", 0, "h0"), round_=5, at=5))
    assert not b.foreign.runs and not b.hosts.holds
    b.fold("PlacementMade", placement_made(placement("theirs-3", 0, "h0"), round_=later,
                                           at=later))
    assert list(b.foreign.runs) == [("theirs-3", 0, 1)]


def test_state_stays_bounded_by_the_rate_of_placements_times_the_ttl() -> None:
    b = board(hosts=4, cpu=1_000.0)
    step = 100
    for i in range(3 * FOREIGN_TTL_MS // step):
        at = i * step
        b.fold("PlacementMade", placement_made(placement(f"theirs-{i}", 0, f"h{i % 4}"),
                                               round_=at + 1, at=at))
        b.fold("TaskLaunchRequested", launch_requested(
            f"h{i % 4}", launch(f"theirs-{i}", 0, round_=at + 1), at=at))
        b.next_round(at)
        assert len(b.foreign.runs) <= FOREIGN_TTL_MS // step + 1
    assert not b.book.runs and not b.jobs


# ---- any order of the facts about one run ----------------------------------------------
Fact = tuple[str, int, str]  # (type, round, host)

FACTS = st.lists(st.tuples(st.sampled_from(["placed", "rejected", "launched"]),
                           st.integers(1, 4), st.sampled_from(["h0", "h1"])),
                 min_size=1, max_size=5)


def fold(b: PlacementBoard, fact: Fact) -> None:
    kind, round_, host = fact
    if kind == "placed":
        b.fold("PlacementMade", placement_made(placement(*KEY[:2], host), round_=round_,
                                               at=round_))
    elif kind == "rejected":
        b.fold("PlacementRejected", placement_rejected(*KEY[:2], host, round_=round_,
                                                       at=round_))
    else:
        b.fold("TaskLaunchRequested", launch_requested(host, launch(*KEY[:2], round_=round_),
                                                       at=round_))


def expected(facts: list[Fact]) -> tuple[str, bool] | None:
    """What the run holds once every fact is read: its launch's host, else its newest
    placement's unless a rejection of that round or later was seen."""
    launches = [f for f in facts if f[0] == "launched"]
    if launches:
        return launches[0][2], True
    placed = [f for f in facts if f[0] == "placed"]
    rejected = max((f[1] for f in facts if f[0] == "rejected"), default=0)
    if not placed or max(f[1] for f in placed) <= rejected:
        return None
    return next(f[2] for f in placed if f[1] == max(p[1] for p in placed)), False


@settings(max_examples=150, deadline=None)
@given(FACTS)
def test_what_a_run_holds_does_not_depend_on_the_order_of_its_facts(facts: list[Fact]) -> None:
    # one launch per run (the host manager decides a run once); placements of one round
    # name one host (one engine's round)
    first = next((f for f in facts if f[0] == "launched"), None)
    facts = [f for f in facts if f[0] != "launched" or f is first]
    hosts = {r: h for kind, r, h in facts if kind == "placed"}
    facts = [(k, r, hosts[r]) if k == "placed" else (k, r, h) for k, r, h in facts]
    want = expected(facts)
    for order in set(permutations(facts)):
        b = board(hosts=0)
        for fact in [*order, *order]:  # every record may come twice
            fold(b, fact)
        hold = b.hosts.holds.get(KEY)
        got = None if hold is None else (hold.host, hold.launched_at is not None)
        assert got == want, order


def test_snapshot_keeps_the_records_in_order() -> None:
    b = board(hosts=2)
    for i in range(5):
        b.fold("PlacementMade", placement_made(placement(f"theirs-{i}", 0, f"h{i % 2}"),
                                               round_=i + 1, at=i * 10))
    b.fold("PlacementRejected", placement_rejected("theirs-1", 0, "h1", round_=2, at=50))
    restored = PlacementBoard.from_snapshot(b.snapshot())
    assert restored.foreign.to_data() == b.foreign.to_data()
    assert restored.hosts.holds == b.hosts.holds
    restored.share = b.share
    assert placed_cpus(restored, "mine-1", 8, at=60) == placed_cpus(b, "mine-1", 8, at=60)
    rows = b.foreign.to_data()
    with pytest.raises(ValueError, match="out of order"):
        ForeignRuns.from_data([[*r[:3], 99 - i, *r[4:]] for i, r in enumerate(rows)])


def test_an_engine_of_several_reads_its_partition_and_skips_older_snapshots() -> None:
    # its snapshot holds its share's runs only: one written while engines read every
    # partition of job-events (every job's runs, whose ends it no longer reads) is passed over
    assert "job-events" in PLACEMENT_ROUTE.sharded
    assert PlacementShardCore.snapshot_version != PlacementCore.snapshot_version
    core = PlacementShardCore(1)
    assert core.board.share is not None and core.board.foreign.runs == {}
    core.restore(PlacementShardCore(1).snapshot())
    assert core.board.share is not None
