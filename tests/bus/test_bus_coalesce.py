"""One TaskStateChanged record for many jobs (peloton.bus.coalesce): the joined bytes are
exactly Avro's encoding of a v4 body, every part lands once in its own partition, each
job's records keep their order, and readers explode a record into the per-job facts."""

from __future__ import annotations

import io
from collections import defaultdict
from typing import Any

import event_bodies as eb
import fastavro
import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from peloton.bus.coalesce import (
    PART_VERSION,
    TOPIC,
    Joiner,
    coalesce,
    joiner_for,
    write_version,
    zigzag,
)
from peloton.bus.codec import Codec, default_codec, schema_dir
from peloton.bus.keys import record_key
from peloton.bus.routing import partition_for
from peloton.model.joinedchanges import explode

CODEC = default_codec()
JOINER = joiner_for(CODEC)
TSC = "TaskStateChanged"


def part(job_id: str, *changes: tuple[int, str], at: int = 0) -> tuple[str, bytes, bytes]:
    body = eb.task_state_changed(job_id, *changes, at=at)
    return TOPIC, record_key(TSC, body), CODEC.encode(TSC, body, write_version(TSC, body))


def job_state(job_id: str, state: str = "RUNNING") -> tuple[str, bytes, bytes]:
    body = eb.job_state_changed(job_id, state, "PENDING", {state: 1})
    return TOPIC, record_key("JobStateChanged", body), CODEC.encode("JobStateChanged", body)


def facts(records: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [f for r in records for f in CODEC.decode_each(r[2])]


def one_partition(n: int) -> list[str]:
    """n job ids that hash to partition 0 of 4."""
    return [j for j in (f"job-{i}" for i in range(200))
            if partition_for(j.encode(), 4) == 0][:n]


def test_a_single_jobs_changes_are_written_as_the_part_version() -> None:
    body = eb.task_state_changed("j", (0, "RUNNING"))
    assert write_version(TSC, body) == PART_VERSION
    assert write_version(TSC, body | {"more": [body]}) is None
    assert write_version("JobStateChanged", {}) is None
    assert part("j", (0, "RUNNING"))[2][:10] == JOINER.part_header != JOINER.joined_header


def test_three_jobs_of_one_partition_become_one_record_read_back_as_three_facts() -> None:
    jobs = one_partition(3)
    sent = [part(j, (0, "RUNNING"), (1, "READY"), at=i) for i, j in enumerate(jobs)]
    out = coalesce(sent, JOINER, lambda t: 4)
    assert len(out) == 1
    name, key, value, partition = out[0]
    assert (name, key, partition) == (TOPIC, jobs[0].encode(), 0)
    assert value[:10] == CODEC.header(TSC)
    assert facts(out) == facts(sent)
    assert [b["job_id"] for _, b in facts(out)] == jobs


def test_the_joined_bytes_are_avros_own_encoding_of_a_v4_body() -> None:
    jobs = one_partition(4)
    joined = coalesce([part(j, (i, "LAUNCHING")) for i, j in enumerate(jobs)], JOINER,
                      lambda t: 4)[0][2]
    expected = [eb.task_state_changed(j, (i, "LAUNCHING")) for i, j in enumerate(jobs)]
    head = dict(expected[0], more=[{k: b[k] for k in ("job_id", "at", "changes")}
                                   for b in expected[1:]])
    assert joined == CODEC.encode(TSC, head)  # the codec writing v4 itself
    public = fastavro.schemaless_reader(io.BytesIO(joined[10:]), CODEC.schema(TSC))
    assert public == head


def test_a_job_record_sent_between_two_of_its_parts_keeps_them_apart() -> None:
    a, b = one_partition(2)
    sent = [part(a, (0, "PLACED")), part(b, (0, "PLACED")), job_state(a),
            part(a, (0, "RUNNING")), part(b, (0, "RUNNING"))]
    out = coalesce(sent, JOINER, lambda t: 4)
    # a's RUNNING may not go before a's JobStateChanged: it opens the next group
    assert [[(t, b_["job_id"]) for t, b_ in CODEC.decode_each(v)] for _, _, v, _ in out] == [
        [(TSC, a), (TSC, b)], [("JobStateChanged", a)], [(TSC, a), (TSC, b)]]


def test_records_of_other_topics_and_unknown_partition_counts_pass_as_they_are() -> None:
    jobs = one_partition(3)
    other = ("job-submitted", b"k", CODEC.encode("JobSubmitted", eb.job_submitted("x")))
    sent = [part(jobs[0], (0, "READY")), other, part(jobs[1], (0, "READY"))]
    assert coalesce(sent, JOINER, lambda t: None) == [(*r, None) for r in sent]
    out = coalesce(sent, JOINER, lambda t: 4 if t == TOPIC else None)
    assert out[1] == (*other, None) and len(out) == 2


def test_a_group_is_cut_at_its_part_and_byte_limits() -> None:
    jobs = one_partition(7)
    sent = [part(j, (0, "READY")) for j in jobs]
    small = Joiner(JOINER.part_header, JOINER.joined_header, max_parts=3)
    assert [len(CODEC.decode_each(v)) for _, _, v, _ in coalesce(sent, small, lambda t: 4)] \
        == [3, 3, 1]
    largest = max(len(v) for _, _, v in sent)
    tight = Joiner(JOINER.part_header, JOINER.joined_header, max_bytes=2 * largest)
    assert [len(CODEC.decode_each(v)) for _, _, v, _ in coalesce(sent, tight, lambda t: 4)] \
        == [2, 2, 2, 1]


@pytest.mark.parametrize("n", [0, 1, -1, 63, 64, -65, 8191, 8192, 10**6, -(10**9)])
def test_zigzag_is_avros_long_encoding(n: int) -> None:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, "long", n)
    assert zigzag(n) == out.getvalue()


