"""HostBook: placement validation, heartbeats and incarnations, releases, offers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import pytest
from event_bodies import (
    INCARNATION,
    agent_status,
    heartbeat,
    host_lost,
    host_registered,
    job_created,
    launch,
    launch_requested,
    placement,
    placement_made,
    task_state_changed,
)
from hostmgr_helpers import (
    HOLD,
    TIMEOUT,
    Body,
    book_with,
    launched,
    of,
    place,
    rejections,
    tick,
)
from hypothesis import HealthCheck, given, settings
from prometheus_client import REGISTRY

from peloton.hostmgr.domain.hosts import HostBook, refusal_class
from peloton.hostmgr.service import HostManagerCore
from peloton.model.resources import EPSILON, Resources

# ------------------------------------------------------------------ validation

def _nothing(book: HostBook) -> None:
    return None


def _taken(cpu: float, port: int | None = None) -> Callable[[HostBook], None]:
    def setup(book: HostBook) -> None:
        ports = {"http": port} if port is not None else None
        assert launched(place(book, placement("j1", 1, "h1", cpu=cpu, ports=ports), now=50))
    return setup


def _lost(book: HostBook) -> None:
    book.fold("HostLost", host_lost("h1"))


VALIDATION = [
    # (name, setup, placement, expected rejection reason or None for a launch)
    ("fits", _nothing, placement("j1", 0, "h1", cpu=1), None),
    ("fits exactly", _nothing, placement("j1", 0, "h1", cpu=4, mem=4096), None),
    ("fits what is left", _taken(3), placement("j1", 0, "h1", cpu=1), None),
    ("over capacity", _nothing, placement("j1", 0, "h1", cpu=5),
     "host h1 no longer fits: cpu 5>4"),
    ("over memory", _nothing, placement("j1", 0, "h1", cpu=1, mem=5000),
     "host h1 no longer fits: memory 5000>4096"),
    ("taken meanwhile", _taken(3), placement("j1", 0, "h1", cpu=2),
     "host h1 no longer fits: cpu 2>1"),
    ("lost host", _lost, placement("j1", 0, "h1"), "host h1 is lost"),
    ("old incarnation", _nothing, placement("j1", 0, "h1", incarnation="inc-0"),
     "host h1 restarted (incarnation changed)"),
    ("port clash", _taken(1, port=31000), placement("j1", 0, "h1", ports={"http": 31000}),
     "host h1: ports [31000] taken or out of range"),
    ("port out of range", _nothing, placement("j1", 0, "h1", ports={"http": 40000}),
     "host h1: ports [40000] taken or out of range"),
    ("free port", _taken(1, port=31000), placement("j1", 0, "h1", ports={"http": 31001}),
     None),
]


@pytest.mark.parametrize(("name", "setup", "p", "reason"), VALIDATION,
                         ids=[row[0] for row in VALIDATION])
def test_placement_validation(name: str, setup: Callable[[HostBook], None], p: Body,
                              reason: str | None) -> None:
    book = book_with("h1", "h2")
    setup(book)
    out = place(book, p)
    if reason is None:
        assert launched(out) == [(p["host"], p["job_id"], p["instance"])]
        assert rejections(out) == []
    else:
        assert launched(out) == []
        assert rejections(out) == [(p["job_id"], p["instance"], reason)]
        assert of(out, "PlacementRejected")[0].body["rejections"][0]["host"] == p["host"]
        assert refusal_class(reason) != "other"  # every refusal has a metric class
    assert book.pending == {}


def test_the_service_counts_refusals_by_class() -> None:
    """`peloton_hostmgr_placements_refused_total{reason}`: one per refused placement."""
    def count(cls: str) -> float:
        return REGISTRY.get_sample_value("peloton_hostmgr_placements_refused_total",
                                         {"reason": cls}) or 0.0

    core = HostManagerCore()
    core.book = book_with("h1", "h2")
    before = count("no longer fits"), count("host restarted")
    core.book.fold("PlacementMade", placement_made(
        placement("j1", 0, "h1", cpu=5), placement("j1", 1, "h2", cpu=5),
        placement("j1", 2, "h1", incarnation="inc-0"), placement("j1", 3, "h2")),
        received_ms=100)
    out = core.tick(100)
    assert len(rejections(out)) == 3 and len(launched(out)) == 1
    assert (count("no longer fits"), count("host restarted")) == (before[0] + 2, before[1] + 1)


def test_a_launch_carries_the_task_spec_and_its_ports() -> None:
    book = book_with("h1")
    book.fold("PlacementMade",
              placement_made(placement("j1", 2, "h1", cpu=1, ports={"http": 31005}), round_=41))
    (ev,) = of(tick(book, 123), "TaskLaunchRequested")
    assert ev.key == "h1"
    assert ev.body["host"] == "h1" and ev.body["incarnation"] == INCARNATION
    assert ev.body["at"] == 123
    assert ev.body["launches"] == [{
        "job_id": "j1", "instance": 2, "run": 1, "command": "echo hi",
        "env": {"PELOTON_JOB_ID": "j1", "PELOTON_INSTANCE_ID": "2",
                "PELOTON_TASK_ID": "j1-2-1", "PELOTON_CONFIG_VERSION": "1",
                "PORT_HTTP": "31005"},
        "resources": {"cpu": 1.0, "memory": 64.0, "disk": 0.0, "gpu": 0.0},
        "ports": {"http": 31005}, "kill_grace_period_s": 7.0,
        "round": 41,  # names the placement round it decides
        "health_check_json": None, "volume": None,  # the task has neither
        "config_version": 1}]  # the run's job config version (JobCreated's)


def test_launches_are_batched_per_host_in_host_order() -> None:
    book = book_with("h1", "h2")
    out = place(book, placement("j1", 0, "h2"), placement("j1", 1, "h1"),
                placement("j1", 2, "h2"))
    assert [(e.body["host"], [x["instance"] for x in e.body["launches"]])
            for e in of(out, "TaskLaunchRequested")] == [("h1", [1]), ("h2", [0, 2])]


def test_competing_placements_in_one_round_are_never_double_booked() -> None:
    book = book_with("h1")
    out = place(book, placement("j1", 0, "h1", cpu=3, ports={"http": 31000}),
                placement("j1", 1, "h1", cpu=3),
                placement("j1", 2, "h1", cpu=0.5, ports={"http": 31000}),
                placement("j1", 3, "h1", cpu=0.5, ports={"http": 31001}))
    assert launched(out) == [("h1", "j1", 0), ("h1", "j1", 3)]
    assert rejections(out) == [("j1", 1, "host h1 no longer fits: cpu 3>1"),
                               ("j1", 2, "host h1: ports [31000] taken or out of range")]


def test_a_decided_placement_delivered_again_is_not_validated_again() -> None:
    book = book_with("h1")
    p = placement("j1", 0, "h1", cpu=3)
    assert launched(place(book, p))
    assert place(book, p, now=200) == []
    assert book.hosts["h1"].allocated == Resources(3, 64)


# --------------------------------------------------------- heartbeats, incarnations


def test_a_silent_host_is_lost_after_the_timeout_and_not_before() -> None:
    book = book_with("h1", "h2")
    assert launched(place(book, placement("j1", 0, "h1"), placement("j1", 1, "h1")))
    book.fold("HostStatusReported", heartbeat("h2", 4000), received_ms=4000)
    assert of(tick(book, TIMEOUT), "HostLost") == []
    out = tick(book, TIMEOUT + 1)
    assert [e.body for e in of(out, "HostLost")] == [{
        "host": "h1", "incarnation": INCARNATION, "at": TIMEOUT + 1,
        "reason": "no heartbeat for 5.0s", "runs": ["j1-0-1", "j1-1-1"]}]
    assert of(out, "HostLost")[0].key == "h1"
    assert of(tick(book, TIMEOUT + 500), "HostLost") == []  # said once
    assert not book.hosts["h1"].available and book.hosts["h1"].allocated == Resources()
    assert of(tick(book, 4000 + TIMEOUT + 1), "HostLost")[0].body["host"] == "h2"


def test_heartbeats_keep_a_host_alive() -> None:
    book = book_with("h1")
    for t in range(1000, 20_001, 1000):
        book.fold("HostStatusReported", heartbeat("h1", t), received_ms=t)
        assert of(tick(book, t + TIMEOUT), "HostLost") == []


def test_heartbeats_of_another_incarnation_do_not_count() -> None:
    book = book_with("h1")
    book.fold("HostStatusReported", heartbeat("h1", 4000, incarnation="inc-0"),
              received_ms=4000)
    assert of(tick(book, TIMEOUT + 1), "HostLost") != []


def test_heartbeats_out_of_order_never_move_last_seen_back() -> None:
    book = book_with("h1")
    book.fold("HostStatusReported", heartbeat("h1", 4000), received_ms=4000)
    book.fold("HostStatusReported", heartbeat("h1", 1000), received_ms=1000)
    assert of(tick(book, 4000 + TIMEOUT), "HostLost") == []


def test_a_new_incarnation_loses_the_runs_of_the_old_one() -> None:
    book = book_with("h1")
    assert launched(place(book, placement("j1", 0, "h1", cpu=2)))
    book.fold("HostRegistered", host_registered("h1", incarnation="inc-2", at=300))
    out = tick(book, 400)
    assert [e.body for e in of(out, "HostLost")] == [{
        "host": "h1", "incarnation": INCARNATION, "at": 400,
        "reason": "agent restarted (new incarnation)", "runs": ["j1-0-1"]}]
    (offer,) = of(out, "OfferReceived")[0].body["offers"]
    assert offer["incarnation"] == "inc-2" and offer["available"]
    assert offer["free"]["cpu"] == 4.0 and offer["used_ports"] == []
    assert of(tick(book, 500), "HostLost") == []
    # the new incarnation takes placements; the old one's are stale
    out = place(book, placement("j1", 1, "h1", incarnation="inc-2"),
                placement("j1", 2, "h1", incarnation=INCARNATION), now=600)
    assert launched(out) == [("h1", "j1", 1)]
    assert rejections(out) == [("j1", 2, "host h1 restarted (incarnation changed)")]


def test_registering_the_same_incarnation_again_changes_nothing() -> None:
    book = book_with("h1")
    assert launched(place(book, placement("j1", 0, "h1", cpu=2)))
    book.fold("HostRegistered", host_registered("h1", at=300))
    assert tick(book, 400) == []
    assert book.hosts["h1"].allocated.cpu == 2


def test_a_lost_host_that_comes_back_with_a_new_incarnation_is_offered_again() -> None:
    book = book_with("h1")
    tick(book, TIMEOUT + 1)
    book.fold("HostRegistered", host_registered("h1", incarnation="inc-2", at=TIMEOUT + 2))
    out = tick(book, TIMEOUT + 3)
    assert of(out, "HostLost") == []  # nothing was running on the lost incarnation
    assert of(out, "OfferReceived")[0].body["offers"][0]["available"] is True


# ------------------------------------------------------------------- releases


@pytest.mark.parametrize("state", ["SUCCEEDED", "FAILED", "KILLED", "LOST"])
def test_a_terminal_agent_status_releases_the_run(state: str) -> None:
    book = book_with("h1")
    assert launched(place(book, placement("j1", 0, "h1", cpu=3, ports={"http": 31000})))
    book.fold("TaskStatusReported", agent_status("h1", "j1", 0, state))
    host = book.hosts["h1"]
    assert host.allocated == Resources() and not host.used_ports and host.runs == {}
    assert launched(place(book, placement("j1", 1, "h1", cpu=4, ports={"http": 31000}),
                          now=200))


@pytest.mark.parametrize("state", ["LAUNCHED", "STARTING", "RUNNING"])
def test_a_live_agent_status_keeps_the_run(state: str) -> None:
    book = book_with("h1")
    assert launched(place(book, placement("j1", 0, "h1", cpu=3)))
    book.fold("TaskStatusReported", agent_status("h1", "j1", 0, state))
    assert book.hosts["h1"].allocated.cpu == 3


def test_statuses_from_another_incarnation_or_host_release_nothing() -> None:
    book = book_with("h1")
    assert launched(place(book, placement("j1", 0, "h1", cpu=3)))
    book.fold("TaskStatusReported", agent_status("h1", "j1", 0, "FAILED", incarnation="x"))
    book.fold("TaskStatusReported", agent_status("h2", "j1", 0, "FAILED"))
    book.fold("TaskStatusReported", agent_status("h1", "j1", 1, "FAILED"))
    assert book.hosts["h1"].allocated.cpu == 3


def test_a_bogus_huge_run_number_does_not_stall_the_fold() -> None:
    book = book_with("h1")
    assert launched(place(book, placement("j1", 0, "h1", cpu=3)))
    book.fold("PlacementMade", placement_made(placement("j1", 0, "h1", run=5), round_=900),
              received_ms=100)
    book.fold("TaskStatusReported", agent_status("h1", "j1", 0, "FAILED", run=10**15))
    assert book.pending == {} and set(book.hosts["h1"].runs) == {("j1", 0, 1)}


def test_the_end_of_a_later_run_leaves_an_earlier_run_held_until_its_own_end() -> None:
    """Run 1 may be a stray launch still running (the job manager killed it as PLACED
    while we launched it): only its own end or its host's loss frees its room."""
    book = book_with("h1", "h2")
    assert launched(place(book, placement("j1", 0, "h1", cpu=3)))
    book.fold("TaskStatusReported", agent_status("h2", "j1", 0, "FAILED", run=2))
    assert book.hosts["h1"].allocated.cpu == 3
    book.fold("TaskStatusReported", agent_status("h1", "j1", 0, "KILLED", run=1))
    assert book.hosts["h1"].allocated == Resources()


