"""The board is blind to the order across topics.

A small world around one board: jobmgr's job-events (JobCreated, and LAUNCHING once a run
is launched), resmgr's tasks-admitted, hostmgr deciding each placement the board
publishes (launch it, or reject it: once per drawn run, or because it does not fit) and
answering on task-launch-requested / placement-rejected / offer-received, and the board's
own placement-made read back; a launched run may fail once (hostmgr frees its room,
jobmgr says FAILED, resmgr admits its next run). Hypothesis picks which topic the board
reads next (each topic in its own order; the last record read may come again, as after
a restart), when the board runs a round, when hostmgr answers and when a run fails. Then
every topic is drained.

Properties: hostmgr never finds a placement that does not fit its host (no host is
double-booked) nor a run placed again after it was launched; and at the end, with room
for every run, the latest run of every instance was launched (none waits forever).
"""

from __future__ import annotations

from typing import Any

from event_bodies import (
    job_created,
    launch,
    launch_requested,
    offer,
    offer_received,
    task_state_changed,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from peloton.placement.domain.board import PlacementBoard, RunKey

Body = dict[str, Any]
CPUS = {"h1": 4, "h2": 3, "h3": 2}  # room for every run below (8 runs of 1 cpu)
JOBS: dict[str, dict[str, Any]] = {
    "a": {"instances": 3},
    "b": {"instances": 2, "priority": 2},
    "g": {"instances": 3, "min_running": 3},  # a gang
}
RUNS = [(job, i, 1) for job, kw in JOBS.items() for i in range(kw["instances"])]
TOPICS = ("job-events", "tasks-admitted", "offer-received", "placement-made",
          "placement-rejected", "task-launch-requested")


class World:
    def __init__(self, admissions: list[list[RunKey]], reject_once: set[RunKey],
                 job_order: list[str]) -> None:
        self.board = PlacementBoard()
        self.topics: dict[str, list[tuple[str, Body]]] = {t: [] for t in TOPICS}
        self.read = dict.fromkeys(TOPICS, 0)  # the board's offsets
        self.decided = 0  # hostmgr's offset on placement-made
        self.used = dict.fromkeys(CPUS, 0)
        self.generation = dict.fromkeys(CPUS, 1)
        self.launched: dict[RunKey, str] = {}
        self.failed: set[RunKey] = set()
        self.reject_once = set(reject_once)
        self.drawn = (admissions, sorted(reject_once), job_order)
        self.violations: list[str] = []
        self.now = 0
        self.last_tick = 0
        for job in job_order:
            self.topics["job-events"].append(("JobCreated", job_created(job, cpu=1.0,
                                                                        **JOBS[job])))
        for batch in admissions:
            self.topics["tasks-admitted"].append(("TasksAdmitted", {"at": 0, "pool": "/p",
                "tasks": [{"job_id": j, "instance": i, "run": r} for j, i, r in batch]}))
        self.topics["offer-received"].append(("OfferReceived", offer_received(
            *(offer(h, cpu=c, generation=1) for h, c in CPUS.items()))))

    def __repr__(self) -> str:
        return f"World{self.drawn!r}"

    # ---- what may happen next ---------------------------------------------------------
    def actions(self) -> list[str]:
        out = [f"read {t}" for t in TOPICS if self.read[t] < len(self.topics[t])]
        out += [f"again {t}" for t in TOPICS if self.read[t]]
        out.append("round")
        if self.decided < len(self.topics["placement-made"]):
            out.append("hostmgr")
        if self.can_fail():
            out.append("fail")
        return out

    def can_fail(self) -> list[RunKey]:
        return sorted(k for k in self.launched if k[2] == 1 and k not in self.failed)

    def latest_runs(self) -> list[RunKey]:
        return sorted((j, i, 2 if (j, i, 1) in self.failed else 1) for j, i, _ in RUNS)

    def do(self, action: str) -> None:
        self.now += 1
        verb, _, topic = action.partition(" ")
        if verb == "read":
            self.board.fold(*self.topics[topic][self.read[topic]])
            self.read[topic] += 1
        elif verb == "again":
            self.board.fold(*self.topics[topic][self.read[topic] - 1])
        elif verb == "fail":
            self.fail(self.can_fail()[0])
        elif verb == "round":
            for ev in self.board.next_round(self.now):
                if ev.type == "PlacementMade":
                    self.topics["placement-made"].append((ev.type, ev.body))
        else:
            self.hostmgr()

    def hostmgr(self) -> None:
        """One hostmgr tick: decide every placement not decided yet: launch it where it
        fits (one tick: the launches and the offers that count them share `at`). Its
        clock is coarse, so an offer, the placements made against it and their launches
        often share a millisecond; its ticks are stamped with a strictly rising clock,
        as hostmgr's are (one tick per `at`)."""
        at = self.tick_at()
        launches: dict[str, list[Body]] = {}
        for _, body in self.topics["placement-made"][self.decided:]:
            for p in body["placements"]:
                key, host = (p["job_id"], p["instance"], p["run"]), p["host"]
                if key in self.launched:
                    self.violations.append(f"{key} placed again after its launch")
                elif key in self.reject_once or self.used[host] + 1 > CPUS[host]:
                    if key not in self.reject_once:
                        self.violations.append(f"{host} double-booked by {key}")
                    self.reject_once.discard(key)
                    self.topics["placement-rejected"].append(("PlacementRejected", {
                        "at": at, "rejections": [{**dict(zip(("job_id", "instance",
                                                                      "run"), key, strict=True)),
                                                        "host": host, "reason": "stale",
                                                        "round": body["round"]}]}))
                else:
                    self.used[host] += 1
                    self.generation[host] += 1
                    self.launched[key] = host
                    launches.setdefault(host, []).append(
                        launch(key[0], key[1], run=key[2], cpu=1.0, round_=body["round"]))
        self.decided = len(self.topics["placement-made"])
        for host, items in sorted(launches.items()):
            self.topics["task-launch-requested"].append(("TaskLaunchRequested",
                launch_requested(host, *items, at=at)))
            for item in items:
                self.topics["job-events"].append(("TaskStateChanged", task_state_changed(
                    item["job_id"], (item["instance"], "LAUNCHING"), previous="PLACED",
                    host=host, at=at)))
        if launches:
            self.topics["offer-received"].append(("OfferReceived", offer_received(
                *(offer(h, cpu=CPUS[h], free_cpu=CPUS[h] - self.used[h],
                        generation=self.generation[h]) for h in sorted(launches)),
                at=at)))

    def tick_at(self) -> int:
        self.last_tick = max(self.last_tick + 1, self.now // 16)
        return self.last_tick

    def fail(self, key: RunKey) -> None:
        """The run fails on its host: hostmgr frees its room (a new offer), jobmgr says
        FAILED and resmgr admits its next run (which a gang member runs alone)."""
        host, at = self.launched[key], self.tick_at()
        self.failed.add(key)
        self.used[host] -= 1
        self.generation[host] += 1
        self.topics["offer-received"].append(("OfferReceived", offer_received(offer(
            host, cpu=CPUS[host], free_cpu=CPUS[host] - self.used[host],
            generation=self.generation[host]), at=at)))
        self.topics["job-events"].append(("TaskStateChanged", task_state_changed(
            key[0], (key[1], "FAILED"), previous="RUNNING", host=host, at=at)))
        self.topics["tasks-admitted"].append(("TasksAdmitted", {"at": at, "pool": "/p",
            "tasks": [{"job_id": key[0], "instance": key[1], "run": 2}]}))

    def drain(self) -> None:
        """Read every topic to its end, one record then one round at a time (as the
        service ticks between records), hostmgr answering, until nothing is left."""
        for _ in range(100):
            before = self.progress()
            for topic in TOPICS:
                if self.read[topic] < len(self.topics[topic]):
                    self.do(f"read {topic}")
                    self.do("round")
            self.do("hostmgr")
            self.do("round")
            self.now += 32  # time passes between tries
            if before == self.progress():
                return

    def progress(self) -> tuple[Any, ...]:
        return (dict(self.read), self.decided, [len(self.topics[t]) for t in TOPICS])


@st.composite
def worlds(draw: st.DrawFn) -> World:
    order = draw(st.permutations(RUNS))
    cuts = sorted(draw(st.sets(st.integers(1, len(order) - 1), max_size=4)))
    admissions = [list(order[a:b]) for a, b in zip([0, *cuts], [*cuts, len(order)],
                                                   strict=True)]
    rejects = draw(st.sets(st.sampled_from(RUNS), max_size=3))
    return World(admissions, rejects, draw(st.permutations(sorted(JOBS))))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.data())
def test_any_interleaving_never_double_books_and_places_every_admitted_run(
        world: World, data: st.DataObject) -> None:
    for _ in range(data.draw(st.integers(0, 60))):
        world.do(data.draw(st.sampled_from(world.actions())))
        assert world.violations == []
    world.drain()
    assert world.violations == []
    assert sorted(set(world.launched) - world.failed) == world.latest_runs()
    assert world.board.queue == {} and world.board.inflight == {}
    assert all(world.used[h] <= CPUS[h] for h in CPUS)
