"""by_job_shard: a batch's items cut by the partition of their job."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from peloton.model.jobshards import by_job_shard

ITEMS = st.lists(st.builds(lambda j, i: {"job_id": f"j{j}", "instance": i},
                           st.integers(0, 9), st.integers(0, 99)), max_size=30)


@given(ITEMS, st.integers(1, 4))
def test_each_part_is_one_shard_in_order_and_nothing_is_lost(items: list, shards: int) -> None:
    def shard(job: str) -> int:
        return int(job[1:]) % shards
    parts = by_job_shard(items, shard)
    keys = [{shard(i["job_id"]) for i in part} for part in parts]
    assert all(len(k) == 1 for k in keys) and all(parts)
    assert [min(k) for k in keys] == sorted({min(k) for k in keys})  # each shard once
    for part, k in zip(parts, keys, strict=True):  # the items' own order kept
        assert part == [i for i in items if shard(i["job_id"]) in k]


@given(ITEMS)
def test_without_a_shard_function_the_items_stay_one_batch(items: list) -> None:
    assert by_job_shard(items, None) == ([items] if items else [])