@pytest.mark.parametrize("state", ["SUCCEEDED", "FAILED", "KILLED", "LOST"])
def test_a_terminal_task_state_change_releases_the_run(state: str) -> None:
    book = book_with("h1")
    assert launched(place(book, placement("j1", 0, "h1", cpu=3)))
    book.fold("TaskStateChanged", task_state_changed("j1", (0, state), host="h1",
                                                     previous="RUNNING"))
    assert book.hosts["h1"].allocated == Resources()


def test_releasing_twice_releases_once() -> None:
    book = book_with("h1")
    assert launched(place(book, placement("j1", 0, "h1", cpu=2), placement("j1", 1, "h1")))
    status = agent_status("h1", "j1", 0, "SUCCEEDED")
    book.fold("TaskStatusReported", status)
    book.fold("TaskStatusReported", status)
    book.fold("TaskStateChanged", task_state_changed("j1", (0, "SUCCEEDED"), host="h1",
                                                     previous="RUNNING"))
    assert book.hosts["h1"].allocated == Resources(1, 64)


# --------------------------------------------------------------------- offers


def test_offers_only_for_changed_hosts() -> None:
    book = HostBook(heartbeat_timeout_ms=TIMEOUT)
    for name in ("h1", "h2"):
        book.fold("HostRegistered", host_registered(name))
    book.fold("JobCreated", job_created("j1", 2, ports=("http",)))
    first = of(tick(book, 10), "OfferReceived")
    assert [o["host"] for o in first[0].body["offers"]] == ["h1", "h2"]
    assert tick(book, 20) == []
    book.fold("HostStatusReported", heartbeat("h1", 30), received_ms=30)
    assert tick(book, 40) == []  # a heartbeat changes nothing worth offering
    out = place(book, placement("j1", 0, "h1", cpu=1.5, ports={"http": 31003}), now=50)
    (offer,) = of(out, "OfferReceived")[0].body["offers"]
    assert offer["host"] == "h1" and offer["free"]["cpu"] == 2.5
    assert offer["used_ports"] == [31003]
    assert offer["task_label_counts"] == {"peloton.job_id=j1": 1}
    assert offer["generation"] > first[0].body["offers"][0]["generation"]
    book.fold("TaskStatusReported", agent_status("h1", "j1", 0, "SUCCEEDED"))
    (offer,) = of(tick(book, 60), "OfferReceived")[0].body["offers"]
    assert offer["free"]["cpu"] == 4.0 and offer["task_label_counts"] == {}
    assert tick(book, 70) == []


