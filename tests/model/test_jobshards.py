"""by_shard and by_job_shard: a batch's items cut by a shard function (their job's partition)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from peloton.model.jobshards import by_job_shard, by_shard

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


@given(st.lists(st.integers(0, 50), max_size=30), st.integers(1, 5))
def test_any_shard_function_cuts_the_same_way(items: list, shards: int) -> None:
    parts = by_shard(items, lambda x: x % shards)
    assert [x for part in parts for x in part] == sorted(items, key=lambda x: x % shards)
    assert [part[0] % shards for part in parts] == sorted({x % shards for x in items})
    assert all(len({x % shards for x in part}) == 1 for part in parts)
