"""The host manager acts only on the ends and kills of TaskStateChanged, and its shell
skips the other records of job-events undecoded (`hosts.acts_on`, told from the bytes).

Properties: a TaskStateChanged whose changes name none of `ACTED_ON` changes nothing,
whatever the host manager lived through before (generated histories); `acts_on` never
says no to a record with a change to an end or a kill, whatever else the record holds
(reasons, hosts, job ids); it says no to the records of a task's way to RUNNING. Example:
the driver hands the host manager's core none of the skipped records, decoded or not.
"""

from __future__ import annotations

import copy
from typing import Any

import hypothesis.strategies as st
from hostmgr_histories import history
from hypothesis import given, settings

from peloton.bus.codec import Codec, default_codec, schema_dir
from peloton.bus.driver import CoreDriver
from peloton.hostmgr.domain import snapshot
from peloton.hostmgr.domain.hosts import ACTED_ON, acts_on
from peloton.hostmgr.service import HostManagerCore
from peloton.model.taskstate import TaskState

CODEC = default_codec()
STATES = [s.value for s in TaskState]
QUIET = [s for s in STATES if s not in ACTED_ON]


def change(instance: int, run: int, state: str, previous: str, reason: str = "",
           host: str | None = None) -> dict[str, Any]:
    return {"instance": instance, "run": run, "state": state, "previous_state": previous,
            "reason": reason, "host": host, "exit_code": None, "failures": 0,
            "not_before_ms": None, "round": -1, "pinned_host": None, "config_version": 1}


quiet_changes = st.lists(st.builds(
    change, st.integers(0, 4), st.integers(1, 3), st.sampled_from(QUIET),
    st.sampled_from(QUIET), st.just(""), st.sampled_from([None, "h1", "h2", "h9"])),
    min_size=1, max_size=6)


@settings(max_examples=80, deadline=None)
@given(st.data(), st.sampled_from(["j1", "j2", "j3"]), quiet_changes, st.integers(0, 10**6))
def test_a_record_of_no_end_or_kill_changes_nothing(data: st.DataObject, job_id: str,
                                                   changes: list[dict[str, Any]],
                                                   at: int) -> None:
    book = history(data).ref
    before = copy.deepcopy(snapshot.dump(book))
    body = {"job_id": job_id, "at": at, "changes": changes}
    book.fold("TaskStateChanged", body)
    assert snapshot.dump(book) == before
    assert not acts_on("TaskStateChanged", CODEC.encode("TaskStateChanged", body))


text = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.builds(change, st.integers(0, 10**6), st.integers(1, 10**4),
                          st.sampled_from(STATES), st.sampled_from(STATES), text,
                          st.one_of(st.none(), text)), min_size=1, max_size=8),
       text, st.integers(0, 2**62))
def test_a_record_with_an_end_or_a_kill_is_always_read(changes: list[dict[str, Any]],
                                                      job_id: str, at: int) -> None:
    value = CODEC.encode("TaskStateChanged", {"job_id": job_id, "at": at, "changes": changes})
    if any(ch["state"] in ACTED_ON for ch in changes):
        assert acts_on("TaskStateChanged", value)
    assert acts_on("JobCreated", value)  # only TaskStateChanged is ever passed over


def test_a_task_on_its_way_to_running_is_passed_over() -> None:
    way = ["PENDING", "READY", "PLACED", "LAUNCHING", "LAUNCHED", "STARTING", "RUNNING"]
    for previous, state in zip(["INITIALIZED", *way], way, strict=False):
        body = {"job_id": "etl-7", "at": 5, "changes": [change(0, 1, state, previous,
                                                                host="host-12")]}
        assert not acts_on("TaskStateChanged", CODEC.encode("TaskStateChanged", body))


async def test_the_driver_gives_the_core_only_the_records_it_acts_on(monkeypatch: Any) -> None:
    seen: list[tuple[str, Any]] = []
    decoded: list[bytes] = []

    class Core(HostManagerCore):
        def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Any]:
            seen.append((etype, [ch["state"] for ch in body.get("changes", [])]))
            return super().handle(etype, body, now)

    codec = Codec(schema_dir())
    real = codec.decode

    def counting(data: bytes | None) -> tuple[str, dict[str, Any]]:
        decoded.append(bytes(data or b""))
        return real(data)

    monkeypatch.setattr(codec, "decode", counting)
    driver = CoreDriver("hostmgr", Core(), "127.0.0.1:1", codec, leading=lambda: False)
    states = ["PENDING", "READY", "RUNNING", "SUCCEEDED", "KILLING"]
    records = [("job-events", 0, n, b"j1", CODEC.encode("TaskStateChanged", {
        "job_id": "j1", "at": n, "changes": [change(0, 1, s, "PENDING")]}))
        for n, s in enumerate(states)]
    await driver.on_records(records, {"job-events": ("TaskStateChanged",)})
    assert seen == [("TaskStateChanged", ["SUCCEEDED"]), ("TaskStateChanged", ["KILLING"])]
    assert len(decoded) == 2
    assert driver.positions[("job-events", 0)] == len(states)  # the skipped ones too