def test_a_lost_host_is_offered_as_unavailable() -> None:
    book = book_with("h1")
    out = tick(book, TIMEOUT + 1)
    (offer,) = of(out, "OfferReceived")[0].body["offers"]
    assert offer["host"] == "h1" and offer["available"] is False


def test_a_tick_decides_losses_then_launches_then_offers() -> None:
    book = book_with("h1", "h2")
    book.fold("HostStatusReported", heartbeat("h2", TIMEOUT), received_ms=TIMEOUT)
    book.fold("PlacementMade", placement_made(placement("j1", 0, "h1"),
                                              placement("j1", 1, "h2")))
    out = tick(book, TIMEOUT + 1)
    assert [e.type for e in out] == ["HostLost", "HostStateChanged", "TaskLaunchRequested",
                                     "PlacementRejected", "OfferReceived"]
    assert rejections(out) == [("j1", 0, "host h1 is lost")]


# ------------------------------------------------------------------- property

HOSTS = ("h1", "h2", "h3")


@st.composite
def host_histories(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """Registrations, placement batches (mostly plausible, some stale), releases,
    heartbeats and ticks."""
    steps: list[tuple[str, Any]] = []
    caps = {h: draw(st.sampled_from([1.0, 2.0, 4.0])) for h in HOSTS}
    incarnation = dict.fromkeys(HOSTS, 1)
    for h in HOSTS:
        steps.append(("HostRegistered", host_registered(h, cpu=caps[h], mem=1000,
                                                         ports=(31000, 31003),
                                                         incarnation="i1")))
    runs = 0
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(["place", "place", "place", "tick", "tick", "release",
                                     "heartbeat", "reregister"]))
        host = draw(st.sampled_from(HOSTS))
        if kind == "place":
            batch = []
            for _ in range(draw(st.integers(1, 4))):
                runs += 1
                h = draw(st.sampled_from(HOSTS))
                inc = incarnation[h] - draw(st.sampled_from([0, 0, 0, 1]))
                port = draw(st.sampled_from([None, 31000, 31001, 31003, 31004]))
                batch.append(placement(
                    "j1", runs % 50, h, run=runs // 50 + 1, incarnation=f"i{inc}",
                    cpu=draw(st.sampled_from([0.5, 1.0, 1.5, 3.0])),
                    mem=draw(st.sampled_from([0.0, 400.0])),
                    ports={"http": port} if port else None))
            steps.append(("PlacementMade", placement_made(*batch)))
        elif kind == "release":
            steps.append(("release", draw(st.integers(0, 10**6))))
        elif kind == "heartbeat":
            steps.append(("HostStatusReported", heartbeat(host, 0, incarnation=f"i"
                                                          f"{incarnation[host]}")))
        elif kind == "reregister":
            incarnation[host] += 1
            steps.append(("HostRegistered", host_registered(
                host, cpu=caps[host], mem=1000, ports=(31000, 31003),
                incarnation=f"i{incarnation[host]}")))
        else:
            steps.append(("tick", draw(st.sampled_from([100, 100, 2000, 6000]))))
    steps.append(("tick", 100))
    return steps


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(host_histories())
def test_random_placements_never_double_book_a_host(steps: list[tuple[str, Any]]) -> None:
    book = HostBook(heartbeat_timeout_ms=TIMEOUT)
    book.fold("JobCreated", job_created("j1", 50, ports=("http",)))
    now = 0
    live: dict[tuple[str, str], dict[tuple[str, int, int], Body]] = {}  # (host, inc) -> runs
    caps: dict[str, float] = {}
    for kind, arg in steps:
        if kind == "tick":
            now += arg
            for ev in tick(book, now):
                if ev.type == "TaskLaunchRequested":
                    runs = live.setdefault((ev.body["host"], ev.body["incarnation"]), {})
                    for x in ev.body["launches"]:
                        key = (x["job_id"], x["instance"], x["run"])
                        assert key not in runs
                        runs[key] = x
                elif ev.type == "HostLost":
                    live.pop((ev.body["host"], ev.body["incarnation"]), None)
        elif kind == "release":
            everything = sorted((h, inc, k) for (h, inc), runs in live.items() for k in runs)
            if everything:
                h, inc, key = everything[arg % len(everything)]
                book.fold("TaskStatusReported", agent_status(h, key[0], key[1], "SUCCEEDED",
                                                             run=key[2], incarnation=inc))
                if book.hosts[h].incarnation == inc:
                    del live[(h, inc)][key]
        else:
            if kind == "HostStatusReported":
                arg = {**arg, "at": now}
            if kind == "HostRegistered":
                arg = {**arg, "at": now}
                caps[arg["host"]] = arg["capacity"]["cpu"]
            book.fold(kind, arg, received_ms=now)
        for name, host in book.hosts.items():
            runs = live.get((name, host.incarnation), {}) if host.available else {}
            total = sum((Resources.from_mapping(x["resources"]) for x in runs.values()),
                        Resources())
            assert total.fits_in(host.capacity), (name, total)
            assert total.cpu <= caps[name] + EPSILON
            ports = [p for x in runs.values() for p in x["ports"].values()]
            assert len(ports) == len(set(ports)), (name, ports)
            assert all(31000 <= p <= 31003 for p in ports)
            assert set(host.runs) == set(runs)  # the book agrees with what was launched
            assert abs(host.allocated.cpu - total.cpu) <= EPSILON


