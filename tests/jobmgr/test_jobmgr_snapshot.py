"""snapshot()/restore() of the job manager's service adapter (issue 8, item 5).

Property: a core restored from a snapshot (through JSON, as the shell stores it) taken at
any point of any input stream decides exactly what the original decides from then on,
timeouts and retention included. Unreadable snapshots raise ValueError, KeyError or
TypeError (the shell then replays the log) and leave the core as it was.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import hypothesis.strategies as st
import pytest
from event_bodies import placement_rejected, tasks_admitted
from hypothesis import HealthCheck, given, settings
from jobmgr_driver import RECONCILE
from jobmgr_inputs import Input, input_streams
from json_paths import json_paths, parent_of

from peloton.bus.codec import default_codec
from peloton.jobmgr.domain.snapshot import SNAPSHOT_VERSION
from peloton.jobmgr.domain.timeouts import Timeouts
from peloton.jobmgr.service import JobManagerCore
from peloton.model.event import Event

# short limits so that ticks in a short stream time runs out and forget jobs
LIMITS = Timeouts(placement_ms=100, placement_backoff_unit_ms=40, preempt_ms=100)
RETENTION = 300
TICK_STEP = 150  # a RECONCILE input of the stream becomes a tick this much later
CODEC = default_codec()


def core() -> JobManagerCore:
    return JobManagerCore(retention_ms=RETENTION, timeouts=LIMITS)


class Clocked:
    """A core and its event time, fed the way the shell feeds it."""

    def __init__(self, c: JobManagerCore, now: int = 0) -> None:
        self.core = c
        self.now = now

    def feed(self, item: Input) -> list[tuple[str, str, Any]]:
        etype, body = item
        if etype == RECONCILE:
            self.now += TICK_STEP
            out: list[Event] = self.core.tick(self.now)
        else:
            self.now += 10
            assert body is not None
            out = self.core.handle(etype, copy.deepcopy(body), self.now)
        return [(e.type, e.key, e.body) for e in out]


def through_json(state: dict[str, Any]) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(json.dumps(state))
    return loaded


PROPERTY = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPERTY
@given(input_streams(), st.data())
def test_a_restored_core_behaves_exactly_like_the_original(inputs: list[Input],
                                                           data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(inputs)), label="cut")
    original = Clocked(core())
    for item in inputs[:cut]:
        original.feed(item)
    state = through_json(original.core.snapshot())
    restored = Clocked(core(), original.now)
    restored.core.restore(state)
    assert restored.core.snapshot() == state  # restore(snapshot()) is the same book
    tail = inputs[cut:] + [(RECONCILE, None)] * 3  # ticks: timeouts and retention
    for item in tail:
        decided = original.feed(item)
        assert restored.feed(item) == decided
        for etype, _, body in decided:  # and every decision matches its schema
            CODEC.encode(etype, body)
    assert restored.core.snapshot() == original.core.snapshot()


def test_held_rejections_travel_in_the_snapshot() -> None:
    first = Clocked(core())
    first.feed(("JobSubmitted", _job("j")))
    first.feed(("PlacementRejected", placement_rejected("j", 0, "h1", round_=4)))
    state = through_json(first.core.snapshot())
    assert state["held_rejections"] == [["j", 0, 1, 4, "h1"]]
    second = core()
    second.restore(state)
    assert len(second.book.held) == 1


def test_the_snapshot_is_versioned_and_plain_json() -> None:
    c = core()
    Clocked(c).feed(("JobSubmitted", _job("j")))
    assert c.snapshot_version == SNAPSHOT_VERSION == 4
    assert through_json(c.snapshot()) == c.snapshot()


def _job(job_id: str) -> dict[str, Any]:
    from event_bodies import job_submitted

    return job_submitted(job_id, 2)


# ====================================================================== bad input


def _sample_state() -> dict[str, Any]:
    c = Clocked(core())
    c.feed(("JobSubmitted", _job("j")))
    c.feed(("TasksAdmitted", tasks_admitted("j", 0)))
    c.feed(("PlacementRejected", placement_rejected("j", 1, "h1", round_=3)))
    c.feed(("JobKillRequested", {"job_id": "zz", "at": 0, "instances": [],
                                 "reason": "", "requested_by": "t"}))
    c.feed(("JobSubmitted", {**_job("bad"), "instance_count": 0}))
    return through_json(c.core.snapshot())


def _broken(edit: str) -> dict[str, Any]:
    state = _sample_state()
    job = state["jobs"]["j"]
    if edit == "not a mapping":
        return []  # type: ignore[return-value]
    if edit == "jobs missing":
        del state["jobs"]
    elif edit == "jobs a list":
        state["jobs"] = []
    elif edit == "task row too short":
        job["tasks"][0] = job["tasks"][0][:-1]
    elif edit == "unknown task state":
        job["tasks"][0][1] = "DELETED"
    elif edit == "unknown job state":
        job["state"] = "PAUSED"
    elif edit == "fewer tasks than instances":
        job["tasks"].pop()
    elif edit == "spec of another job":
        job["spec"]["job_id"] = "other"
    elif edit == "spec without resources":
        del job["spec"]["default_task"]["resources"]
    elif edit == "spec resources a list":
        job["spec"]["default_task"]["resources"] = [1, 2]
    elif edit == "run not a number":
        job["tasks"][0][0] = "one"
    elif edit == "forgotten not base64":
        state["forgotten"] = "not base64!"
    elif edit == "forgotten a number":
        state["forgotten"] = 7
    elif edit == "forgotten cut":
        state["forgotten"] = "QUJD"
    elif edit == "submitted a list":
        state["submitted"] = ["j"]
    elif edit == "kill intent a number":
        state["kill_intents"]["zz"] = 5
    elif edit == "held row short":
        state["held_rejections"] = [["j", 1, 1]]
    elif edit == "pools a number":
        state["pools"] = 3
    elif edit == "rejected reasons a number":
        state["rejected"]["bad"] = [3, 0]
    return state


BROKEN = ["not a mapping", "jobs missing", "jobs a list", "task row too short",
          "unknown task state", "unknown job state", "fewer tasks than instances",
          "spec of another job", "spec without resources", "spec resources a list",
          "run not a number", "forgotten not base64", "forgotten a number", "forgotten cut",
          "submitted a list", "kill intent a number", "held row short", "pools a number",
          "rejected reasons a number"]


@pytest.mark.parametrize("edit", BROKEN)
def test_an_unreadable_snapshot_raises_and_leaves_the_core_as_it_was(edit: str) -> None:
    c = core()
    Clocked(c).feed(("JobSubmitted", _job("mine")))
    before = c.snapshot()
    with pytest.raises((ValueError, KeyError, TypeError)):
        c.restore(_broken(edit))
    assert c.snapshot() == before


JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=4),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=6)


SAMPLE = _sample_state()
PATHS = json_paths(SAMPLE)[1:]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.sampled_from(PATHS), JSON)
def test_any_corrupted_field_is_read_or_refused_never_a_crash(path: tuple[Any, ...],
                                                              value: Any) -> None:
    state = copy.deepcopy(SAMPLE)
    parent_of(state, path)[path[-1]] = value
    c = core()
    try:
        c.restore(state)
    except (ValueError, KeyError, TypeError):
        return
    c.tick(10_000)  # a core that accepted it keeps working