def test_an_old_record_with_only_appended_defaults_reads_as_schema_resolution_does() -> None:
    v3 = part("j", (0, "RUNNING"))[2]
    first, second = CODEC.decode(v3)[1], CODEC.decode(v3)[1]
    resolved = fastavro.schemaless_reader(io.BytesIO(v3[10:]), CODEC.schema(TSC, 3),
                                          CODEC.schema(TSC))
    assert first == resolved and first["more"] == []
    first["more"].append("x")  # each record gets its own default list
    assert second["more"] == []


def test_explode_gives_the_body_alone_for_other_events_and_single_jobs() -> None:
    body = eb.job_state_changed("j", "RUNNING", "PENDING", {})
    assert explode("JobStateChanged", body) == [body]
    single = eb.task_state_changed("j", (0, "RUNNING")) | {"more": []}
    assert explode(TSC, single) == [eb.task_state_changed("j", (0, "RUNNING"))]


# ------------------------------------------------------------------ properties

_JOBS = [f"job-{i}" for i in range(12)]
_SENT = st.lists(st.tuples(st.sampled_from(_JOBS), st.sampled_from(["part", "job", "other"]),
                           st.integers(0, 3)), max_size=60)


def _records(plan: list[tuple[str, str, int]]) -> list[tuple[str, bytes, bytes]]:
    out = []
    for i, (job, kind, inst) in enumerate(plan):
        if kind == "part":
            out.append(part(job, (inst, "RUNNING"), at=i))
        elif kind == "job":
            out.append(job_state(job))
        else:
            out.append(("offer-received", job.encode(), bytes([i % 256])))
    return out


def _per_key(records: list[Any], count: int) -> dict[tuple[str, str], list[Any]]:
    """Each job's facts on job-events, and the other topic's records, in order; every
    fact in its record's partition (the one `coalesce` gave, where it gave one)."""
    seen: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for name, key, value, *placed in records:
        if name != TOPIC:
            seen[(name, "")].append(value)
            continue
        partition = partition_for(key, count)
        assert placed in ([], [partition])
        for etype, body in CODEC.decode_each(value):
            assert partition_for(body["job_id"].encode(), count) == partition
            seen[(name, body["job_id"])].append((etype, body))
    return seen


@settings(max_examples=150, deadline=None)
@given(plan=_SENT, count=st.integers(1, 4), max_parts=st.integers(1, 6))
def test_coalesce_keeps_every_fact_once_in_its_partition_and_each_jobs_order(
        plan: list[tuple[str, str, int]], count: int, max_parts: int) -> None:
    sent = _records(plan)
    joiner = Joiner(JOINER.part_header, JOINER.joined_header, max_parts=max_parts)
    out = coalesce(sent, joiner, lambda t: count)
    assert out == coalesce(sent, joiner, lambda t: count)  # deterministic
    assert _per_key(out, count) == _per_key(sent, count)
    assert all(len(CODEC.decode_each(v)) <= max_parts for t, _, v, _ in out if t == TOPIC)
    assert len(out) <= len(sent)


def test_every_codec_reads_the_joined_records_of_another() -> None:
    """A second codec (another process) reads what the first joined."""
    other = Codec(schema_dir())
    jobs = one_partition(3)
    out = coalesce([part(j, (0, "READY")) for j in jobs], JOINER, lambda t: 4)
    assert [b["job_id"] for _, b in other.decode_each(out[0][2])] == jobs