# ------------------------------------------------------------------------ bugs


def test_a_rejected_run_placed_again_is_validated_again() -> None:
    book = book_with("h1", "h2")
    out = place(book, placement("j1", 0, "h1", incarnation="inc-0"))
    assert rejections(out) == [("j1", 0, "host h1 restarted (incarnation changed)")]
    out = place(book, placement("j1", 0, "h2"), now=200)  # placement's second try
    assert launched(out) + rejections(out) != []


def test_a_launch_record_read_after_the_release_does_not_hold_resources() -> None:
    book = book_with("h1")
    book.fold("PlacementMade", placement_made(placement("j1", 0, "h1", cpu=3)))
    (launch_ev,) = of(book.tick(100), "TaskLaunchRequested")  # not read back yet
    book.fold("TaskStatusReported", agent_status("h1", "j1", 0, "FAILED"))  # fails at once
    book.fold(launch_ev.type, launch_ev.body)  # hostmgr's consumer of its own topic lags
    assert book.hosts["h1"].allocated == Resources()


# ------------------------------------------------------- early facts wait, bounded


def test_a_placement_read_before_its_job_waits_for_the_job_and_launches() -> None:
    book = book_with("h1")
    out = place(book, placement("j9", 0, "h1", cpu=1), now=100)
    assert out == [] and list(book.pending) == [("j9", 0, 1)]  # held, not rejected
    assert tick(book, 100 + HOLD) == []  # still within the wait
    book.fold("JobCreated", job_created("j9", 2))
    assert launched(tick(book, 100 + HOLD)) == [("h1", "j9", 0)]
    assert book.pending == {}


