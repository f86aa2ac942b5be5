"""A round is written one record per partition of its jobs (PlacementBoard.shard_of_job).

The job manager's shards read placement-made partition by partition, so a record must
hold only jobs of the partition its key sends it to; cutting a round into records must
not change what the round decided.
"""

from __future__ import annotations

from event_bodies import job_created, offer, offer_received, tasks_admitted
from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.bus.keys import key_of
from peloton.bus.routing import partition_for, partition_of
from peloton.model.event import Event
from peloton.placement.domain.board import PlacementBoard
from peloton.placement.service import PlacementCore


def round_of(jobs: dict[str, int], hosts: int, shards: int | None) -> list[Event]:
    """One round over `jobs` (id -> instances of 1 cpu) on `hosts` hosts of 4 cpus,
    cut by a hash of the job id into `shards` partitions (None: not cut)."""
    board = PlacementBoard()
    if shards is not None:
        board.shard_of_job = lambda job: partition_for(job.encode(), shards)
    for job_id, n in jobs.items():
        board.fold("JobCreated", job_created(job_id, n, cpu=1.0))
    board.fold("OfferReceived", offer_received(*(offer(f"h{i}", cpu=4) for i in range(hosts))))
    for job_id, n in jobs.items():
        board.fold("TasksAdmitted", tasks_admitted(job_id, *range(n)))
    return board.next_round(1_000)


#: the list field of each event type that names jobs
FIELD = {"PlacementMade": "placements", "PlacementFailed": "tasks"}


def items(events: list[Event], etype: str) -> list[tuple[str, int]]:
    return sorted((i["job_id"], i["instance"]) for e in events if e.type == etype
                  for i in e.body[FIELD[etype]])


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from([f"job-{i}" for i in range(12)]),
                       st.integers(1, 5), min_size=1, max_size=8),
       st.integers(0, 6), st.integers(1, 5))
def test_a_round_cut_by_partition_decides_as_the_whole_round(
        jobs: dict[str, int], hosts: int, shards: int) -> None:
    whole, cut = round_of(jobs, hosts, None), round_of(jobs, hosts, shards)
    for etype, field in FIELD.items():
        assert items(cut, etype) == items(whole, etype)
        records = [e for e in cut if e.type == etype]
        partitions = [{partition_for(i["job_id"].encode(), shards) for i in e.body[field]}
                      for e in records]
        # one partition per record, each partition once, in partition order
        assert all(len(p) == 1 for p in partitions)
        assert [min(p) for p in partitions] == sorted({min(p) for p in partitions})
        # the record's key (the catalog's rule) is a job of that partition
        for e, p in zip(records, partitions, strict=True):
            assert partition_for(key_of(etype, e.body).encode(), shards) in p
        assert len({e.body["round"] for e in cut}) <= 1


def test_the_service_cuts_rounds_by_the_partitions_of_placement_made() -> None:
    core = PlacementCore()
    jobs = [f"job-{i}" for i in range(16)]
    for job_id in jobs:
        core.fold("JobCreated", job_created(job_id, 1, cpu=1.0))
    core.fold("OfferReceived", offer_received(*(offer(f"h{i}", cpu=4) for i in range(4))))
    for job_id in jobs:
        core.fold("TasksAdmitted", tasks_admitted(job_id, 0))
    of = partition_of("placement-made")
    events = core.tick(1_000)
    assert sum(len(e.body["placements"]) for e in events) == 16
    assert len(events) == len({of(j) for j in jobs}) > 1
    for e in events:
        assert {of(p["job_id"]) for p in e.body["placements"]} == {of(e.key)}
    # and so does a core restored from a snapshot
    restored = PlacementCore()
    restored.restore(core.snapshot())
    assert restored.board.shard_of_job is not None
