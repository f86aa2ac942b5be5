"""The board keeps one host table between rounds and refreshes only the hosts whose offer
or in-flight placements changed: over any sequence of facts it decides exactly as a board
that rebuilds every host's view from scratch each round (the rule it optimises: latest
offer minus in-flight placements, unavailable hosts left out)."""

from __future__ import annotations

from typing import Any

from event_bodies import (
    job_created,
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

from peloton.model.resources import Resources
from peloton.placement.domain.board import PlacementBoard
from peloton.placement.domain.hostindex import HostTable
from peloton.placement.domain.hostviews import HostViews
from peloton.placement.domain.hostviews import free_ranges as _free_ranges
from peloton.placement.domain.types import HostView

Body = dict[str, Any]
HOSTS = ("h1", "h2", "h3", "h4")
JOBS: dict[str, dict[str, Any]] = {
    "web": {"instances": 6, "ports": ("http",), "constraint": {"maxPerHost": 2}},
    "batch": {"instances": 8, "cpu": 0.5},
    "gang": {"instances": 3, "min_running": 3, "cpu": 1.5},
    "spare": {"instances": 4, "revocable": True, "cpu": 1.0},
}


class RebuildingViews(HostViews):
    """Every host's view rebuilt from its offer and all in-flight holds, per round."""

    def __init__(self) -> None:
        super().__init__()
        self.rebuilt = 0

    def table(self) -> HostTable:
        self.rebuilt += 1
        pending: dict[str, Resources] = {}
        slack: dict[str, Resources] = {}
        ports: dict[str, set[int]] = {}
        counts: dict[str, dict[str, int]] = {}
        for key, hold in self.holds.items():
            for into in (pending, slack):  # one allocation: a hold takes from both
                into[hold.host] = into.get(hold.host, Resources()) + hold.resources
            ports.setdefault(hold.host, set()).update(hold.ports)
            per_host = counts.setdefault(hold.host, {})
            label = f"peloton.job_id={key[0]}"
            per_host[label] = per_host.get(label, 0) + 1
        views = []
        for name in sorted(self.offers):
            body = self.offers[name].body
            if not body["available"]:
                continue
            label_counts = dict(body["task_label_counts"])
            for label, n in counts.get(name, {}).items():
                label_counts[label] = label_counts.get(label, 0) + n
            views.append(HostView(
                name, Resources.from_mapping(body["capacity"]),
                (Resources.from_mapping(body["free"])
                 - pending.get(name, Resources())).clamp_non_negative(),
                (Resources.from_mapping(body.get("slack"))
                 - slack.get(name, Resources())).clamp_non_negative(),
                labels=dict(body["labels"]), task_label_counts=label_counts,
                ports_free=_free_ranges(body["port_range_begin"], body["port_range_end"],
                                        set(body["used_ports"]) | ports.get(name, set()))))
        return HostTable(views)


class RebuildingBoard(PlacementBoard):
    def __init__(self) -> None:
        super().__init__()
        self.hosts = RebuildingViews()


def facts(data: st.DataObject, placed: list[Body]) -> tuple[str, Body] | None:
    """One fact hostmgr, resmgr or jobmgr might send next (None: run a round)."""
    draw = data.draw
    kind = draw(st.sampled_from(["offer", "admit", "round", "round", "launch", "reject",
                                 "end"]))
    if kind == "offer":
        name = draw(st.sampled_from(HOSTS))
        cpu = draw(st.sampled_from([2.0, 4.0]))
        return "OfferReceived", offer_received(offer(
            name, cpu=cpu, free_cpu=draw(st.sampled_from([0.0, 1.0, cpu])),
            available=draw(st.integers(0, 4)) > 0, generation=draw(st.integers(1, 9)),
            used_ports=draw(st.sampled_from([(), (31000,), (31001, 31003)])),
            labels={"zone": draw(st.sampled_from("ab"))},
            slack_cpu=draw(st.sampled_from([0.0, 1.0, 2.0]))))
    if kind == "admit":
        job = draw(st.sampled_from(sorted(JOBS)))
        n = JOBS[job]["instances"]
        return "TasksAdmitted", tasks_admitted(job, *draw(st.lists(
            st.integers(0, n - 1), min_size=1, max_size=n, unique=True)))
    if kind == "round" or not placed:
        return None
    p = draw(st.sampled_from(placed))
    if kind == "launch":
        return "TaskLaunchRequested", launch_requested(p["host"], launch(p["job_id"],
                                                                         p["instance"]))
    if kind == "reject":
        return "PlacementRejected", placement_rejected(p["job_id"], p["instance"], p["host"])
    return "TaskStateChanged", task_state_changed(p["job_id"], (p["instance"], "KILLED"),
                                                  previous="PLACED", host=p["host"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_refreshing_changed_hosts_decides_as_rebuilding_every_host(data: st.DataObject) -> None:
    boards = (PlacementBoard(), RebuildingBoard())
    for board in boards:
        for job, kw in JOBS.items():
            board.fold("JobCreated", job_created(job, **kw))
    placed: list[Body] = []
    for now in range(40):
        fact = facts(data, placed)
        if fact is not None:
            for board in boards:
                board.fold(*fact)
            continue
        fast, slow = (board.next_round(now) for board in boards)
        assert [(e.type, e.body) for e in fast] == [(e.type, e.body) for e in slow]
        placed += [p for e in fast if e.type == "PlacementMade" for p in e.body["placements"]]
    rebuilding = boards[1].hosts
    assert isinstance(rebuilding, RebuildingViews)
    assert rebuilding.rebuilt or not boards[1].round  # the rebuilt views were the ones used