def test_a_placement_whose_job_never_comes_is_rejected_after_the_wait() -> None:
    book = book_with("h1")
    assert place(book, placement("j9", 0, "h1"), now=100) == []
    out = tick(book, 101 + HOLD)
    assert rejections(out) == [("j9", 0, "unknown job j9 (no JobCreated read)")]
    assert book.pending == {} and book.hosts["h1"].allocated == Resources()


def test_the_wait_counts_from_when_the_placement_was_read() -> None:
    book = book_with("h1", timeout=10**9)
    # made long ago (a lagging consumer), read now: it still gets the whole wait
    assert place(book, placement("j9", 0, "h1"), now=50_000, received=50_000) == []
    assert tick(book, 50_000 + HOLD) == []
    assert rejections(tick(book, 50_001 + HOLD)) != []


def test_a_placement_on_a_host_not_registered_yet_waits_for_it() -> None:
    book = book_with("h1")
    assert place(book, placement("j1", 0, "h7", cpu=1), now=100) == []
    book.fold("HostRegistered", host_registered("h7"), received_ms=200)
    assert launched(tick(book, 300)) == [("h7", "j1", 0)]
    assert book.hosts["h7"].allocated.cpu == 1


def test_a_placement_on_an_unknown_host_is_rejected_after_the_wait() -> None:
    book = book_with("h1")
    assert place(book, placement("j1", 0, "h9"), now=100) == []
    assert rejections(tick(book, 101 + HOLD)) == [("j1", 0, "unknown host h9")]


