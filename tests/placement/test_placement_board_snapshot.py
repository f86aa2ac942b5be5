"""snapshot()/restore() of the placement service's core: a core restored from a snapshot
(through JSON, as the shell stores it) decides exactly as the core it was taken from,
over any facts that follow; data it cannot read raises ValueError/KeyError/TypeError and
leaves the core as it was."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from event_bodies import (
    job_created,
    job_state_changed,
    launch,
    launch_requested,
    offer,
    offer_received,
    placement_rejected,
    task_state_changed,
    tasks_admitted,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from peloton.placement.service import PlacementCore

Body = dict[str, Any]
HOSTS = ("h1", "h2", "h3")
JOBS: dict[str, dict[str, Any]] = {
    "web": {"instances": 4, "ports": ("http",), "constraint": {"maxPerHost": 2}},
    "batch": {"instances": 5, "cpu": 0.5, "priority": 3},
    "gang": {"instances": 3, "min_running": 3, "cpu": 1.5},
    "spare": {"instances": 3, "revocable": True},
}
RETENTION = 200


def fact(data: st.DataObject, now: int, placed: list[Body]) -> tuple[str, Body] | None:
    """One fact the placement service might read next (None: a tick)."""
    draw = data.draw
    kind = draw(st.sampled_from(["offer", "job", "admit", "admit", "tick", "tick", "launch",
                                 "reject", "end", "done", "update"]))
    if kind == "offer":
        cpu = draw(st.sampled_from([2.0, 4.0]))
        return "OfferReceived", offer_received(offer(
            draw(st.sampled_from(HOSTS)), cpu=cpu, free_cpu=draw(st.sampled_from([0.0, cpu])),
            slack_cpu=draw(st.sampled_from([0.0, 2.0])), slack_mem=1024.0,
            generation=draw(st.integers(1, 6)), available=draw(st.integers(0, 5)) > 0,
            used_ports=draw(st.sampled_from([(), (31000,)]))), at=now)
    if kind == "job":
        job = draw(st.sampled_from(sorted(JOBS)))
        return "JobCreated", job_created(job, at=now, **JOBS[job])
    if kind == "update":  # a later config version (rolling update): other resources
        job = draw(st.sampled_from(sorted(JOBS)))
        version = draw(st.sampled_from([2, 3]))
        return "JobSpecChanged", {**job_created(job, at=now, **{**JOBS[job], "cpu": version}),
                                  "version": version, "update_id": f"u{version}"}
    if kind == "admit":
        job = draw(st.sampled_from(sorted(JOBS)))
        n = JOBS[job]["instances"]
        body = tasks_admitted(job, *draw(st.lists(
            st.integers(0, n - 1), min_size=1, max_size=n, unique=True)),
            run=draw(st.sampled_from([1, 1, 2])), at=now,
            pinned_host=draw(st.sampled_from([None, None, *HOSTS, "h9"])))
        version = draw(st.sampled_from([1, 1, 2, 3]))
        for t in body["tasks"]:
            t["config_version"] = version
        return "TasksAdmitted", body
    if kind == "done":
        return "JobStateChanged", job_state_changed(
            draw(st.sampled_from(sorted(JOBS))), draw(st.sampled_from(["SUCCEEDED", "RUNNING"])),
            "RUNNING", {}, at=now)
    if kind == "tick" or not placed:
        return None
    p = draw(st.sampled_from(placed))
    if kind == "launch":
        return "TaskLaunchRequested", launch_requested(
            p["host"], launch(p["job_id"], p["instance"], run=p["run"], round_=p["round"]),
            at=now)
    if kind == "reject":
        return "PlacementRejected", placement_rejected(
            p["job_id"], p["instance"], p["host"], run=p["run"], round_=p["round"], at=now)
    return "TaskStateChanged", task_state_changed(
        p["job_id"], (p["instance"], draw(st.sampled_from(["KILLED", "RUNNING"]))),
        run=p["run"], previous="LAUNCHED", host=p["host"], at=now)


def drive(data: st.DataObject, cores: list[PlacementCore], steps: int, start: int,
          placed: list[Body]) -> int:
    """Feed every core the same facts and ticks; their decisions must be the same."""
    now = start
    for _ in range(steps):
        now += data.draw(st.sampled_from([1, 1, 7, RETENTION // 3]))
        f = fact(data, now, placed)
        if f is not None:
            for core in cores:
                assert core.handle(*f, now) == []
            continue
        outs = [[(e.type, e.key, e.body) for e in core.tick(now)] for core in cores]
        assert all(out == outs[0] for out in outs)
        placed += [{**p, "round": body["round"]} for t, _, body in outs[0]
                   if t == "PlacementMade" for p in body["placements"]]
    return now


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_restored_core_decides_as_the_original(data: st.DataObject) -> None:
    core = PlacementCore(retention_ms=RETENTION)
    placed: list[Body] = []
    now = drive(data, [core], data.draw(st.integers(0, 40)), 0, placed)
    state = core.snapshot()
    restored = PlacementCore(retention_ms=1)
    restored.restore(json.loads(json.dumps(state)))
    assert restored.snapshot() == state
    drive(data, [core, restored], 40, now, placed)
    assert restored.snapshot() == core.snapshot()


def _set(state: Body, path: tuple[Any, ...], value: Any) -> Body:
    out = copy.deepcopy(state)
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


def _busy_core() -> PlacementCore:
    core = PlacementCore(retention_ms=RETENTION)
    core.handle("JobCreated", job_created("web", 3, ports=("http",)), 1)
    core.handle("OfferReceived", offer_received(offer("h1", cpu=2, slack_cpu=1)), 1)
    core.handle("TasksAdmitted", tasks_admitted("web", 0, 1, 2), 1)
    core.handle("TaskStateChanged", task_state_changed("web", (2, "KILLED"), run=1), 1)
    core.handle("TasksAdmitted", tasks_admitted("web", 2, run=2), 1)
    core.handle("JobStateChanged", job_state_changed("old", "SUCCEEDED", "RUNNING", {}), 1)
    assert core.tick(2)
    return core


GOOD = _busy_core().snapshot()
BAD: list[Any] = [
    None, [], "state", {}, {**GOOD, "round": "soon"}, {**GOOD, "finished": []},
    {**GOOD, "finished": {"j": "later"}}, {**GOOD, "jobs": [{"job_id": "x"}]},
    {**GOOD, "jobs": None}, {**GOOD, "book": []}, {**GOOD, "book": None},
    {**GOOD, "reasons": [["j", 0]]}, {**GOOD, "hosts": {"offers": [[{"host": "h"}, 1]]}},
    _set(GOOD, ("book", "runs", 0), [1, 2]), _set(GOOD, ("book", "runs", 0, 3), 9),
    _set(GOOD, ("book", "queue"), {"a": 1}), _set(GOOD, ("book", "ended"), [["j", 1]]),
    _set(GOOD, ("hosts", "holds", 0, 4), {"cpu": "x"}),
    _set(GOOD, ("hosts", "holds", 0, 4), {"cores": 1.0}),
    _set(GOOD, ("hosts", "holds", 0), ["web", 0, 1, "h1"]),
    _set(GOOD, ("hosts", "offers", 0, 0, "free"), 3),
    _set(GOOD, ("hosts", "offers"), {"h1": 1}),
]


@pytest.mark.parametrize("bad", BAD, ids=range(len(BAD)))
def test_unreadable_snapshots_raise_and_leave_the_core_unchanged(bad: Any) -> None:
    assert GOOD["book"]["runs"] and GOOD["hosts"]["holds"] and GOOD["reasons"]
    core = _busy_core()
    before = core.snapshot()
    with pytest.raises((ValueError, KeyError, TypeError)):
        core.restore(bad)
    assert core.snapshot() == before


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_corrupted_snapshot_is_read_or_refused_with_a_known_error(data: st.DataObject) -> None:
    """Replace one part of a good snapshot by any JSON value: restore either reads it or
    raises ValueError/KeyError/TypeError (the shell then replays), nothing else."""
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        if path:
            paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, (*path, i))

    walk(GOOD, ())
    path = data.draw(st.sampled_from(paths))
    junk = data.draw(st.recursive(
        st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False)
        | st.text(max_size=3),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                    max_size=3), max_leaves=5))
    core = PlacementCore()
    try:
        core.restore(_set(GOOD, path, junk))
    except (ValueError, KeyError, TypeError):
        return
    # what restores also runs: the next facts and rounds do not trip over it
    core.handle("OfferReceived", offer_received(offer("h1", cpu=2, generation=9), at=3), 3)
    core.handle("TasksAdmitted", tasks_admitted("web", 0, 1, 2, run=3, at=3), 3)
    core.tick(3 * RETENTION)


def test_a_run_both_live_and_ended_is_refused() -> None:
    # regression (found by the property above in CI): `ended` raised past a live run; the
    # next run's admission then kept both and the round raised on duplicate task ids
    ended = GOOD["book"]["ended"]["web"][0][1]
    with pytest.raises(ValueError, match="both live and ended"):
        PlacementCore().restore(_set(GOOD, ("book", "ended", "web", 0, 1), ended + 1))


def test_a_spec_field_of_the_wrong_type_is_refused_not_met_in_a_round() -> None:
    # regression (found by the property above in CI): a list as a job's respool was read,
    # then the round's pending-reasons metric hashed it and the tick raised
    core = PlacementCore()
    with pytest.raises(TypeError, match="respool"):
        core.restore(_set(GOOD, ("jobs", 0, "respool"), []))