def test_a_placement_on_an_incarnation_not_registered_yet_waits_for_it() -> None:
    book = book_with("h1")
    assert place(book, placement("j1", 0, "h1", incarnation="inc-2"), now=100) == []
    book.fold("HostRegistered", host_registered("h1", incarnation="inc-2"), received_ms=150)
    out = tick(book, 200)
    assert launched(out) == [("h1", "j1", 0)]
    assert place(book, placement("j1", 1, "h1", incarnation="inc-3"), now=300) == []
    assert rejections(tick(book, 301 + HOLD)) == [
        ("j1", 1, "host h1: incarnation inc-3 never registered")]


def test_a_placement_of_a_run_that_already_ended_is_moot() -> None:
    book = book_with("h1")
    book.fold("TaskStateChanged", task_state_changed("j1", (0, "KILLED"), previous="PLACED"))
    assert place(book, placement("j1", 0, "h1")) == []
    assert book.pending == {}
    # and a placement read before the end: the end makes it moot too
    book.fold("PlacementMade", placement_made(placement("j1", 1, "h1"), round_=999),
              received_ms=100)
    book.fold("TaskStateChanged", task_state_changed("j1", (1, "KILLED"), previous="PLACED"))
    assert tick(book, 200) == [] and book.hosts["h1"].allocated == Resources()


def test_a_kill_of_a_placed_run_read_after_our_launch_keeps_its_room_until_the_agent_ends_it(
        ) -> None:
    """Found by the live property: the job manager kills a run it knows only as PLACED
    while we launch it. The agent runs our launch until it reports the run's end, so the
    kill alone must not free the room (that double-booked the host)."""
    book = book_with("h1")
    assert launched(place(book, placement("j1", 0, "h1", cpu=3, ports={"http": 31000})))
    book.fold("TaskStateChanged", task_state_changed("j1", (0, "KILLED"), previous="PLACED"))
    assert book.hosts["h1"].allocated.cpu == 3
    out = place(book, placement("j1", 1, "h1", cpu=2, ports={"http": 31000}), now=200)
    assert rejections(out) == [("j1", 1, "host h1 no longer fits: cpu 2>1")]
    book.fold("TaskStatusReported", agent_status("h1", "j1", 0, "KILLED"))
    assert book.hosts["h1"].allocated == Resources() and not book.hosts["h1"].used_ports
    # and no placement of the withdrawn run is decided, whatever its round
    book.fold("PlacementMade", placement_made(placement("j1", 2, "h1"), round_=10**9))
    book.fold("TaskStateChanged", task_state_changed("j1", (2, "KILLED"), previous="READY"))
    assert book.pending == {}
    book.fold("PlacementMade", placement_made(placement("j1", 2, "h1"), round_=10**10))
    assert book.pending == {} and launched(tick(book, 300)) == []


def test_a_newer_run_placed_before_the_old_ones_placement_was_read() -> None:
    book = book_with("h1")
    book.fold("TaskStateChanged", task_state_changed("j1", (0, "FAILED"), previous="RUNNING"))
    assert launched(place(book, placement("j1", 0, "h1", run=2)))
    assert place(book, placement("j1", 0, "h1", run=1), now=200) == []  # stale
    assert set(book.hosts["h1"].runs) == {("j1", 0, 2)}


# ----------------------------------------------------- losses and revival, in any order


def test_a_lost_host_comes_back_with_a_heartbeat_and_our_late_loss_keeps_its_new_runs() -> None:
    book = book_with("h1")
    assert launched(place(book, placement("j1", 0, "h1", cpu=1)))
    out = book.tick(TIMEOUT + 1)  # decides the loss; our consumer reads it back later
    (lost,) = of(out, "HostLost")
    assert not book.hosts["h1"].available
    book.fold("HostStatusReported", heartbeat("h1", TIMEOUT + 2), received_ms=TIMEOUT + 2)
    assert book.hosts["h1"].available
    assert launched(place(book, placement("j1", 1, "h1", cpu=3), now=TIMEOUT + 3))
    book.fold(lost.type, lost.body)  # read back late: covers only what it covered
    assert set(book.hosts["h1"].runs) == {("j1", 1, 1)}
    assert book.hosts["h1"].allocated.cpu == 3 and book.hosts["h1"].available


def test_a_replayed_heartbeat_changes_nothing() -> None:
    book = book_with("h1")
    tick(book, TIMEOUT + 1)
    before = book.hosts["h1"].last_seen_ms
    book.fold("HostStatusReported", heartbeat("h1", TIMEOUT + 50))  # replay: no read time
    assert book.hosts["h1"].last_seen_ms == before and not book.hosts["h1"].available


def test_a_launch_read_before_its_host_registered_is_held_until_it_does() -> None:
    book = HostBook(heartbeat_timeout_ms=TIMEOUT)
    book.fold("TaskLaunchRequested", launch_requested("h1", launch("j1", 0, cpu=3), at=10))
    assert book.hosts == {}
    book.fold("HostRegistered", host_registered("h1", at=5))
    assert book.hosts["h1"].allocated.cpu == 3 and book.early == {}


def test_a_loss_read_before_its_host_registered_is_held_until_it_does() -> None:
    book = HostBook(heartbeat_timeout_ms=TIMEOUT)
    book.fold("HostLost", host_lost("h1", at=20))
    book.fold("TaskLaunchRequested", launch_requested("h1", launch("j1", 0, cpu=3), at=10))
    book.fold("HostRegistered", host_registered("h1", at=5))
    assert not book.hosts["h1"].available and book.hosts["h1"].allocated == Resources()


def test_a_launch_of_an_old_incarnation_read_late_holds_nothing() -> None:
    book = book_with("h1")  # inc-0 then inc-1
    book.fold("TaskLaunchRequested", launch_requested("h1", launch("j1", 0, cpu=3),
                                                      incarnation="inc-0", at=10))
    assert book.hosts["h1"].allocated == Resources() and book.early == {}


def test_task_label_counts_keep_no_zero_entries() -> None:
    book = book_with("h1", jobs={"j1": 1, "j2": 1})
    assert launched(place(book, placement("j1", 0, "h1"), placement("j2", 0, "h1")))
    book.fold("TaskStatusReported", agent_status("h1", "j1", 0, "SUCCEEDED"))
    assert dict(book.hosts["h1"].job_counts) == {"j2": 1}
